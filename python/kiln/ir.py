# SPDX-License-Identifier: Apache-2.0
"""kiln's tensor IR: modules in the text format, their functions, structural equality and hashing.

    mod = kiln.ir.IRModule.from_text(text)     # or kiln.ir.parse(text)
    print(mod)                                 # the text format, which from_text reads back
    f = mod["main"]; f.params, f.ret_type, f.attrs
    kiln.ir.structural_equal(a, b); kiln.ir.structural_hash(a)
"""
from ._kiln.ir import (IRModule, BaseFunc, Var, structural_equal, structural_hash,  # noqa: F401
                       assert_structural_equal)

Function = BaseFunc


def parse(text):
    """The module written in the text format `text` (IRModule.from_text)."""
    return IRModule.from_text(text)


def load(path):
    """The module in the text file at `path`."""
    with open(path, encoding="utf-8") as f:
        return IRModule.from_text(f.read())


def _module_eq(self, other):
    # Modules compare by identity, as TVM's objects do; structural_equal compares structure.
    return isinstance(other, IRModule) and self.same_as(other)


IRModule.__eq__ = _module_eq
IRModule.__hash__ = lambda self: structural_hash(self)

__all__ = ["IRModule", "BaseFunc", "Function", "Var", "parse", "load", "structural_equal", "structural_hash",
           "assert_structural_equal"]
