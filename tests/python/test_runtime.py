# SPDX-License-Identifier: Apache-2.0
"""Compiling and running from Python: numpy arrays in and out without copies, the stateful
interface, save_function, time_evaluator, the VM instrument, executables saved and loaded,
errors."""
import numpy as np
import pytest

import kiln
from conftest import ADD_MODULE, MLP

VM = kiln.runtime.VirtualMachine


def mlp_args(n=3, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in [(n, 16), (16, 32), (32,), (32, 4), (4,)]]


def mlp_reference(x, w1, b1, w2, b2):
    h = np.maximum(x @ w1 + b1, 0)
    logits = h @ w2 + b2
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def mlp_vm():
    return VM(kiln.compile(kiln.ir.IRModule.from_text(MLP)))


def test_run_matches_numpy(mlp_vm):
    for n in (1, 3, 64):  # n is symbolic: one executable for every batch size
        args = mlp_args(n, seed=n)
        y = mlp_vm["main"](*args)
        assert y.shape == (n, 4) and y.dtype == np.float32
        np.testing.assert_allclose(y, mlp_reference(*args), rtol=1e-5, atol=1e-6)


def test_zero_copy_in_and_out():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    back = kiln._kiln.runtime._roundtrip(x)
    assert np.shares_memory(back, x)  # the tensor kiln saw is x's memory, and the result views it
    # Results own nothing of numpy's: they view kiln's memory, which they keep alive.
    vm = VM(kiln.compile(kiln.ir.IRModule.from_text(ADD_MODULE)))
    a, b = np.ones((3, 4), "float32"), np.full((3, 4), 2, "float32")
    first = vm["main"](a, b)
    second = vm["main"](b, b)
    assert not first.flags["OWNDATA"]
    np.testing.assert_array_equal(first, 3)  # the second call did not write over the first result
    np.testing.assert_array_equal(second, 4)
    del vm
    np.testing.assert_array_equal(first, 3)  # still valid after the VM is gone


def test_non_contiguous_and_convertible_inputs():
    vm = VM(kiln.compile(kiln.ir.IRModule.from_text(ADD_MODULE)))
    big = np.arange(24, dtype="float32").reshape(3, 8)
    strided = big[:, ::2]  # not contiguous: copied first
    y = vm["main"](strided, np.zeros((3, 4), "float32"))
    np.testing.assert_array_equal(y, strided)
    # A list is a tuple to kiln (as a TVM Array is), not an array.
    with pytest.raises(kiln.VMError, match="parameter 'x' .*expected a tensor, got tuple"):
        vm["main"]([[1.0] * 4] * 3, np.zeros((3, 4), "float32"))


def test_byte_swapped_arrays_are_read_in_their_own_order():
    vm = VM(kiln.compile(kiln.ir.IRModule.from_text(ADD_MODULE)))
    big_endian = np.arange(12, dtype=">f4").reshape(3, 4)
    y = vm["main"](big_endian, np.zeros((3, 4), "float32"))
    np.testing.assert_array_equal(y, np.arange(12, dtype="float32").reshape(3, 4))
    c = kiln.ir.const(np.array([1.5, -2.0], dtype=">f8"))
    np.testing.assert_array_equal(c.data, [1.5, -2.0])


def test_wrong_inputs_are_clear_errors(mlp_vm):
    args = mlp_args()
    with pytest.raises(kiln.VMError, match="parameter 'x'"):
        mlp_vm["main"](args[0].astype("float64"), *args[1:])
    with pytest.raises(kiln.VMError):
        mlp_vm["main"](np.zeros((3, 17), "float32"), *args[1:])
    with pytest.raises(kiln.KilnError, match="argument"):
        mlp_vm["main"](*args[:2])
    with pytest.raises(TypeError, match="numpy dtype complex64 has no kiln counterpart"):
        mlp_vm["main"](args[0].astype("complex64"), *args[1:])
    with pytest.raises(KeyError, match="no function named 'nope'"):
        mlp_vm["nope"]


def test_stateful_interface_and_save_function(mlp_vm):
    args = mlp_args(2, seed=5)
    expected = mlp_reference(*args)
    mlp_vm.set_input("main", *args)
    mlp_vm.invoke_stateful("main")
    np.testing.assert_allclose(mlp_vm.get_outputs("main"), expected, rtol=1e-5, atol=1e-6)
    mlp_vm.save_function("main", "main_saved", *args)
    np.testing.assert_allclose(mlp_vm["main_saved"](), expected, rtol=1e-5, atol=1e-6)
    mlp_vm.save_function("main", "main_no_return", *args, include_return=False)
    assert mlp_vm["main_no_return"]() is None
    with pytest.raises(kiln.UsageError, match="has not been run with invoke_stateful"):
        mlp_vm.get_outputs("main_never")


def test_time_evaluator(mlp_vm):
    timer = mlp_vm.time_evaluator("main", number=3, repeat=4)
    r = timer(*mlp_args())
    assert len(r.results) == 4 and r.number == 3
    assert 0 < r.min <= r.median <= r.max
    assert "BenchmarkResult(mean=" in repr(r)
    with pytest.raises(kiln.UsageError, match="number and repeat must be at least 1"):
        mlp_vm.time_evaluator("main", number=0)


def test_vm_instrument_sees_calls_and_can_skip():
    vm = VM(kiln.compile(kiln.ir.IRModule.from_text(MLP)))
    seen = []

    def watch(func, func_symbol, before_run, ret_value, *args):
        seen.append((func_symbol, before_run))

    vm.set_instrument(watch)
    vm["main"](*mlp_args())
    kernels = [s for s, before in seen if before and s.startswith("kernels.")]
    assert kernels == ["kernels.matmul_fused", "kernels.matmul_fused", "kernels.softmax"]
    assert ("kernels.softmax", False) in seen

    def skip_softmax(func, func_symbol, before_run, ret_value, *args):
        if before_run and func_symbol == "kernels.softmax":
            return kiln.runtime.VMInstrumentReturnKind.SKIP_RUN
        return None

    vm.set_instrument(skip_softmax)
    x = mlp_args()
    y = vm["main"](*x)
    h = np.maximum(x[0] @ x[1] + x[2], 0)
    assert not np.allclose(y, mlp_reference(*x))  # softmax never ran on the output buffer
    vm.set_instrument(None)
    np.testing.assert_allclose(vm["main"](*x), mlp_reference(*x), rtol=1e-5, atol=1e-6)
    del h

    def raises(func, func_symbol, before_run, ret_value, *args):
        raise ValueError("instrument says no")

    vm.set_instrument(raises)
    with pytest.raises(ValueError, match="instrument says no") as info:
        vm["main"](*x)
    assert any("in 'main' at instruction" in note for note in info.value.__notes__)


def test_executable_text_stats_and_save_load(tmp_path):
    ex = kiln.compile(kiln.ir.IRModule.from_text(MLP))
    assert "main" in ex.function_names
    assert "kernels.softmax" in ex.as_text()
    assert "kiln VM executable statistics" in ex.stats()
    assert ex.as_python()
    path = tmp_path / "mlp.kx"
    ex.save(str(path))
    loaded = kiln.runtime.load_executable(str(path))
    assert loaded.as_text() == ex.as_text()
    x = mlp_args()
    np.testing.assert_array_equal(VM(loaded)["main"](*x), VM(ex)["main"](*x))
    again = kiln.runtime.executable_from_bytes(bytes(ex))
    assert again.as_text() == ex.as_text()
    bad = tmp_path / "bad.kx"
    bad.write_bytes(bytes(ex)[:40])
    with pytest.raises(kiln.KilnError):
        kiln.runtime.load_executable(str(bad))


def test_compile_with_python_pass_and_pipeline_text():
    mod = kiln.ir.IRModule.from_text(MLP)
    seen = []

    @kiln.transform.module_pass(opt_level=0)
    def spy(mod, ctx):
        seen.append(len(mod))
        return mod

    pipeline = kiln.transform.Sequential([spy, kiln.transform.get_pass("kiln.default")])
    ex = kiln.compile(mod, pipeline=pipeline)
    assert seen == [1]
    x = mlp_args()
    np.testing.assert_allclose(VM(ex)["main"](*x), mlp_reference(*x), rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.ParseError):
        kiln.compile(mod, pipeline="fold_constant,(")
    with pytest.raises(TypeError, match="pipeline must be None, pipeline text or a kiln.transform.Pass"):
        kiln.compile(mod, pipeline=3)


def test_compile_and_parse_errors_are_kiln_errors():
    with pytest.raises(kiln.ParseError, match="line"):
        kiln.ir.IRModule.from_text("@I.ir_module\nclass Module:\n    @R.function\n    def main(x: R.Tensor((2,), \"f32\")):")
    with pytest.raises(kiln.ParseError, match="unknown pass 'no_such_pass'"):
        kiln.compile(kiln.ir.IRModule.from_text(MLP), pipeline="no_such_pass")


@pytest.mark.skipif(not kiln.has_onnx, reason="built without the ONNX importer")
def test_onnx_import_and_run():
    onnx = pytest.importorskip("onnx")
    from onnx import helper, TensorProto

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod = kiln.onnx.from_onnx(model)
    assert "main" in mod
    x = np.linspace(-1, 1, 10, dtype="float32").reshape(2, 5)
    np.testing.assert_array_equal(VM(kiln.compile(mod))["main"](x), np.maximum(x, 0))
    fixed = kiln.onnx.from_onnx(model.SerializeToString(), shape={"x": [4, 5]})
    assert "(4, 5)" in fixed["main"].params[0].type
    with pytest.raises(kiln.KilnError):
        kiln.onnx.from_onnx(b"not an onnx model")
    with pytest.raises(TypeError):
        kiln.onnx.from_onnx(12)


def test_compiled_mode_export_library_and_load_module(tmp_path, monkeypatch):
    mod = kiln.ir.IRModule.from_text(MLP)
    monkeypatch.chdir(tmp_path)
    # As docs/howto-deploy-compiled.md shows it:
    # [compiled_mode]
    kiln.compile(mod, exec_mode="compiled").export_library("model.so")
    vm = kiln.runtime.VirtualMachine(kiln.runtime.load_module("model.so"))
    # [compiled_mode]
    ex = kiln.compile(mod, exec_mode="compiled")
    assert "inline value fn_main(" in ex.generated_source
    assert kiln.compile(mod).generated_source == ""
    vm_compiled, vm_bytecode = vm, VM(kiln.compile(mod))
    for n in (1, 5):
        args = mlp_args(n, seed=n)
        np.testing.assert_array_equal(vm_compiled["main"](*args), vm_bytecode["main"](*args))
    with pytest.raises(ValueError, match="exec_mode must be 'bytecode' or 'compiled', not 'jit'"):
        kiln.compile(mod, exec_mode="jit")
    with pytest.raises(ValueError, match="instrumented=True is for exec_mode='compiled'"):
        kiln.compile(mod, instrumented=True)
    with pytest.raises(kiln.KilnError, match="has no generated code; compile it with exec_mode::compiled"):
        kiln.compile(mod).export_library(str(tmp_path / "x.so"))
    with pytest.raises(kiln.KilnError, match="not a shared library"):
        (tmp_path / "bad.so").write_text("nope")
        kiln.runtime.load_module(str(tmp_path / "bad.so"))


def test_compiled_mode_instrumented_reports_the_calls_the_bytecode_reports(tmp_path):
    mod = kiln.ir.IRModule.from_text(MLP)

    def calls(vm):
        seen = []

        def watch(func, func_symbol, before_run, ret_value, *args):
            seen.append((func_symbol, before_run))

        vm.set_instrument(watch)
        vm["main"](*mlp_args())
        # The bytecode clears a dead register (R.vm.kill_object) with a call of vm.builtin.null_value;
        # generated code assigns instead, which is no call.
        return [e for e in seen if e[0] != "vm.builtin.null_value"]

    lib = str(tmp_path / "mlp_instrumented.so")
    kiln.compile(mod, exec_mode="compiled", instrumented=True).export_library(lib)
    reported = calls(VM(kiln.runtime.load_module(lib)))
    assert reported == calls(VM(kiln.compile(mod)))
    assert ("kernels.softmax", True) in reported

    plain = str(tmp_path / "mlp_plain.so")
    kiln.compile(mod, exec_mode="compiled").export_library(plain)
    assert calls(VM(kiln.runtime.load_module(plain))) == []  # as in TVM: nothing inside compiled functions

    def raises(func, func_symbol, before_run, ret_value, *args):
        raise ValueError("instrument says no")

    vm = VM(kiln.runtime.load_module(lib))
    vm.set_instrument(raises)
    with pytest.raises(ValueError, match="instrument says no"):
        vm["main"](*mlp_args())


def test_read_only_arrays_are_accepted_without_a_copy():
    vm = VM(kiln.compile(kiln.ir.IRModule.from_text(ADD_MODULE)))
    a = np.frombuffer(np.arange(12, dtype="float32").tobytes(), dtype="float32").reshape(3, 4)
    assert not a.flags["WRITEABLE"]
    b = np.ones((3, 4), "float32")
    b.flags["WRITEABLE"] = False
    np.testing.assert_array_equal(vm["main"](a, b), a + 1)
    assert np.shares_memory(kiln._kiln.runtime._roundtrip(a), a)


def test_one_vm_shared_by_threads_refuses_the_second_caller_and_never_crashes():
    import threading

    vm = VM(kiln.compile(kiln.ir.IRModule.from_text(MLP)))
    x = mlp_args(64)
    want = mlp_reference(*x)
    outcomes = {"served": 0, "refused": 0, "other": []}
    lock = threading.Lock()

    def hammer():
        for _ in range(100):
            try:
                y = vm["main"](*x)
                with lock:
                    if np.allclose(y, want, rtol=1e-5, atol=1e-6):
                        outcomes["served"] += 1
                    else:
                        outcomes["other"].append("wrong result")
            except kiln.KilnError as e:
                with lock:
                    if "on another thread; use one virtual_machine per thread" in str(e):
                        outcomes["refused"] += 1
                    else:
                        outcomes["other"].append(str(e))

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes["other"] == []
    assert outcomes["served"] + outcomes["refused"] == 300 and outcomes["served"] > 0


def test_instrument_results_are_checked_and_an_instrument_may_remove_itself():
    vm = VM(kiln.compile(kiln.ir.IRModule.from_text(MLP)))
    x = mlp_args()
    vm.set_instrument(lambda *a: 10**30)
    with pytest.raises(ValueError, match=r"expected None, VMInstrumentReturnKind.NO_OP \(0\) or .*SKIP_RUN \(1\), got 1000000000000000000000000000000"):
        vm["main"](*x)
    vm.set_instrument(lambda *a: "yes")
    with pytest.raises(TypeError, match="got a str"):
        vm["main"](*x)
    seen = []

    def once(func, func_symbol, before_run, ret_value, *args):
        seen.append(func_symbol)
        vm.set_instrument(None)  # drops this very callback while it runs

    vm.set_instrument(once)
    np.testing.assert_allclose(vm["main"](*x), mlp_reference(*x), rtol=1e-5, atol=1e-6)
    assert len(seen) == 2  # the first call's before and its after (reported to the instrument that saw it start)
    np.testing.assert_allclose(vm["main"](*x), mlp_reference(*x), rtol=1e-5, atol=1e-6)
    assert len(seen) == 2


STATEFUL_CACHE = '''@I.ir_module
class Module:
    @R.function
    def create_kv_cache() -> R.Object:
        init: R.Tensor((2, 8, 4), "float32") = R.broadcast_to(R.const(0, "float32"), R.shape([2, 8, 4]))
        kc: R.Object = R.call_packed("vm.builtin.attention_kv_cache_create", init, R.shape([2, 8, 4]), R.prim_value(0), R.prim_value(1), sinfo_args=R.Object)
        return kc

    @R.function
    def step(k: R.Tensor((2, n, 4), "float32"), all_len: R.Shape([m]), cache: R.Object) -> R.Tuple(R.Tensor((2, m, 4), "float32"), R.Object):
        c1: R.Object = R.call_packed("vm.builtin.attention_kv_cache_append", cache, k, sinfo_args=R.Object)
        keys: R.Tensor((2, m, 4), "float32") = R.call_packed("vm.builtin.attention_kv_cache_view", c1, R.shape([2, m, 4]), sinfo_args=R.Tensor((2, m, 4), "float32"))
        return (keys, c1)
'''


def test_vm_objects_and_shapes_pass_back_in():
    """A key/value cache made by the program comes back as a kiln.runtime.Object and goes back in
    unchanged; an R.Shape argument is a kiln.runtime.ShapeTuple."""
    vm = VM(kiln.compile(kiln.ir.IRModule.from_text(STATEFUL_CACHE)))
    cache = vm["create_kv_cache"]()
    assert isinstance(cache, kiln.runtime.Object)
    assert cache.type_name == "vm.AttentionKVCache"
    assert repr(cache) == "<kiln.runtime.Object vm.AttentionKVCache>"
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((2, n, 4)).astype("float32") for n in (3, 1, 1)]
    total = 0
    for part in parts:
        total += part.shape[1]
        keys, cache = vm["step"](part, kiln.runtime.ShapeTuple([total]), cache)
        np.testing.assert_array_equal(keys, np.concatenate(parts, axis=1)[:, :total])
    shape = kiln.runtime.ShapeTuple([2, 5])
    assert len(shape) == 2 and shape[1] == 5 and shape[-2] == 2 and repr(shape) == "ShapeTuple([2, 5])"
    with pytest.raises(IndexError):
        shape[2]
    with pytest.raises(kiln.KilnError, match="attention_kv_cache_view"):
        vm["step"](parts[0], kiln.runtime.ShapeTuple([99]), cache)


def test_isa_and_cpu_caches_say_what_the_kernels_run_with():
    assert kiln.runtime.isa_report().startswith(kiln.runtime.isa() + " (")
    c = kiln.runtime.cpu_caches()
    assert set(c) == {"l1d", "l2", "l3", "l3_shared_by", "source"}
    assert c["l1d"] >= 4096 and c["l2"] >= c["l1d"] and c["l3"] >= 0 and c["l3_shared_by"] >= 0
    assert c["source"] in ("sysfs", "CPUID leaf 4", "CPUID 0x8000001D", "CPUID 0x80000005/6", "assumed")
