# SPDX-License-Identifier: Apache-2.0
"""Expressions from Python: views of a function's body, constructors with type inference, the
subclassable ExprMutator, post_order_visit, and dataflow patterns with rewrite_bindings."""
import numpy as np
import pytest

import kiln
from conftest import MLP, TEST_MODEL

ir = kiln.ir
T = kiln.transform


def test_body_bindings_and_call_views():
    f = ir.parse(TEST_MODEL)["main"]
    body = f.body
    assert body.kind == "seq"
    (block,) = body.blocks
    assert block.dataflow
    names = [b.var.name_hint for b in block.bindings]
    assert names == ["e1", "e2", "e3", "out"]  # nested calls stay nested: R.multiply(e1, R.divide(e1, e2))
    first = block.bindings[0]
    assert first.var.kind == "dataflow_var"
    assert first.value.kind == "call" and first.value.op == "add"
    assert [a.name_hint for a in first.value.args] == ["x", "y"]
    assert first.value.dtype == "float32" and first.value.shape == (3, 4)
    assert body.result.kind == "var"
    assert f.params[0].kind == "var" and f.params[0].name_hint == "x"
    with pytest.raises(AttributeError, match="a call has no name_hint"):
        first.value.name_hint
    mlp = ir.parse(MLP)["main"]
    softmax = [b.value for b in mlp.body.blocks[0].bindings if b.value.kind == "call" and b.value.op == "nn.softmax"][0]
    assert softmax.attrs == {"axis": -1}
    assert mlp.params[0].shape == ("n", 16)


def test_constructors_infer_types():
    x = ir.parse(TEST_MODEL)["main"].params[0]
    y = ir.call_op("nn.relu", [x])
    assert y.type == 'R.Tensor((3, 4), "float32")' and y.op == "nn.relu"
    c = ir.const(np.arange(4, dtype="float32"))
    assert c.kind == "constant" and c.shape == (4,)
    np.testing.assert_array_equal(c.data, np.arange(4, dtype="float32"))
    s = ir.call_op("add", [x, c])
    assert s.shape == (3, 4)
    t = ir.tuple_([x, c])
    assert ir.tuple_get_item(t, 1).shape == (4,)
    assert ir.prim_value(3).value == 3
    assert ir.call_op("clip", [x], {"min": 0.0, "max": 6.0}).attrs == {"min": 0.0, "max": 6.0}
    with pytest.raises(kiln.KilnError, match="add"):
        ir.call_op("add", [x, ir.const(np.zeros(5, "float32"))])
    with pytest.raises(kiln.KilnError):
        ir.call_op("no_such_op", [x])


def test_post_order_visit():
    f = ir.parse(TEST_MODEL)["main"]
    ops = []
    ir.post_order_visit(f.body, lambda e: ops.append(e.op) if e.kind == "call" else None)
    assert ops[:2] == ["add", "subtract"] and "multiply" in ops and "divide" in ops
    assert ops.index("divide") < ops.index("multiply")  # children first


class ReluToClip(ir.ExprMutator):
    def __init__(self):
        self.seen = 0

    def rewrite_call(self, call):
        self.seen += 1
        if call.op == "nn.relu":
            return ir.call_op("clip", [call.args[0]], {"min": 0.0, "max": 6.0})
        return None


def test_mutator_in_a_function_pass_changes_results_as_expected():
    mod = ir.parse(MLP)

    @T.function_pass(opt_level=0)
    def relu_to_clip(func, mod, ctx):
        return ReluToClip().visit_function(func)

    out = relu_to_clip(mod)
    assert "R.clip(" in str(out) and "R.nn.relu(" not in str(out)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") * 4 for s in [(2, 16), (16, 32), (32,), (32, 4), (4,)]]
    vm = kiln.runtime.VirtualMachine(kiln.compile(out))
    x, w1, b1, w2, b2 = args
    logits = np.clip(x @ w1 + b1, 0, 6) @ w2 + b2
    e = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(vm["main"](*args), e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_mutator_that_changes_nothing_returns_the_same_objects():
    mod = ir.parse(TEST_MODEL)

    class Nothing(ir.ExprMutator):
        def rewrite_call(self, call):
            return None

    assert Nothing().visit_module(mod).same_as(mod)
    assert Nothing().visit_function(mod["main"]).same_as(mod["main"])

    class Bad(ir.ExprMutator):
        def rewrite_call(self, call):
            return 3

    with pytest.raises(TypeError, match="rewrite_call returned a int, not a kiln.ir.Expr or None"):
        Bad().visit_module(mod)


def test_mutator_renews_variables_whose_type_changes():
    mod = ir.parse(TEST_MODEL)

    class ToFloat64(ir.ExprMutator):
        def rewrite_call(self, call):
            if call.op == "add" and call.args[0].kind != "call" and call.dtype == "float32":
                return ir.call_op("astype", [call], {"dtype": "float64"})
            return None

    with pytest.raises(kiln.KilnError):
        # the function's later operators now mix float32 and float64: a clear type error, not a crash
        ToFloat64().visit_module(mod)


def test_patterns_and_rewrite_bindings():
    from kiln.dpl import is_op, wildcard, rewrite_bindings

    mod = ir.parse(MLP)
    x, w, b = wildcard("x"), wildcard("w"), wildcard("b")
    dense_relu = is_op("nn.relu")(is_op("add")(is_op("matmul")(x, w), b).commutative())
    assert str(dense_relu) == "nn.relu(add(matmul(x, w), b) commutative)"
    matches = []

    def to_clip(m):
        matches.append((m["x"].name_hint, m["w"].name_hint, m["b"].name_hint))
        dense = ir.call_op("add", [ir.call_op("matmul", [m["x"], m["w"]]), m["b"]])
        return ir.call_op("clip", [dense], {"min": 0.0, "max": 1e30})

    out = rewrite_bindings(mod, [("dense_relu_to_clip", dense_relu, to_clip)])
    assert matches == [("x", "w1", "b1")]
    assert "R.clip(" in str(out) and "R.nn.relu" not in str(out)
    # A rule that declines leaves the module as it was.
    same = rewrite_bindings(mod, [("never", dense_relu, lambda m: None)])
    assert same.same_as(mod)
    with pytest.raises(KeyError, match="nothing is bound to 'nope'"):
        rewrite_bindings(mod, [("bad", dense_relu, lambda m: m["nope"])])
    with pytest.raises(TypeError, match="each rule is"):
        rewrite_bindings(mod, [("only two", dense_relu)])
    with pytest.raises(ValueError, match="'float33' is not a dtype"):
        is_op("add").has_dtype("float33")
    assert "float32" in str(is_op("add").has_dtype("float32"))


def test_block_builder_builds_a_program_that_runs():
    n = ir.size_var("n")
    x, w = ir.var("x", (n, 8)), ir.var("w", (8, 3))
    bb = ir.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(ir.call_op("matmul", [x, w]))
            gv = bb.emit_output(ir.call_op("nn.relu", [lv]))
        bb.emit_func_output(gv)
    mod = bb.get()
    assert mod["main"].ret_type == 'R.Tensor((n, 3), "float32")'
    assert ir.structural_equal(ir.parse(str(mod)), mod)
    xv = np.linspace(-1, 1, 16, dtype="float32").reshape(2, 8)
    wv = np.linspace(-1, 1, 24, dtype="float32").reshape(8, 3)
    y = kiln.runtime.VirtualMachine(kiln.compile(mod))["main"](xv, wv)
    np.testing.assert_allclose(y, np.maximum(xv @ wv, 0), rtol=1e-5, atol=1e-6)


def test_block_builder_errors_leave_it_usable():
    x = ir.var("x", (2, 3))
    bb = ir.BlockBuilder()
    with pytest.raises(kiln.KilnError):
        with bb.function("bad", [x]):
            bb.emit(ir.call_op("matmul", [x, x]))  # (2, 3) @ (2, 3): a type error, and the function is dropped
    assert not bb._bb.in_function
    with pytest.raises(ValueError, match="ended without emit_func_output"):
        with bb.function("unfinished", [x]):
            bb.emit(ir.call_op("nn.relu", [x]))
    with bb.function("good", [x]):
        bb.emit_func_output(bb.emit(ir.call_op("nn.relu", [x])))
    assert bb.get().get_global_vars() == ["good"]
    with pytest.raises(TypeError, match="a dimension is an int or a kiln.ir.size_var"):
        ir.var("y", ("n", 3))
    with pytest.raises(kiln.UsageError, match="emit outside of a function"):
        bb.emit(ir.call_op("nn.relu", [x]))
