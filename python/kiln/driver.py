# SPDX-License-Identifier: Apache-2.0
"""kiln.compile: an IR module in, an executable the virtual machine runs out (the design's tvm.compile)."""
from . import _kiln
from .transform import Pass


def compile(mod, pipeline=None, opt_level=None, exec_mode="bytecode", instrumented=False):  # noqa: A001 - the design's name
    """Compiles `mod` under the current pass context (kiln.transform.PassContext.current()).

    pipeline: None for kiln's default pipeline; pipeline text ("legalize_ops,kiln.lower_to_vm");
              or a Pass / Sequential, which may contain Python passes.
    opt_level: the opt level when no PassContext is entered (default 2).
    exec_mode: "bytecode" (the VM interprets it) or "compiled" (C++: ex.export_library(path), then
               kiln.runtime.load_module(path)).
    instrumented: with exec_mode="compiled", the compiled functions report every call they make to
               the VM's instrument (VirtualMachine.set_instrument), as the bytecode does; off, the
               instrument sees only the calls of compiled functions themselves (as in TVM).
    """
    if isinstance(pipeline, Pass):
        return _kiln._compile_with_pass(mod, pipeline._handle, opt_level, exec_mode, instrumented)
    if pipeline is not None and not isinstance(pipeline, str):
        raise TypeError("kiln.compile: pipeline must be None, pipeline text or a kiln.transform.Pass, not "
                        + type(pipeline).__name__)
    return _kiln.compile(mod, pipeline, opt_level, exec_mode, instrumented)
