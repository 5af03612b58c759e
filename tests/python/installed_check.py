# SPDX-License-Identifier: Apache-2.0
"""Run by CTest after `cmake --install` into a temporary prefix, and in a virtual environment the
wheel was installed into: the installed package (not the build tree's) imports, builds, compiles
and runs a function. Arguments: the expected package dir; `--export LIBRARY` also compiles to C++,
exports a shared library (with the headers the package finds on its own) and runs it."""
import os
import sys

import numpy as np

import kiln

expected = os.path.realpath(sys.argv[1])
assert os.path.realpath(os.path.dirname(kiln.__file__)) == expected, (kiln.__file__, expected)
x = kiln.ir.var("x", (4,))
bb = kiln.ir.BlockBuilder()
with bb.function("main", [x]):
    bb.emit_func_output(bb.emit(kiln.ir.call_op("nn.relu", [x])))
y = kiln.runtime.VirtualMachine(kiln.compile(bb.get()))["main"](np.array([-1, 2, -3, 4], "float32"))
np.testing.assert_array_equal(y, [0, 2, 0, 4])
if "--export" in sys.argv:
    library = sys.argv[sys.argv.index("--export") + 1]
    kiln.compile(bb.get(), exec_mode="compiled").export_library(library, flags=["-O1"])
    y = kiln.runtime.VirtualMachine(kiln.runtime.load_module(library))["main"](np.array([-1, 2, -3, 4], "float32"))
    np.testing.assert_array_equal(y, [0, 2, 0, 4])
    print("exported library works:", library)
print("installed kiln works:", kiln.__file__)
