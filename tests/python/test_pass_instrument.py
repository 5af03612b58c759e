# SPDX-License-Identifier: Apache-2.0
"""TVM's pass-instrument scenarios (tests/python/relay/test_pass_instrument.py and
tests/python/ir/test_pass_instrument.py in apache/tvm), re-expressed against kiln: the same call
order, the same printed output, the same exception behaviour. TVM's passes become kiln's
(AnnotateSpans -> CanonicalizeBindings, ToANormalForm -> FoldConstant, InferType ->
DeadCodeElimination, relay.build -> kiln.compile), and a hook's exception reaches the caller as
the exception it raised (TVM now does the same; older TVM wrapped it in TVMError)."""
import pytest

import kiln
from kiln.instrument import PassTimingInstrument, PrintAfterAll, PrintBeforeAll, pass_instrument
from conftest import get_test_model

T = kiln.transform


def run_three(mod):
    mod = T.CanonicalizeBindings()(mod)
    mod = T.FoldConstant()(mod)
    mod = T.DeadCodeElimination()(mod)
    return mod


def test_pass_timing_instrument():
    pass_timing = PassTimingInstrument()
    T.PassContext.current().override_instruments([pass_timing])
    run_three(get_test_model())
    profiles = pass_timing.render()
    assert "canonicalize_bindings" in profiles
    assert "fold_constant" in profiles
    assert "dead_code_elimination" in profiles

    T.PassContext.current().override_instruments(None)
    run_three(get_test_model())
    with pytest.warns(UserWarning, match="cleared when the PassContext holding the instrument is exited"):
        assert pass_timing.render() == ""


def test_pass_timing_render_says_why_it_is_empty():
    timing = PassTimingInstrument()
    with pytest.warns(UserWarning, match="no pass has run in a PassContext holding this instrument"):
        assert timing.render() == ""
    with T.PassContext(instruments=[timing]):
        run_three(get_test_model())
        assert "fold_constant" in timing.render()
    with pytest.warns(UserWarning, match="call render\\(\\) inside the `with` block"):
        assert timing.render() == ""


def test_custom_instrument(capsys):
    @pass_instrument
    class MyTest:
        def enter_pass_ctx(self):
            print("enter ctx")

        def exit_pass_ctx(self):
            print("exit ctx")

        def run_before_pass(self, mod, info):
            print("run before " + info.name)

        def run_after_pass(self, mod, info):
            print("run after " + info.name)

    mod = get_test_model()
    with T.PassContext(instruments=[MyTest()]):
        mod = T.DeadCodeElimination()(mod)
    assert capsys.readouterr().out == ("enter ctx\n"
                                       "run before dead_code_elimination\n"
                                       "run after dead_code_elimination\n"
                                       "exit ctx\n")


def test_disable_pass(capsys):
    @pass_instrument
    class CustomPI:
        def should_run(self, mod, info):
            return "dead_code" in info.name

        def run_before_pass(self, mod, info):
            print(info.name)

    with T.PassContext(instruments=[CustomPI()]):
        run_three(get_test_model())
    assert capsys.readouterr().out == "dead_code_elimination\n"


def test_multiple_instrument(capsys):
    @pass_instrument
    class SkipPass:
        def __init__(self, skip_pass_name):
            self.skip_pass_name = skip_pass_name

        def should_run(self, mod, info):
            return self.skip_pass_name not in info.name

    @pass_instrument
    class PrintPassName:
        def run_before_pass(self, mod, info):
            print(info.name)

    with T.PassContext(instruments=[SkipPass("canonicalize"), SkipPass("fold"), PrintPassName()]):
        run_three(get_test_model())
    assert capsys.readouterr().out == "dead_code_elimination\n"


def test_instrument_pass_counts():
    @pass_instrument
    class PassesCounter:
        def __init__(self):
            self.run_before_count = 0
            self.run_after_count = 0

        def __clear(self):
            self.run_before_count = 0
            self.run_after_count = 0

        def enter_pass_ctx(self):
            self.__clear()

        def exit_pass_ctx(self):
            self.__clear()

        def run_before_pass(self, mod, info):
            self.run_before_count = self.run_before_count + 1

        def run_after_pass(self, mod, info):
            self.run_after_count = self.run_after_count + 1

    passes_counter = PassesCounter()
    with T.PassContext(instruments=[passes_counter]):
        kiln.compile(get_test_model())
        assert passes_counter.run_after_count != 0
        assert passes_counter.run_after_count == passes_counter.run_before_count
    assert passes_counter.run_before_count == 0
    assert passes_counter.run_after_count == 0


def test_enter_pass_ctx_exception(capsys):
    @pass_instrument
    class PI:
        def __init__(self, id):
            self.id = id

        def enter_pass_ctx(self):
            print(self.id + " enter ctx")

        def exit_pass_ctx(self):
            print(self.id + " exit ctx")

    @pass_instrument
    class PIBroken(PI):
        def __init__(self, id):
            super().__init__(id)

        def enter_pass_ctx(self):
            print(self.id + " enter ctx")
            raise RuntimeError("Just a dummy error")

    pass_ctx = T.PassContext(instruments=[PI("%1"), PIBroken("%2"), PI("%3")])
    with pytest.raises(RuntimeError, match="Just a dummy error"):
        with pass_ctx:
            pass
    assert capsys.readouterr().out == "%1 enter ctx\n%2 enter ctx\n"
    cur_pass_ctx = T.PassContext.current()
    assert pass_ctx != cur_pass_ctx
    assert cur_pass_ctx.instruments is None
    assert pass_ctx.instruments is None  # cleared by the failure


def test_enter_pass_ctx_exception_global():
    @pass_instrument
    class PIBroken:
        def enter_pass_ctx(self):
            raise RuntimeError("Just a dummy error")

    cur_pass_ctx = T.PassContext.current()
    with pytest.raises(RuntimeError):
        cur_pass_ctx.override_instruments([PIBroken()])
    assert not cur_pass_ctx.instruments


def test_exit_pass_ctx_exception(capsys):
    @pass_instrument
    class PI:
        def __init__(self, id):
            self.id = id

        def exit_pass_ctx(self):
            print(self.id + " exit ctx")

    @pass_instrument
    class PIBroken(PI):
        def __init__(self, id):
            super().__init__(id)

        def exit_pass_ctx(self):
            print(self.id + " exit ctx")
            raise RuntimeError("Just a dummy error")

    pass_ctx = T.PassContext(instruments=[PI("%1"), PIBroken("%2"), PI("%3")])
    with pytest.raises(RuntimeError):
        with pass_ctx:
            pass
    assert capsys.readouterr().out == "%1 exit ctx\n%2 exit ctx\n"
    cur_pass_ctx = T.PassContext.current()
    assert pass_ctx != cur_pass_ctx
    assert not cur_pass_ctx.instruments


def test_exit_pass_ctx_exception_global():
    @pass_instrument
    class PIBroken:
        def exit_pass_ctx(self):
            raise RuntimeError("Just a dummy error")

    cur_pass_ctx = T.PassContext.current()
    with pytest.raises(RuntimeError):
        cur_pass_ctx.override_instruments([PIBroken()])
        cur_pass_ctx.override_instruments([PIBroken()])
    assert not cur_pass_ctx.instruments


def pi_class(raise_in=None, sep=" "):
    """TVM's PI instrument of these tests: prints "<id><sep><hook>" in each of the five hooks, and
    raises RuntimeError in the hook `raise_in`."""

    @pass_instrument
    class PI:
        def __init__(self, id=""):
            self.id = id

        def _say(self, hook):
            print(self.id + sep + hook)
            if hook == raise_in:
                raise RuntimeError("Just a dummy error")

        def enter_pass_ctx(self):
            self._say("enter_pass_ctx")

        def exit_pass_ctx(self):
            self._say("exit_pass_ctx")

        def should_run(self, mod, info):
            self._say("should_run")
            return True

        def run_before_pass(self, mod, info):
            self._say("run_before_pass")

        def run_after_pass(self, mod, info):
            self._say("run_after_pass")

    return PI


@T.module_pass(opt_level=2)
def printing_transform(mod, ctx):
    print("transform pass")
    return mod


def test_pass_exception(capsys):
    PI = pi_class(sep="")

    @T.module_pass(opt_level=2)
    def transform(mod, ctx):
        print("transform pass")
        raise RuntimeError("Just a dummy error")

    with pytest.raises(RuntimeError, match="Just a dummy error"):
        with T.PassContext(instruments=[PI()]):
            transform(get_test_model())
    assert capsys.readouterr().out == ("enter_pass_ctx\n"
                                       "should_run\n"
                                       "run_before_pass\n"
                                       "transform pass\n"
                                       "exit_pass_ctx\n")


def test_should_run_exception(capsys):
    PI = pi_class(raise_in="should_run")
    with pytest.raises(RuntimeError):
        with T.PassContext(instruments=[PI("%1"), PI("%2")]):
            printing_transform(get_test_model())
    assert capsys.readouterr().out == ("%1 enter_pass_ctx\n"
                                       "%2 enter_pass_ctx\n"
                                       "%1 should_run\n"
                                       "%1 exit_pass_ctx\n"
                                       "%2 exit_pass_ctx\n")


def test_run_before_exception(capsys):
    PI = pi_class(raise_in="run_before_pass")
    with pytest.raises(RuntimeError):
        with T.PassContext(instruments=[PI("%1"), PI("%2")]):
            printing_transform(get_test_model())
    assert capsys.readouterr().out == ("%1 enter_pass_ctx\n"
                                       "%2 enter_pass_ctx\n"
                                       "%1 should_run\n"
                                       "%2 should_run\n"
                                       "%1 run_before_pass\n"
                                       "%1 exit_pass_ctx\n"
                                       "%2 exit_pass_ctx\n")


def test_run_after_exception(capsys):
    PI = pi_class(raise_in="run_after_pass")
    with pytest.raises(RuntimeError):
        with T.PassContext(instruments=[PI("%1"), PI("%2")]):
            printing_transform(get_test_model())
    assert capsys.readouterr().out == ("%1 enter_pass_ctx\n"
                                       "%2 enter_pass_ctx\n"
                                       "%1 should_run\n"
                                       "%2 should_run\n"
                                       "%1 run_before_pass\n"
                                       "%2 run_before_pass\n"
                                       "transform pass\n"
                                       "%1 run_after_pass\n"
                                       "%1 exit_pass_ctx\n"
                                       "%2 exit_pass_ctx\n")


def test_instrument_call_sequence(capsys):
    @pass_instrument
    class PI:
        def __init__(self, id):
            self.id = id

        def enter_pass_ctx(self):
            print(self.id + " enter_pass_ctx")

        def exit_pass_ctx(self):
            print(self.id + " exit_pass_ctx")

        def should_run(self, mod, info):
            print("  " + self.id + " should_run")
            return True

        def run_before_pass(self, mod, info):
            print("  " + self.id + " run_before_pass")

        def run_after_pass(self, mod, info):
            print("  " + self.id + " run_after_pass")

    @T.module_pass(opt_level=2)
    def transform1(mod, ctx):
        print("    transform1 pass")
        return mod

    @T.module_pass(opt_level=2)
    def transform2(mod, ctx):
        print("    transform2 pass")
        return mod

    mod = get_test_model()
    with T.PassContext(instruments=[PI("%1"), PI("%2")]):
        mod = transform1(mod)
        mod = transform2(mod)
    per_pass = lambda name: ("  %1 should_run\n  %2 should_run\n  %1 run_before_pass\n  %2 run_before_pass\n"
                             "    " + name + " pass\n  %1 run_after_pass\n  %2 run_after_pass\n")
    assert capsys.readouterr().out == ("%1 enter_pass_ctx\n%2 enter_pass_ctx\n" + per_pass("transform1") +
                                       per_pass("transform2") + "%1 exit_pass_ctx\n%2 exit_pass_ctx\n")


def test_print_all_passes(capsys):
    with T.PassContext(opt_level=3, instruments=[PrintBeforeAll(), PrintAfterAll()]):
        kiln.compile(get_test_model())
    out = capsys.readouterr().out
    assert "Before Running Pass:" in out
    assert "After Running Pass:" in out
    assert "pass name: kiln.default" in out
    assert "pass name: legalize_ops" in out


def test_exception_type_is_kept_through_pipelines():
    @T.module_pass(opt_level=0)
    def bad(mod, ctx):
        raise ValueError("no good")

    seq = T.Sequential([T.FoldConstant(), bad, T.DeadCodeElimination()])
    with pytest.raises(ValueError, match="no good"):
        seq(get_test_model())

    @pass_instrument
    class Broken:
        def run_after_pass(self, mod, info):
            raise KeyError("from an instrument")

    with pytest.raises(KeyError):
        with T.PassContext(instruments=[Broken()]):
            seq(get_test_model())
