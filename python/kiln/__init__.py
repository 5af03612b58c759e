# SPDX-License-Identifier: Apache-2.0
"""kiln from Python: the IR, the pass infrastructure, the compiler and the virtual machine.

    import kiln
    mod = kiln.ir.IRModule.from_text(text)

    @kiln.transform.module_pass(opt_level=1)
    def my_pass(mod, ctx):
        return mod

    with kiln.transform.PassContext(opt_level=2, instruments=[kiln.instrument.PassTimingInstrument()]):
        ex = kiln.compile(kiln.transform.Sequential([my_pass])(mod))
    vm = kiln.runtime.VirtualMachine(ex)
    y = vm["main"](x)              # numpy arrays in and out, without copies

The C++ core is kiln._kiln; the modules here give it the shape of TVM's Python API.
"""
from ._kiln import KilnError, UsageError, ParseError, PassError, VMError, __version__, has_onnx
from . import ir
from . import dpl
from . import transform
from . import instrument
from . import runtime
from .driver import compile
from .transform import get_pipeline

del driver  # the module behind kiln.compile, not part of the API

__all__ = ["ir", "dpl", "transform", "instrument", "runtime", "compile", "get_pipeline", "KilnError", "UsageError", "ParseError",
           "PassError", "VMError", "__version__", "has_onnx"]
if has_onnx:
    from . import onnx  # noqa: F401
    __all__.append("onnx")
