# SPDX-License-Identifier: Apache-2.0
"""kiln.runtime.Decoder on a GPT-2 decoder with past exported from PyTorch (scripts/gpt2.py): the
greedy tokens are PyTorch's, a batch of prompts of different lengths decodes as each alone,
sampling is seeded, tokens stream to a callback, and bad arguments are refused by name. CTest
exports the model first and names its folder in KILN_ONNX_MODELS."""
import os

import numpy as np
import pytest

import kiln

MODELS = os.environ.get("KILN_ONNX_MODELS", "")
pytestmark = pytest.mark.skipif(not (kiln.has_onnx and MODELS and os.path.exists(os.path.join(MODELS, "gpt2_test.onnx"))),
                                reason="needs the ONNX importer and the GPT-2 model CTest exports (KILN_ONNX_MODELS)")


def reference(name, length):
    return np.load(os.path.join(MODELS, f"gpt2_test.{name}_{length}.npy"))


@pytest.fixture(scope="module")
def decoder():
    mod = kiln.onnx.from_onnx(os.path.join(MODELS, "gpt2_test.onnx"))
    return kiln.runtime.Decoder(kiln.runtime.VirtualMachine(kiln.compile(mod)))


def test_greedy_tokens_are_pytorchs(decoder):
    assert decoder.cache_names == ["past_key_values_0_key", "past_key_values_0_value", "past_key_values_1_key", "past_key_values_1_value"]
    for length in (2, 31):
        want = reference("tokens", length).tolist()
        assert decoder.generate([reference("prompt", length)[0].tolist()], max_new_tokens=len(want)) == [want]


def test_a_batch_of_different_lengths_decodes_as_each_alone_and_streams(decoder):
    prompts = [reference("prompt", n)[0].tolist() for n in (13, 2)]
    want = [reference("tokens", n)[:12].tolist() for n in (13, 2)]
    seen = []
    assert decoder.generate(prompts, max_new_tokens=12, on_token=lambda row, token: seen.append((row, token))) == want
    assert [t for r, t in seen if r == 0] == want[0] and [t for r, t in seen if r == 1] == want[1]


def test_sampling_is_seeded(decoder):
    prompt = [reference("prompt", 5)[0].tolist()]
    a = decoder.generate(prompt, max_new_tokens=12, temperature=0.8, top_k=40, top_p=0.9, seed=11)
    assert a == decoder.generate(prompt, max_new_tokens=12, temperature=0.8, top_k=40, top_p=0.9, seed=11)
    assert len(a[0]) == 12
    stop = a[0][4]
    stopped = decoder.generate(prompt, max_new_tokens=12, temperature=0.8, top_k=40, top_p=0.9, seed=11, stop_token=stop)
    assert stopped[0] == a[0][:a[0].index(stop) + 1]


def test_errors_name_the_argument(decoder):
    with pytest.raises(kiln.UsageError, match="prompt 0 is empty"):
        decoder.generate([[]])
    with pytest.raises(kiln.UsageError, match=r"top_p must be in \(0, 1\]"):
        decoder.generate([[1, 2]], top_p=0)
    with pytest.raises(TypeError, match="on_token must be callable"):
        decoder.generate([[1, 2]], on_token=3)
    with pytest.raises(ZeroDivisionError):
        decoder.generate([[1, 2]], on_token=lambda row, token: 1 / 0)
    # The machine is whole after a failed callback.
    assert decoder.generate([[1, 2]], max_new_tokens=2) == decoder.generate([[1, 2]], max_new_tokens=2)
    mlp = kiln.runtime.VirtualMachine(kiln.compile(kiln.onnx.from_onnx(os.path.join(MODELS, "mlp.onnx"))))
    with pytest.raises(kiln.UsageError, match="parameter 'input' is none of input_ids"):
        kiln.runtime.Decoder(mlp)


def test_upper_bounds_reach_the_planner_and_are_checked():
    mod = kiln.onnx.from_onnx(os.path.join(MODELS, "gpt2_test.onnx"), upper_bound={"past_sequence_length": 16, "sequence_length": 8})
    assert mod["main"].attrs["tir_var_upper_bound"] == {"past_sequence_length": 16, "sequence_length": 8}
    dec = kiln.runtime.Decoder(kiln.runtime.VirtualMachine(kiln.compile(mod)))
    prompt = reference("prompt", 5)[0].tolist()
    assert dec.generate([prompt], max_new_tokens=12) == [reference("tokens", 5)[:12].tolist()]
    with pytest.raises(kiln.VMError, match="past_sequence_length = 17 exceeds its upper bound 16"):
        dec.generate([prompt], max_new_tokens=20)
    with pytest.raises(kiln.KilnError, match="upper_bounds names 'context'"):
        kiln.onnx.from_onnx(os.path.join(MODELS, "gpt2_test.onnx"), upper_bound={"context": 8})
