# SPDX-License-Identifier: Apache-2.0
"""Passes written in Python: the decorators' forms and errors (TVM's messages), Sequential with
requirement resolution, the context's opt level / required / disabled rules, C++ and Python passes
in one pipeline, config options."""
import pytest

import kiln
from conftest import ADD_MODULE, get_test_model

T = kiln.transform


def test_module_pass_function_form():
    @T.module_pass(opt_level=2)
    def add_attr(mod, ctx):
        assert isinstance(ctx, T.PassContext)
        return mod.with_attr("touched", True)

    assert isinstance(add_attr, T.ModulePass)
    assert add_attr.info.opt_level == 2
    assert add_attr.info.name == "add_attr"
    assert add_attr.info.kind == "module pass"
    out = add_attr(get_test_model())
    assert out.attrs["touched"] is True
    assert "pass name: add_attr, opt_level: 2, required passes: []" in str(add_attr.info)


def test_module_pass_without_decorator_syntax_and_name():
    def f(mod, ctx):
        return mod

    p = T.module_pass(f, opt_level=1, name="renamed", required=["fold_constant"])
    assert p.info.name == "renamed"
    assert p.info.required == ["fold_constant"]


def test_module_pass_class_form():
    @T.module_pass(opt_level=1)
    class TestPipeline:
        """Adds the given function-level attribute to each module."""

        def __init__(self, key, value):
            self.key = key
            self.value = value
            self.calls = 0

        def transform_module(self, mod, ctx):
            self.calls += 1
            return mod.with_attr(self.key, self.value)

    p = TestPipeline("answer", 42)
    assert isinstance(p, T.ModulePass)
    assert p.info.name == "TestPipeline"
    assert p(get_test_model()).attrs["answer"] == 42
    assert p.calls == 1  # attributes read through to the instance
    p.value = 7  # and are written to it
    assert p(get_test_model()).attrs["answer"] == 7


def test_function_pass_function_and_class_forms():
    seen = []

    @T.function_pass(opt_level=1)
    def mark(func, mod, ctx):
        seen.append(func.params[0].name_hint)
        return func.with_attr("marked", 1)

    assert isinstance(mark, T.FunctionPass)
    assert mark.info.kind == "function pass"
    out = mark(get_test_model())
    assert out["main"].attrs["marked"] == 1
    assert seen == ["x"]

    @T.function_pass(opt_level=1)
    class TestReplaceFunc:
        def __init__(self, new_func):
            self.new_func = new_func

        def transform_function(self, func, mod, ctx):
            return self.new_func

    replacement = kiln.ir.IRModule.from_text(ADD_MODULE)["main"]
    out = TestReplaceFunc(replacement)(kiln.ir.IRModule.from_text(ADD_MODULE).with_function("other", replacement))
    assert len(out) == 2
    assert kiln.ir.structural_equal(out["other"], replacement)


def test_function_pass_skips_skip_optimization():
    @T.function_pass(opt_level=0)
    def fail_if_called(func, mod, ctx):
        raise AssertionError("called on a SkipOptimization function")

    mod = get_test_model()
    mod = mod.with_function("main", mod["main"].with_attr("SkipOptimization", True))
    assert fail_if_called(mod).same_as(mod)


def test_decorator_errors_use_tvm_messages():
    with pytest.raises(ValueError, match="Please provide opt_level for the module pass."):
        T.module_pass(lambda mod, ctx: mod)
    with pytest.raises(ValueError, match="Please provide opt_level for the function pass."):
        T.function_pass(lambda f, mod, ctx: f)
    with pytest.raises(TypeError, match="pass_func must be a callable for Module pass"):
        T.module_pass(opt_level=1)(3)
    with pytest.raises(TypeError, match="pass_func must be a callable for Function pass"):
        T.function_pass(opt_level=1)("not callable")
    with pytest.raises(TypeError, match="Required is expected to be the type of list/tuple."):
        T.module_pass(lambda mod, ctx: mod, opt_level=1, required="fold_constant")
    with pytest.raises(TypeError, match="passes must be a list of Pass objects."):
        T.Sequential(T.FoldConstant())
    with pytest.raises(ValueError, match="not a valid pass name"):
        T.module_pass(lambda mod, ctx: mod, opt_level=1, name="has space")


def test_pass_returning_wrong_type_is_a_type_error():
    @T.module_pass(opt_level=0)
    def returns_none(mod, ctx):
        return None

    with pytest.raises(TypeError, match="module pass 'returns_none' returned None, not a kiln.ir.IRModule"):
        returns_none(get_test_model())

    @T.function_pass(opt_level=0)
    def returns_module(func, mod, ctx):
        return mod

    with pytest.raises(TypeError, match="function pass 'returns_module' returned IRModule for function 'main'"):
        returns_module(get_test_model())


def test_sequential_resolves_python_requirements_from_the_registry(capsys):
    order = []

    @T.module_pass(opt_level=0, required=["fold_constant"])
    def needs_fold(mod, ctx):
        order.append("needs_fold")
        return mod

    seq = T.Sequential([needs_fold, T.DeadCodeElimination()], name="mixed")
    assert seq.steps == [("fold_constant", True), ("needs_fold", False), ("dead_code_elimination", False)]
    assert seq.text == "mixed(needs_fold,dead_code_elimination)"

    @kiln.instrument.pass_instrument
    class Names:
        def run_before_pass(self, mod, info):
            print(info.name)

    with T.PassContext(instruments=[Names()]):
        seq(get_test_model())
    assert capsys.readouterr().out == "mixed\nfold_constant\nneeds_fold\ndead_code_elimination\n"
    assert order == ["needs_fold"]


def test_unknown_requirement_is_named():
    @T.module_pass(opt_level=0, required=["no_such_pass"])
    def p(mod, ctx):
        return mod

    with pytest.raises(kiln.UsageError, match="pass 'p' requires 'no_such_pass', but no pass is registered as 'no_such_pass'"):
        T.Sequential([p])


def test_opt_level_required_and_disabled():
    ran = []

    def make(name, level):
        def body(mod, ctx):
            ran.append(name)
            return mod
        return T.module_pass(body, opt_level=level, name=name)

    seq = T.Sequential([make("low", 1), make("high", 3), make("mid", 2)])
    with T.PassContext(opt_level=2):
        seq(get_test_model())
    assert ran == ["low", "mid"]
    ran.clear()
    with T.PassContext(opt_level=2, required_pass=["high"], disabled_pass=["low"]):
        seq(get_test_model())
    assert ran == ["high", "mid"]
    ran.clear()
    # As in TVM, a pass called directly runs whatever its opt level.
    with T.PassContext(opt_level=0):
        make("direct", 3)(get_test_model())
    assert ran == ["direct"]


def test_cpp_pipeline_containing_python_pass_by_name():
    @T.register_pass
    @T.module_pass(opt_level=0, name="py_mark_registered")
    def mark(mod, ctx):
        return mod.with_attr("py_mark", 1)

    assert "py_mark_registered" in T.list_passes()
    pipeline = T.parse_pipeline("fold_constant,py_mark_registered,dead_code_elimination")
    assert pipeline(get_test_model()).attrs["py_mark"] == 1
    assert T.get_pass("py_mark_registered")(get_test_model()).attrs["py_mark"] == 1


def test_get_pass_and_camel_case_names():
    p = T.get_pass("fold_constant")
    assert p.info.name == "fold_constant"
    assert T.FoldConstant().info.name == "fold_constant"
    assert T.LegalizeOps().info.name == "legalize_ops"
    with pytest.raises(kiln.UsageError, match="did you mean 'fold_constant'"):
        T.get_pass("fold_constnt")
    with pytest.raises(AttributeError):
        T.NoSuchPass()


def test_context_current_and_nesting():
    outer = T.PassContext(opt_level=1)
    inner = T.PassContext(opt_level=3)
    default = T.PassContext.current()
    with outer:
        assert T.PassContext.current() == outer
        with inner as entered:
            assert entered is inner
            assert T.PassContext.current() is inner
            assert T.PassContext.current().opt_level == 3
        assert T.PassContext.current() is outer
    assert T.PassContext.current() == default

    @T.module_pass(opt_level=0)
    def sees_context(mod, ctx):
        assert ctx == inner and ctx is inner
        return mod

    with inner:
        sees_context(get_test_model())


def test_context_argument_checks_and_config():
    with pytest.raises(TypeError, match="required_pass is expected to be the type of list/tuple/set."):
        T.PassContext(required_pass="fold_constant")
    with pytest.raises(TypeError, match="disabled_pass is expected to be the type of list/tuple/set."):
        T.PassContext(disabled_pass="fold_constant")
    with pytest.raises(AttributeError, match="Invalid config option 'no.such.option' candidates are:"):
        T.PassContext(config={"no.such.option": 1})
    ctx = T.PassContext(config={"testing.immutable_module": True})
    assert ctx.config == {"testing.immutable_module": True}
    assert "testing.immutable_module" in T.PassContext.list_configs()
    with pytest.raises(TypeError, match="testing.immutable_module"):
        T.PassContext(config={"testing.immutable_module": [1, 2]})
    with pytest.raises(kiln.UsageError, match="opt_level must be 0 or more"):
        T.PassContext(opt_level=-1)


def test_pass_error_without_python_exception_names_the_pass():
    mod = get_test_model()

    @T.module_pass(opt_level=0)
    def fine(mod, ctx):
        return mod

    with T.PassContext(required_pass=["fine"]):
        assert fine(mod).same_as(mod)

    # A C++ pass's failure is a kiln.PassError naming the pass.
    bad = kiln.ir.IRModule.from_text('''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((4, 5), "float32")) -> R.Tensor((2, 3), "float32"):
        return x
''')
    out = T.LegalizeOps()(bad)
    assert kiln.ir.structural_equal(out, bad)


def test_print_ir_pass(capsys):
    T.PrintIR("here")(get_test_model())
    assert capsys.readouterr().out.startswith("PrintIR(here):\n# kiln IR")


def test_tvm_pass_names():
    assert T.get_pass("FoldConstant").name == "fold_constant"
    assert T.FoldConstant().name == "fold_constant"
    assert T.FuseOps().name == "kiln.fuse" and T.FuseTIR().name == "kiln.fuse"
    assert T.VMShapeLower().name == "vm_shape_lower"
    assert T.StaticPlanBlockMemory().name == "static_plan_block_memory"
    assert T.parse_pipeline("FoldConstant,DeadCodeElimination").steps == [("fold_constant", False), ("dead_code_elimination", False)]
    assert ("FuseOps", "kiln.fuse") in T.list_aliases()
    assert "FuseOps" in dir(T) and "LegalizeOps" in dir(T)
    assert "kiln.fuse" in T.FuseOps.__doc__
    assert T.get_pass("legalize_ops").info.description.startswith("Lowers every operator call")
    assert T.get_pass("call_tir_rewrite").info.needs == ["legalized", "non_dataflow"]
    assert "fold_constant (also FoldConstant)" in T.describe_passes()
    with pytest.raises(AttributeError):
        T.NoSuchPass


def test_get_pipeline():
    assert kiln.get_pipeline().name == "kiln.default"
    assert T.get_pipeline("default").text == kiln.get_pipeline("default").text
    vm = kiln.runtime.VirtualMachine(kiln.compile(get_test_model(), pipeline=kiln.get_pipeline("zero")))
    assert vm is not None
    with pytest.raises(kiln.UsageError, match="no pipeline is named 'O3'"):
        kiln.get_pipeline("O3")


def test_a_pipeline_in_the_wrong_order_is_refused_before_it_runs():
    with pytest.raises(kiln.UsageError, match="pass 'call_tir_rewrite' needs property 'legalized'.*run 'legalize_ops' before it"):
        T.parse_pipeline("call_tir_rewrite")(get_test_model())


def test_public_namespaces_are_clean():
    assert not {"inspect", "re", "threading"} & set(dir(T))
    assert "driver" not in dir(kiln)
    for module in (kiln, kiln.ir, T, kiln.instrument, kiln.runtime, kiln.dpl):
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
