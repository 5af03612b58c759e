# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures for kiln's Python tests. The module under test comes from the build tree:
PYTHONPATH=<build>/python (scripts/test and CTest set it)."""
import pytest

import kiln

ADD_MODULE = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")) -> R.Tensor((3, 4), "float32"):
        with R.dataflow():
            z: R.Tensor((3, 4), "float32") = R.add(x, y)
            R.output(z)
        return z
'''

# TVM's get_test_model, in kiln's IR: x + y, x - z, (e1 * (e1 / e2)) + e2.
TEST_MODEL = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32"),
             z: R.Tensor((3, 4), "float32")) -> R.Tensor((3, 4), "float32"):
        with R.dataflow():
            e1: R.Tensor((3, 4), "float32") = R.add(x, y)
            e2: R.Tensor((3, 4), "float32") = R.subtract(x, z)
            e3: R.Tensor((3, 4), "float32") = R.multiply(e1, R.divide(e1, e2))
            out: R.Tensor((3, 4), "float32") = R.add(e3, e2)
            R.output(out)
        return out
'''

MLP = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 16), "float32"), w1: R.Tensor((16, 32), "float32"), b1: R.Tensor((32,), "float32"),
             w2: R.Tensor((32, 4), "float32"), b2: R.Tensor((4,), "float32")) -> R.Tensor((n, 4), "float32"):
        with R.dataflow():
            h: R.Tensor((n, 32), "float32") = R.nn.relu(R.add(R.matmul(x, w1), b1))
            logits: R.Tensor((n, 4), "float32") = R.add(R.matmul(h, w2), b2)
            probs: R.Tensor((n, 4), "float32") = R.nn.softmax(logits, axis=-1)
            R.output(probs)
        return probs
'''


def get_test_model():
    return kiln.ir.IRModule.from_text(TEST_MODEL)


@pytest.fixture(autouse=True)
def clean_default_context():
    """Each test starts and ends with no instruments on this thread's default context."""
    kiln.transform.PassContext.current().override_instruments(None)
    yield
    try:
        kiln.transform.PassContext.current().override_instruments(None)
    except Exception:  # pylint: disable=broad-except
        pass
