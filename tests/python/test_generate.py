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


def test_a_loop_over_the_vm_passes_the_caches_back_and_they_grow_in_place():
    # The loop a user writes over vm["main"]: the present arrays passed back as the next past are
    # kiln's own tensors again, so each step appends into the same buffer (kv_cache_in_place);
    # the values are those of the executable that copies the cache.
    mod = kiln.onnx.from_onnx(os.path.join(MODELS, "gpt2_test.onnx"))
    vm = kiln.runtime.VirtualMachine(kiln.compile(mod))
    with kiln.transform.PassContext(disabled_pass=["kv_cache_in_place"]):
        copying = kiln.runtime.VirtualMachine(kiln.compile(mod))
    want = reference("tokens", 5)
    ids = reference("prompt", 5).astype(np.int64)
    past = past_copied = [np.zeros((1, 4, 0, 32), np.float32)] * 4
    total = 0
    for step in range(8):
        t = ids.shape[1]
        args = (ids, np.ones((1, total + t), np.int64), np.arange(total, total + t, dtype=np.int64)[None])
        logits, *present = vm["main"](*args, *past)
        logits_copied, *present_copied = copying["main"](*args, *past_copied)
        np.testing.assert_allclose(logits, logits_copied, rtol=1e-6, atol=1e-6)
        for p, q in zip(present, present_copied):
            np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-6)
            assert p.shape == (1, 4, total + t, 32) and not p.flags["C_CONTIGUOUS"]
        if step > 0:
            assert all(np.may_share_memory(p, q) for p, q in zip(present, past))
        total += t
        token = int(np.argmax(logits[0, -1]))
        assert token == want[step]
        ids = np.array([[token]], np.int64)
        past, past_copied = present, present_copied
