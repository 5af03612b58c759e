#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A GPT-2 decoder in PyTorch, exported to ONNX in the "decoder with past" form.

    scripts/gpt2.py OUT.onnx [--size test|small] [--reference STEM --prompt-lengths 2,5 --steps 64] [--weights DIR]

The model is GPT-2's architecture as Hugging Face's GPT2LMHeadModel writes it: token and position
embeddings, pre-LayerNorm blocks of causal self-attention and a tanh-GELU MLP, a final LayerNorm and
an LM head tied to the token embedding. Weights are random (seeded); nothing is downloaded.

The ONNX file has the inputs and outputs ONNX Runtime users run (Hugging Face Optimum's names):

    input_ids        int64 [batch_size, sequence_length]
    attention_mask   int64 [batch_size, past_sequence_length + sequence_length]  (1 = attend)
    position_ids     int64 [batch_size, sequence_length]
    past_key_values.<i>.key / .value   float32 [batch_size, heads, past_sequence_length, head_dim]
    logits           float32 [batch_size, sequence_length, vocab]
    present.<i>.key / .value           float32 [batch_size, heads, past_sequence_length + sequence_length, head_dim]

with the batch and both lengths symbolic. A prefill passes an empty past (past_sequence_length 0).

--reference STEM writes PyTorch's greedy decoding of random prompts with its own cache: for each
prompt length L, STEM.prompt_L.npy (int64 [1, L]), STEM.tokens_L.npy (int64 [steps]) and
STEM.logits_L.npy (float32 [steps, vocab], the logits each token was chosen from), and
STEM.logits64_L.npy (float64 [steps, vocab]: the same logits from the model in double precision on
the same tokens, the reference against which an engine's rounding error and PyTorch's float32 one
are measured).

--weights DIR writes the same model's weights for a program that builds it in kiln's IR
(examples/gpt2_ir.hpp): DIR/config.json with Hugging Face's GPT2Config names (n_layer, n_embd,
n_head, vocab_size, n_positions, layer_norm_epsilon) and one DIR/NAME.npy per parameter, named as
PyTorch's state_dict names them (wte.weight, h.0.attn.c_attn.weight, ...; nn.Linear's [out, in]
layout).

Needs Debian's python3-torch and python3-onnx (run with /usr/bin/python3).
"""
import argparse
import copy
import json
import math
import os

import numpy as np
import torch
from torch import nn

SIZES = {
    # layers, d_model, heads, vocabulary, maximum context, the weights' standard deviation
    # The test model's weights are larger than GPT-2's 0.02: with those, a random model repeats one
    # token, and greedy decoding would test nothing.
    "test": dict(layers=2, d=128, heads=4, vocab=1000, context=256, init_std=0.3),
    "small": dict(layers=12, d=768, heads=12, vocab=50257, context=1024, init_std=0.02),  # GPT-2 small's shape
}


class Attention(nn.Module):
    def __init__(self, d, heads, context):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(context, context, dtype=torch.bool)), persistent=False)

    def forward(self, x, mask_bias, past_k, past_v):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.c_attn(x).split(d, dim=2)
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = torch.cat((past_k, k.view(b, t, self.heads, hd).transpose(1, 2)), dim=-2)
        v = torch.cat((past_v, v.view(b, t, self.heads, hd).transpose(1, 2)), dim=-2)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        total = k.size(-2)
        causal = self.bias[total - t:total, :total]
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = torch.softmax(w + mask_bias, dim=-1)
        y = torch.matmul(w, v).transpose(1, 2).reshape(b, t, d)
        return self.c_proj(y), k, v


class Block(nn.Module):
    def __init__(self, d, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, context)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x, mask_bias, past_k, past_v):
        a, k, v = self.attn(self.ln_1(x), mask_bias, past_k, past_v)
        x = x + a
        x = x + self.c_proj(nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x, k, v


class GPT2(nn.Module):
    def __init__(self, layers, d, heads, vocab, context, init_std):
        super().__init__()
        self.layers, self.d, self.heads, self.vocab, self.context = layers, d, heads, vocab, context
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.h = nn.ModuleList(Block(d, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, init_std)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.wte(input_ids) + self.wpe(position_ids)
        # 0 where attended, the dtype's minimum where masked (padding), broadcast over heads and queries.
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        present = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, mask_bias, past[2 * i], past[2 * i + 1])
            present += [k, v]
        logits = torch.matmul(self.ln_f(x), self.wte.weight.t())
        return (logits, *present)

    def empty_past(self, batch):
        shape = (batch, self.heads, 0, self.d // self.heads)
        return [torch.zeros(shape) for _ in range(2 * self.layers)]


def build(size, seed=0):
    torch.manual_seed(seed)
    return GPT2(**SIZES[size]).eval()


def export(model, path):
    names_in = ["input_ids", "attention_mask", "position_ids"]
    names_out = ["logits"]
    dynamic = {"input_ids": {0: "batch_size", 1: "sequence_length"},
               "attention_mask": {0: "batch_size", 1: "past_sequence_length + sequence_length"},
               "position_ids": {0: "batch_size", 1: "sequence_length"},
               "logits": {0: "batch_size", 1: "sequence_length"}}
    for i in range(model.layers):
        for kind in ("key", "value"):
            names_in.append(f"past_key_values.{i}.{kind}")
            names_out.append(f"present.{i}.{kind}")
            dynamic[names_in[-1]] = {0: "batch_size", 2: "past_sequence_length"}
            dynamic[names_out[-1]] = {0: "batch_size", 2: "past_sequence_length + sequence_length"}
    # Traced at batch 2, a past of 3 and 4 new positions: no dimension is 1 or 0, so none is
    # specialised into the graph.
    b, past_len, t = 2, 3, 4
    hd = model.d // model.heads
    ids = torch.randint(0, model.vocab, (b, t))
    mask = torch.ones(b, past_len + t, dtype=torch.int64)
    pos = torch.arange(past_len, past_len + t).unsqueeze(0).expand(b, t).contiguous()
    past = [torch.randn(b, model.heads, past_len, hd) for _ in range(2 * model.layers)]
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask, pos, *past), path, input_names=names_in, output_names=names_out,
                          dynamic_axes=dynamic, opset_version=17, do_constant_folding=True)


@torch.no_grad()
def greedy(model, prompt, steps):
    """PyTorch's greedy decoding with its own cache: the tokens and the logits each was chosen from."""
    past = model.empty_past(1)
    ids = prompt
    length = 0
    tokens, chosen_from = [], []
    for _ in range(steps):
        t = ids.shape[1]
        mask = torch.ones(1, length + t, dtype=torch.int64)
        pos = torch.arange(length, length + t).unsqueeze(0)
        logits, *past = model(ids, mask, pos, *past)
        last = logits[0, -1]
        token = int(torch.argmax(last))
        tokens.append(token)
        chosen_from.append(last.numpy().copy())
        length += t
        ids = torch.tensor([[token]])
    return np.array(tokens, dtype=np.int64), np.stack(chosen_from).astype(np.float32)


@torch.no_grad()
def exact_logits(model, prompt, tokens):
    """The logits greedy() chose `tokens` from, computed by the model in double precision in one
    call over the prompt and the tokens before the last (no cache): float64 [steps, vocab]."""
    m = copy.deepcopy(model).double()
    ids = torch.cat([prompt, torch.tensor(tokens[:-1], dtype=torch.int64).unsqueeze(0)], dim=1)
    n = ids.shape[1]
    logits = m(ids, torch.ones(1, n, dtype=torch.int64), torch.arange(n).unsqueeze(0),
               *(p.double() for p in m.empty_past(1)))[0]
    return logits[0, prompt.shape[1] - 1:].numpy()


def save_weights(model, directory):
    """The model's configuration (config.json) and its parameters, one .npy file each."""
    os.makedirs(directory, exist_ok=True)
    config = {"n_layer": model.layers, "n_embd": model.d, "n_head": model.heads, "vocab_size": model.vocab,
              "n_positions": model.context, "layer_norm_epsilon": model.ln_f.eps}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    for name, tensor in model.state_dict().items():
        np.save(os.path.join(directory, name + ".npy"), tensor.numpy())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--size", choices=sorted(SIZES), default="test")
    parser.add_argument("--reference", help="write PyTorch's greedy decoding to STEM.*.npy")
    # Lengths at which no step's two best logits of the test model lie closer than 8e-3: a
    # difference in the last bits cannot flip a token.
    parser.add_argument("--prompt-lengths", default="2,5,13,31")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--weights", help="write config.json and one NAME.npy per parameter to this directory")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    model = build(args.size)
    export(model, args.out)
    if args.weights:
        save_weights(model, args.weights)
    if args.reference:
        for length in (int(s) for s in args.prompt_lengths.split(",")):
            gen = torch.Generator().manual_seed(1)
            prompt = torch.randint(0, model.vocab, (1, length), generator=gen)
            tokens, logits = greedy(model, prompt, args.steps)
            np.save(f"{args.reference}.prompt_{length}.npy", prompt.numpy())
            np.save(f"{args.reference}.tokens_{length}.npy", tokens)
            np.save(f"{args.reference}.logits_{length}.npy", logits)
            np.save(f"{args.reference}.logits64_{length}.npy", exact_logits(model, prompt, tokens))


if __name__ == "__main__":
    main()
