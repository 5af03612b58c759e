# SPDX-License-Identifier: Apache-2.0
"""Run by CTest after `cmake --install` into a temporary prefix: the installed package (not the
build tree's) imports, builds, compiles and runs a function. Argument: the expected package dir."""
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
print("installed kiln works:", kiln.__file__)
