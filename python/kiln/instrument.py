# SPDX-License-Identifier: Apache-2.0
"""Pass instruments from Python, in the shape of TVM's tvm.instrument.

    @kiln.instrument.pass_instrument
    class PrintNames:
        def run_before_pass(self, mod, info):
            print(info.name)

    with kiln.transform.PassContext(instruments=[PrintNames(), kiln.instrument.PassTimingInstrument()]):
        ...

An instrument has any of the hooks enter_pass_ctx(), exit_pass_ctx(), should_run(mod, info) ->
bool, run_before_pass(mod, info), run_after_pass(mod, info), and kiln's run_before_skipped_pass(mod,
info) and run_after_pass_failed(mod, info, reason). Hooks it lacks are never called. Order and
exceptions follow TVM: instruments are called in list order; an exception from a hook reaches the
caller unchanged; when an enter_pass_ctx fails, the context's instruments are cleared; when an
exit_pass_ctx fails, the instruments after it do not exit and the list is cleared.
"""
from ._kiln.instrument import PassTimingInstrument  # noqa: F401

_HOOKS = ("enter_pass_ctx", "exit_pass_ctx", "should_run", "run_before_pass", "run_after_pass",
          "run_before_skipped_pass", "run_after_pass_failed")


class PassInstrument:
    """The base of instruments written in Python (pass_instrument makes a class one)."""


def pass_instrument(pi_cls=None):
    """Makes a class with any of the hooks an instrument class: its instances can be given to a
    PassContext's `instruments`."""

    def create(cls):
        if not isinstance(cls, type):
            raise TypeError("pass_instrument must decorate a class, not a " + type(cls).__name__)
        if not any(hasattr(cls, h) for h in _HOOKS):
            raise TypeError("%s has none of the instrument hooks %s" % (cls.__name__, ", ".join(_HOOKS)))
        if issubclass(cls, PassInstrument):
            return cls
        wrapped = type(cls.__name__, (cls, PassInstrument), {})
        wrapped.__qualname__ = cls.__qualname__
        wrapped.__doc__ = cls.__doc__
        wrapped.__module__ = cls.__module__
        return wrapped

    if pi_cls:
        return create(pi_cls)
    return create


@pass_instrument
class PrintBeforeAll:
    """Prints the name of each pass and the module before the pass runs."""

    def run_before_pass(self, mod, info):
        print("Before Running Pass: %s" % info)
        print(mod)


@pass_instrument
class PrintAfterAll:
    """Prints the name of each pass and the module after the pass ran."""

    def run_after_pass(self, mod, info):
        print("After Running Pass: %s" % info)
        print(mod)


@pass_instrument
class PrintAfterChange:
    """Prints the module after each pass that changed it (a new module object)."""

    def __init__(self):
        self._before = None

    def run_before_pass(self, mod, info):
        del info
        self._before = mod

    def run_after_pass(self, mod, info):
        if self._before is None or not mod.same_as(self._before):
            print("After Running Pass: %s" % info)
            print(mod)
        self._before = None


__all__ = ["PassInstrument", "pass_instrument", "PassTimingInstrument", "PrintBeforeAll", "PrintAfterAll",
           "PrintAfterChange"]
