# SPDX-License-Identifier: Apache-2.0
# The README's Python example, as the README shows it (tests/docs/check_snippets.py keeps the two
# the same; CTest runs it on a ResNet-18 exported from torchvision).
import numpy as np
import kiln

mod = kiln.onnx.from_onnx("resnet18.onnx", shape={"input": [1, 3, 224, 224]})
with kiln.transform.PassContext(opt_level=2, instruments=[kiln.instrument.PassTimingInstrument()]):
    ex = kiln.compile(mod)
vm = kiln.runtime.VirtualMachine(ex)
x = np.random.rand(1, 3, 224, 224).astype("float32")
y = vm["main"](x)                                       # numpy in and out, no copies
print(vm.time_evaluator("main", number=10, repeat=5)(x).median)
