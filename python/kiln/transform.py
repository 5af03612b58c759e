# SPDX-License-Identifier: Apache-2.0
"""kiln's pass infrastructure from Python, in the shape of TVM's tvm.transform.

    @kiln.transform.module_pass(opt_level=1, required=["fold_constant"])
    def add_attr(mod, ctx):
        return mod.with_attr("seen", True)

    @kiln.transform.function_pass(opt_level=1)
    class Rename:
        def __init__(self, key): self.key = key
        def transform_function(self, func, mod, ctx): return func.with_attr(self.key, 1)

    seq = kiln.transform.Sequential([add_attr, Rename("k"), kiln.transform.get_pass("dead_code_elimination")])
    with kiln.transform.PassContext(opt_level=2, instruments=[...], config={...}):
        mod = seq(mod)

Python passes are kiln passes: they run under the same protocol as C++ ones (opt level, required
and disabled passes, instruments, failure handling), their requirements are resolved by name
from the registry, and an exception they raise reaches the caller unchanged. C++ passes are
available by name (get_pass, list_passes) and by their CamelCase names (FoldConstant()).
"""
import inspect as _inspect
import re as _re
import threading as _threading

from ._kiln import transform as _t
from ._kiln.transform import PassInfo, list_passes, list_aliases, describe_passes, config_options  # noqa: F401


# ---- passes -------------------------------------------------------------------------------------

class Pass:
    """A pass or pipeline on kiln.ir.IRModule; call it on a module to run it in the current context."""

    def __init__(self, handle):
        object.__setattr__(self, "_handle", handle)

    @property
    def info(self):
        """The pass's PassInfo: name, opt_level, required, kind."""
        return self._handle.info

    @property
    def name(self):
        """The pass's name (kiln's: fold_constant, also when made by TVM's name FoldConstant)."""
        return self._handle.name

    @property
    def text(self):
        """The pipeline text form: `name`, or `name(a,b)` for a pipeline."""
        return self._handle.text

    def __call__(self, mod):
        return self._handle(mod)

    def __str__(self):
        return self._handle.text

    def __repr__(self):
        return "<kiln.transform.%s %s>" % (type(self).__name__, self._handle.text)


class ModulePass(Pass):
    """A pass on the whole module."""


class FunctionPass(Pass):
    """A pass on each graph-level function of the module."""


def _wrap(handle):
    kind = handle.info.kind
    cls = {"module pass": ModulePass, "function pass": FunctionPass, "sequential": Sequential}.get(kind, Pass)
    if cls is Sequential:
        p = Sequential.__new__(Sequential)
        Pass.__init__(p, handle)
        return p
    return cls(handle)


def _check_required(required):
    required = required if required else []
    if not isinstance(required, (list, tuple)):
        raise TypeError("Required is expected to be the type of list/tuple.")
    for r in required:
        if not isinstance(r, str):
            raise TypeError("Required is expected to be a list of pass names (str), not to hold a " + type(r).__name__)
    return list(required)


def _make(fn, name, opt_level, required, kind):
    return _t._make_python_pass(fn, name, opt_level, required, kind)


def _wrap_class_pass(pass_cls, name, opt_level, required, kind, method, base):
    """The decorated class: calling it with the class's constructor arguments makes a pass whose
    transformation is the instance's `method`; other attributes are the instance's."""

    class PyPass(base):
        def __init__(self, *args, **kwargs):
            inst = pass_cls(*args, **kwargs)
            if not hasattr(inst, method):
                raise TypeError("%s must define %s to be a %s" % (pass_cls.__name__, method, kind + " pass"))
            Pass.__init__(self, _make(getattr(inst, method), name, opt_level, required, kind))
            object.__setattr__(self, "_inst", inst)

        def __getattr__(self, attr):
            return getattr(object.__getattribute__(self, "_inst"), attr)

        def __setattr__(self, attr, value):
            setattr(self._inst, attr, value)

    PyPass.__name__ = pass_cls.__name__
    PyPass.__qualname__ = pass_cls.__qualname__
    PyPass.__doc__ = pass_cls.__doc__
    PyPass.__module__ = pass_cls.__module__
    return PyPass


def _pass_decorator(kind, method, base, pass_func, opt_level, name, required):
    if opt_level is None:
        raise ValueError("Please provide opt_level for the %s pass." % kind)
    required = _check_required(required)
    label = "Module" if kind == "module" else "Function"

    def create(pass_arg):
        if _inspect.isclass(pass_arg):
            return _wrap_class_pass(pass_arg, name or pass_arg.__name__, opt_level, required, kind, method, base)
        if not callable(pass_arg):
            raise TypeError("pass_func must be a callable for %s pass" % label)
        return base(_make(pass_arg, name or pass_arg.__name__, opt_level, required, kind))

    if pass_func:
        return create(pass_func)
    return create


def module_pass(pass_func=None, opt_level=None, name=None, required=None, traceable=False):
    """Makes a module pass from `pass_func(mod, ctx) -> IRModule`, or from a class whose
    `transform_module(self, mod, ctx)` is the transformation. Used as a decorator, with or without
    the function: @module_pass(opt_level=2) or module_pass(f, opt_level=2).
    name defaults to the function's or class's name; required lists passes (by name) to run first."""
    del traceable  # TVM's tracing flag: kiln has no pass tracing
    return _pass_decorator("module", "transform_module", ModulePass, pass_func, opt_level, name, required)


def function_pass(pass_func=None, opt_level=None, name=None, required=None, traceable=False):
    """Makes a function pass from `pass_func(func, mod, ctx) -> function` (called for each
    graph-level function; functions with SkipOptimization are left alone), or from a class whose
    `transform_function(self, func, mod, ctx)` is the transformation."""
    del traceable
    return _pass_decorator("function", "transform_function", FunctionPass, pass_func, opt_level, name, required)


class Sequential(Pass):
    """Passes run in order: each pass's requirements are resolved first (pulled in from the
    registry when not listed), and each step runs when the context enables it (disabled >
    required > opt level). `required` names passes the pipeline itself needs: they run first."""

    def __init__(self, passes=None, opt_level=0, name="sequential", required=None, traceable=False):
        del traceable
        passes = passes if passes else []
        if not isinstance(passes, (list, tuple)):
            raise TypeError("passes must be a list of Pass objects.")
        required = _check_required(required)
        handles = [get_pass(r)._handle for r in required]
        for p in passes:
            if not isinstance(p, Pass):
                raise TypeError("passes must be a list of Pass objects, and one is a " + type(p).__name__)
            handles.append(p._handle)
        Pass.__init__(self, _t._make_sequential(handles, name, opt_level))

    @property
    def steps(self):
        """The resolved steps: (name, pulled in as a requirement)."""
        return self._handle.steps


def get_pass(name):
    """A new instance of the pass registered as `name` (kiln's compiler passes, and passes
    registered with register_pass); a kiln.UsageError suggesting close names when there is none."""
    return _wrap(_t.get_pass(name))


def get_pipeline(name="default"):
    """TVM's relax.get_pipeline: "default" is the pipeline kiln.compile runs (simplification,
    fusion, legalization, weight packing, lowering to the VM); "zero" legalizes, fuses and lowers
    without graph simplification; "default_build" only legalizes and lowers."""
    return _wrap(_t.get_pipeline(name))


def parse_pipeline(text, name="sequential"):
    """A pipeline from its text form, e.g. "fold_constant,dead_code_elimination"."""
    return _wrap(_t.parse_pipeline(text, name))


def register_pass(p):
    """Registers pass `p` under its name, so that get_pass, pipeline text and other passes'
    `required` lists find it. Returns `p`, so it can decorate."""
    if not isinstance(p, Pass):
        raise TypeError("kiln.transform.register_pass: expected a Pass, not " + type(p).__name__)
    _t.register_pass(p._handle)
    return p


def PrintIR(header="", show_meta_data=False):  # noqa: N802 - TVM's name
    """A module pass that prints the module and returns it unchanged."""
    del show_meta_data

    @module_pass(opt_level=0, name="PrintIR")
    def print_ir(mod, ctx):
        del ctx
        print("PrintIR(%s):\n%s" % (header, mod))
        return mod

    return print_ir


# ---- the pass context ---------------------------------------------------------------------------

_state = _threading.local()


def _stack():
    s = getattr(_state, "stack", None)
    if s is None:
        s = _state.stack = []
    return s


def _check_list(value, what):
    if value is None:
        return []
    if not isinstance(value, (list, tuple, set)):
        raise TypeError("%s is expected to be the type of list/tuple/set." % what)
    return list(value)


class PassContext:
    """How passes run: opt level, passes required and disabled by name, instruments, config.

    with PassContext(opt_level=3, disabled_pass=["fold_constant"], instruments=[timer],
                     config={"kiln.some_option": 1}):
        mod = pipeline(mod)
    """

    def __init__(self, opt_level=2, required_pass=None, disabled_pass=None, instruments=None, config=None,
                 trace=None, trace_stack=None, make_traceable=None, num_evals=0, tuning_api_database=None):
        del trace, trace_stack, make_traceable, num_evals, tuning_api_database  # TVM's tracing: not in kiln
        required = _check_list(required_pass, "required_pass")
        disabled = _check_list(disabled_pass, "disabled_pass")
        instruments = _check_list(instruments, "instruments")
        if config is not None and not isinstance(config, dict):
            raise TypeError("config is expected to be the type of dict.")
        self._handle = _t._PassContext(opt_level, required, disabled, config or {})
        self._instruments = instruments
        self._handle._set_instruments(instruments)

    @classmethod
    def _from_handle(cls, handle):
        for ctx in reversed(_stack()):
            if ctx._handle._same(handle):
                return ctx
        default = getattr(_state, "default", None)
        if default is not None and default._handle._same(handle):
            return default
        obj = cls.__new__(cls)
        obj._handle = handle
        obj._instruments = []
        return obj

    def __enter__(self):
        self._handle._enter()
        _stack().append(self)
        return self

    def __exit__(self, ptype, value, trace):
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()
        try:
            self._handle._exit()
        except Exception:  # pylint: disable=broad-except
            if ptype is None:
                raise
            # an exception is already on its way out of the with block: that one reaches the caller

    @staticmethod
    def current():
        """The innermost entered PassContext on this thread, or the thread's default context."""
        stack = _stack()
        if stack:
            return stack[-1]
        default = getattr(_state, "default", None)
        if default is None:
            default = PassContext._from_handle(_t._PassContext._thread_default())
            _state.default = default
        return default

    def override_instruments(self, instruments):
        """Exits the current instruments, then enters `instruments` (a list, or None for none)."""
        instruments = _check_list(instruments, "instruments")
        self._instruments = instruments
        self._handle._override_instruments(instruments)

    @property
    def instruments(self):
        """The instruments, or None when there are none (as after an instrument failed to enter or exit)."""
        return list(self._instruments) if self._handle._num_instruments else None

    @property
    def opt_level(self):
        """The opt level: a pipeline step runs when its own is at most this (or it is required)."""
        return self._handle.opt_level

    @property
    def required_pass(self):
        """Names of passes that run whatever their opt level."""
        return self._handle.required_pass

    @property
    def disabled_pass(self):
        """Names of passes that never run as pipeline steps."""
        return self._handle.disabled_pass

    @property
    def config(self):
        """The config options set, as a dict."""
        return self._handle.config

    @property
    def num_threads(self):
        """The threads function passes run on (each function of a module on its own thread)."""
        return self._handle.num_threads

    @num_threads.setter
    def num_threads(self, n):
        self._handle.num_threads = n

    @property
    def diagnostics(self):
        """The diagnostics passes reported in this context, as text (\"pass: severity: message\")."""
        return self._handle.diagnostics

    def statistics_report(self):
        """The passes' statistics (counters), as LLVM's -stats prints them."""
        return self._handle.statistics_report()

    @staticmethod
    def list_configs():
        """The registered config options: {key: {"type": ..., "description": ...}}."""
        return {k: {"type": t, "description": d} for k, t, d in config_options()}

    def __eq__(self, other):
        return isinstance(other, PassContext) and self._handle._same(other._handle)

    def __hash__(self):
        return hash(self._handle._id())


# ---- C++ passes by their CamelCase names --------------------------------------------------------

def _snake(name):
    return _re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def __getattr__(name):
    if name[:1].isupper():
        aliases = dict(list_aliases())
        target = name if name in aliases else _snake(name)
        if target in aliases or target in list_passes():
            def make():
                return get_pass(target)
            make.__name__ = name
            info = get_pass(target).info
            make.__doc__ = "The pass '%s' (kiln.transform.get_pass): %s" % (info.name, info.description or info.kind)
            return make
    raise AttributeError("module 'kiln.transform' has no attribute '%s'" % name)


def __dir__():
    return sorted(set(__all__) | {a for a, _ in list_aliases()})


__all__ = ["Pass", "ModulePass", "FunctionPass", "Sequential", "PassInfo", "PassContext", "module_pass",
           "function_pass", "get_pass", "get_pipeline", "list_passes", "list_aliases", "describe_passes", "parse_pipeline", "register_pass", "PrintIR",
           "config_options"]
