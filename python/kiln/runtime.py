# SPDX-License-Identifier: Apache-2.0
"""The executable and kiln's virtual machine.

    ex = kiln.compile(mod)
    vm = kiln.runtime.VirtualMachine(ex)
    y = vm["main"](x, w)                       # numpy arrays in and out, without copies
    vm.set_input("main", x, w); vm.invoke_stateful("main"); y = vm.get_outputs("main")
    timer = vm.time_evaluator("main", number=100); print(timer(x, w).median)
    ex.save("model.kx"); ex2 = kiln.runtime.load_executable("model.kx")
    ex = kiln.compile(mod, exec_mode="compiled"); ex.export_library("model.so")
    vm = kiln.runtime.VirtualMachine(kiln.runtime.load_module("model.so"))

Arrays: a C-contiguous numpy array of dtype bool, int8, int32, int64, uint8, float16, float32 or
float64 is passed to kiln without a copy (kiln never writes to its inputs); other arrays are
converted first. Results are numpy arrays over kiln's memory, which they keep alive. An R.Shape
argument is a ShapeTuple([...]); a VM value with no Python form (a key/value cache a program
keeps as state, a closure) comes back as an Object, passed back in as it is.
"""
import enum as _enum
import os as _os

from ._kiln import runtime as _rt
from ._kiln.runtime import (Executable, VirtualMachine, Function, BenchmarkResult, Decoder, ShapeTuple, Object,  # noqa: F401
                            load_executable, load_module, executable_from_bytes, set_num_threads, num_threads,
                            isa, isa_report, cpu_caches)

# A wheel carries kiln's headers (kiln/include) for export_library's C++ compiler.
_headers = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "include")
if _os.path.isfile(_os.path.join(_headers, "kiln", "vm", "compiled.hpp")):
    _rt._set_packaged_headers(_headers)


class VMInstrumentReturnKind(_enum.IntEnum):
    """What a VM instrument returns before a call: run it (NO_OP, or None) or skip it."""
    NO_OP = 0
    SKIP_RUN = 1


__all__ = ["Executable", "VirtualMachine", "Function", "BenchmarkResult", "Decoder", "ShapeTuple", "Object", "load_executable", "load_module", "executable_from_bytes",
           "set_num_threads", "num_threads", "isa", "isa_report", "cpu_caches",
           "VMInstrumentReturnKind"]
