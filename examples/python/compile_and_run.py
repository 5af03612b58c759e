#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln from Python: an MLP written in kiln's text format, a pass written in Python in a pipeline
with kiln's own passes, compiled under a pass context with instruments, run on numpy arrays and
checked against numpy.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/compile_and_run.py
"""
import numpy as np

import kiln

MLP = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 784), "float32"), w1: R.Tensor((784, 256), "float32"), b1: R.Tensor((256,), "float32"),
             w2: R.Tensor((256, 10), "float32"), b2: R.Tensor((10,), "float32")) -> R.Tensor((n, 10), "float32"):
        with R.dataflow():
            h: R.Tensor((n, 256), "float32") = R.nn.relu(R.add(R.matmul(x, w1), b1))
            logits: R.Tensor((n, 10), "float32") = R.add(R.matmul(h, w2), b2)
            probs: R.Tensor((n, 10), "float32") = R.nn.softmax(logits, axis=-1)
            R.output(probs)
        return probs
'''


@kiln.transform.function_pass(opt_level=1, required=["canonicalize_bindings"])
class CountBindings:
    """A Python pass: counts the bindings of each function (and leaves it as it is)."""

    def __init__(self):
        self.counts = {}

    def transform_function(self, func, mod, ctx):
        self.counts[func.params[0].name_hint] = func.script().count(" = ")
        return func


@kiln.instrument.pass_instrument
class PassNames:
    """A Python instrument: records the passes that ran, in order."""

    def __init__(self):
        self.names = []

    def run_before_pass(self, mod, info):
        self.names.append(info.name)


def main():
    mod = kiln.ir.IRModule.from_text(MLP)
    counter = CountBindings()
    pipeline = kiln.transform.Sequential([counter, kiln.transform.get_pass("kiln.default")], name="example")
    print("pipeline:", pipeline.text)
    print("steps:   ", ", ".join(name + (" (required)" if pulled else "") for name, pulled in pipeline.steps))

    timing, names = kiln.instrument.PassTimingInstrument(), PassNames()
    with kiln.transform.PassContext(opt_level=2, instruments=[timing, names]):
        ex = kiln.compile(mod, pipeline=pipeline)
        print("\nper-pass time (TVM's form):\n" + timing.render())
    print("bindings counted by the Python pass:", counter.counts)
    print("passes run:", len(names.names))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 784), dtype=np.float32)
    w1 = rng.standard_normal((784, 256), dtype=np.float32) * 0.05
    b1 = np.zeros(256, np.float32)
    w2 = rng.standard_normal((256, 10), dtype=np.float32) * 0.05
    b2 = np.zeros(10, np.float32)

    vm = kiln.runtime.VirtualMachine(ex)
    probs = vm["main"](x, w1, b1, w2, b2)
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(probs, expected, rtol=1e-4, atol=1e-6)
    print("\noutput", probs.shape, probs.dtype, "matches numpy (rtol 1e-4); row 0 argmax:", int(probs[0].argmax()))
    r = vm.time_evaluator("main", number=100, repeat=5)(x, w1, b1, w2, b2)
    print("time per call: median %.1f us, min %.1f us" % (r.median * 1e6, r.min * 1e6))


if __name__ == "__main__":
    main()
