# SPDX-License-Identifier: Apache-2.0
"""kiln's tensor IR: modules in the text format, their functions, structural equality and hashing.

    mod = kiln.ir.IRModule.from_text(text)     # or kiln.ir.parse(text)
    print(mod)                                 # the text format, large constants elided (mod.show())
    text = mod.script(show_meta=True)          # every constant: from_text reads it back
    f = mod["main"]; f.params, f.ret_type, f.attrs
    kiln.ir.structural_equal(a, b); kiln.ir.structural_hash(a)
"""
from ._kiln.ir import (IRModule, BaseFunc, Expr, Binding, BindingBlock, structural_equal,  # noqa: F401
                       structural_hash, assert_structural_equal, call_op, const, tuple_, tuple_get_item,
                       prim_value, string_imm, post_order_visit, PrimExpr, size_var, var)
from ._kiln.ir import _BlockBuilder
from ._kiln.ir import _mutate_expr, _mutate_function, _mutate_module

Function = BaseFunc
Var = Expr


class ExprMutator:
    """Rewrites expressions bottom-up: subclass it and define any of

        rewrite_call(self, call) / rewrite_tuple(self, t) / rewrite_tuple_get_item(self, t) /
        rewrite_constant(self, c)

    Each receives a node whose children were already rewritten and returns its replacement (a
    kiln.ir.Expr, e.g. from kiln.ir.call_op) or None to keep it. A binding whose new value no longer
    fits its variable's type gets a new variable, and its uses follow. What nothing changed is
    returned as the same object (mod.same_as(result)), so a pass that rewrote nothing changes nothing.

        class ReluToClip(kiln.ir.ExprMutator):
            def rewrite_call(self, call):
                if call.op == "nn.relu":
                    return kiln.ir.call_op("clip", [call.args[0]], {"min": 0.0, "max": 6.0})
                return None

        @kiln.transform.function_pass(opt_level=0)
        def relu_to_clip(func, mod, ctx):
            return ReluToClip().visit_function(func)
    """

    def visit_expr(self, expr):
        """`expr` rewritten bottom-up by this mutator's rewrite_* methods (itself when nothing changed)."""
        return _mutate_expr(self, expr)

    def visit_function(self, func):
        """The graph-level function `func` with its body rewritten (a TypeError for a prim_func)."""
        return _mutate_function(self, func)

    def visit_module(self, mod):
        """`mod` with every graph-level function rewritten."""
        return _mutate_module(self, mod)


class BlockBuilder:
    """Builds functions binding by binding, as Relax's BlockBuilder (and kiln's C++ block_builder):

        n = kiln.ir.size_var("n")
        x, w = kiln.ir.var("x", (n, 784)), kiln.ir.var("w", (784, 10))
        bb = kiln.ir.BlockBuilder()
        with bb.function("main", [x, w]):
            with bb.dataflow():
                lv = bb.emit(kiln.ir.call_op("matmul", [x, w]))
                gv = bb.emit_output(kiln.ir.call_op("nn.relu", [lv]))
            bb.emit_func_output(gv)
        mod = bb.get()

    Calls are type-checked as they are built. A `with` block left by an exception discards what it
    built, leaving the builder as before it.
    """

    def __init__(self):
        self._bb = _BlockBuilder()
        self._closed = False

    class _Function:
        def __init__(self, builder, name, params, attrs):
            self._builder, self._name, self._params, self._attrs = builder, name, params, attrs

        def __enter__(self):
            self._builder._bb.begin_function(self._name, list(self._params), self._attrs or {})
            self._builder._closed = False
            return self._builder

        def __exit__(self, ptype, value, trace):
            bb = self._builder
            if ptype is not None:
                bb._bb.abandon_function()
                return False
            if bb._bb.in_function:
                bb._bb.abandon_function()
                raise ValueError("kiln.ir.BlockBuilder: function '%s' ended without emit_func_output" % self._name)
            return False

    class _Dataflow:
        def __init__(self, builder):
            self._builder = builder

        def __enter__(self):
            self._builder._bb.begin_dataflow()
            return self._builder

        def __exit__(self, ptype, value, trace):
            if ptype is not None:
                self._builder._bb.abandon_dataflow()
                return False
            self._builder._bb.end_dataflow()
            return False

    def function(self, name, params, attrs=None):
        """A `with` scope building function `name` with parameters `params` (kiln.ir.var)."""
        return BlockBuilder._Function(self, name, params, attrs)

    def dataflow(self):
        """A `with` scope for a dataflow block: emit binds dataflow variables, emit_output its outputs."""
        return BlockBuilder._Dataflow(self)

    def emit(self, value, name_hint=""):
        """Binds `value` to a new variable and returns the variable."""
        return self._bb.emit(value, name_hint)

    def emit_output(self, value, name_hint="gv"):
        """Binds `value` to a variable visible after the dataflow block."""
        return self._bb.emit_output(value, name_hint)

    def emit_func_output(self, result):
        """Ends the function with `result` as its value."""
        self._bb.end_function(result)

    def call(self, name, args):
        """A call of function `name` of the module being built."""
        return self._bb.call(name, list(args))

    def get(self):
        """The module built so far."""
        return self._bb.get()


def parse(text):
    """The module written in the text format `text` (IRModule.from_text)."""
    return IRModule.from_text(text)


def load(path):
    """The module in the text file at `path`."""
    with open(path, encoding="utf-8") as f:
        return IRModule.from_text(f.read())


def save(mod, path):
    """Writes `mod` to `path` in the text format with every constant (load reads it back)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(mod.script(show_meta=True))


def _module_eq(self, other):
    # Modules compare by identity, as TVM's objects do; structural_equal compares structure.
    return isinstance(other, IRModule) and self.same_as(other)


IRModule.__eq__ = _module_eq
IRModule.__hash__ = lambda self: structural_hash(self)

__all__ = ["IRModule", "BaseFunc", "Function", "Expr", "Var", "PrimExpr", "size_var", "var", "BlockBuilder", "Binding", "BindingBlock", "ExprMutator", "parse", "load", "save",
           "structural_equal", "structural_hash", "assert_structural_equal", "call_op", "const", "tuple_",
           "tuple_get_item", "prim_value", "string_imm", "post_order_visit"]
