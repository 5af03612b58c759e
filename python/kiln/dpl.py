# SPDX-License-Identifier: Apache-2.0
"""Dataflow patterns and rewriting, the role of Relax's tvm.relax.dpl, over kiln's C++ pattern
language (transform/pattern.hpp, pattern_rewrite.hpp).

    from kiln.dpl import is_op, wildcard, rewrite_bindings
    x, w, b = wildcard("x"), wildcard("w"), wildcard("b")
    dense = is_op("add")(is_op("matmul")(x, w), b).commutative()

    def to_linear(m):                       # m["x"], m.root; return an Expr, or None to decline
        return kiln.ir.call_op("nn.linear", [m["x"], m["w"], m["b"]])

    mod = rewrite_bindings(mod, [("dense_to_linear", dense, to_linear)])

Operator patterns look through the bindings that produce their operands (in the same block); a
rewrite removes those bindings when they have no other use. Wildcards bind the variable itself.
"""
from ._kiln.dpl import Pattern, Match, wildcard, is_op, is_const, is_var, is_elementwise, rewrite_bindings  # noqa: F401

__all__ = ["Pattern", "Match", "wildcard", "is_op", "is_const", "is_var", "is_elementwise", "rewrite_bindings"]
