# SPDX-License-Identifier: Apache-2.0
# The tour docs/python.md shows: the lines between the two `# [tour]` marks, which
# tests/docs/check_snippets.py keeps the same as the page. CTest runs it in a folder holding
# model.onnx (the ResNet-18 the ONNX tests export from torchvision) and gpt2.onnx (their GPT-2
# decoder with past), and checks what it computed at the end.
import numpy as np

text = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 16), "float32"), w: R.Tensor((16, 4), "float32")) -> R.Tensor((n, 4), "float32"):
        with R.dataflow():
            y: R.Tensor((n, 4), "float32") = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y
'''
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 16), dtype=np.float32)
w = rng.standard_normal((16, 4), dtype=np.float32)

# [tour]
import numpy as np
import kiln

mod = kiln.ir.IRModule.from_text(text)                # the text format; mod.show() prints it

@kiln.transform.module_pass(opt_level=1, required=["fold_constant"])
def tag(mod, ctx):                                      # a pass written in Python
    return mod.with_attr("tagged", True)

@kiln.transform.function_pass(opt_level=1)
class Mark:                                             # the class form: constructor arguments,
    def __init__(self, key): self.key = key             # transform_function(func, mod, ctx)
    def transform_function(self, func, mod, ctx): return func.with_attr(self.key, 1)

@kiln.instrument.pass_instrument
class Names:                                            # any of the five hooks (and kiln's two more)
    def run_before_pass(self, mod, info): print(info.name)

pipeline = kiln.transform.Sequential([tag, Mark("seen"), kiln.transform.get_pass("kiln.default")])
with kiln.transform.PassContext(opt_level=2, disabled_pass=["fuse_elementwise"],
                                instruments=[Names(), kiln.instrument.PassTimingInstrument()]):
    ex = kiln.compile(mod, pipeline=pipeline)          # or kiln.compile(mod): the default pipeline

vm = kiln.runtime.VirtualMachine(ex)
y = vm["main"](x, w)                                   # numpy arrays in and out, no copies
vm.set_input("main", x, w); vm.invoke_stateful("main"); y = vm.get_outputs("main")
print(vm.time_evaluator("main", number=100, repeat=5)(x, w).median)
ex.save("model.kx"); ex = kiln.runtime.load_executable("model.kx")
mod = kiln.onnx.from_onnx("model.onnx", shape={"input": [1, 3, 224, 224]})   # path, bytes or ModelProto; upper_bound={"n": 64}
dec = kiln.runtime.Decoder(kiln.runtime.VirtualMachine(kiln.compile(kiln.onnx.from_onnx("gpt2.onnx"))))
tokens = dec.generate([[464, 68, 586]], max_new_tokens=32, temperature=0.8, top_p=0.95, seed=1)
# [tour]

np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(kiln.runtime.VirtualMachine(ex)["main"](x, w), y, rtol=0, atol=0)
assert mod["main"] is not None
assert len(tokens) == 1 and len(tokens[0]) == 32, tokens
print("tour: ok")
