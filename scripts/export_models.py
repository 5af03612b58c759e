#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Exports the end-to-end test models from PyTorch to ONNX, with an input and PyTorch's output.

    scripts/export_models.py OUT_DIR [--only NAME ...] [--batch N] [--image-size S] [--suffix TEXT]

For each model NAME it writes OUT_DIR/NAME.onnx, NAME.input.npy and NAME.output.npy (float32);
with --suffix, OUT_DIR/NAME<TEXT>.onnx and so on (the benchmarks keep several batch sizes apart).
Weights are random (seeded): nothing is downloaded. Needs Debian's python3-torch,
python3-torchvision and python3-onnx (it is run with /usr/bin/python3, whose packages those are).

Models:
  mlp        784-512-512-10 with ReLU
  resnet18   torchvision's ResNet-18 (BatchNorm in eval mode), on a 64x64 image by default
             (--image-size 224 for the ImageNet size the benchmarks use)
  encoder    nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024), sequence 128
  gpt_block  a GPT-2 style decoder block: pre-LayerNorm, causal self-attention, GELU MLP
  recurrent  a sequence classifier: a 2-layer bidirectional LSTM (hidden 48), a GRU (hidden 32)
             and a linear layer on the last step; 20 steps of 32 features
  encoder_dynamic, gpt_block_dynamic
             the encoder layer and the GPT block exported with a dynamic batch and sequence
             (PyTorch's dynamic_axes), with a second input and output at batch 2, sequence 50
             (NAME.input2.npy, NAME.output2.npy)
  squeezenet1_1, densenet121
             torchvision's, on a 64x64 image: their concatenations (fire modules, dense blocks)
             run in place, written by the layers before them
  any other name of a torchvision classification model (mobilenet_v2, efficientnet_b0,
             densenet121, vit_b_16, ...): that model with random weights, on an image of
             --image-size (vit_* models need 224)
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
from torch import nn


class GptBlock(nn.Module):
    def __init__(self, d=256, heads=4, seq=64):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(d, dim=2)
        hd = d // self.heads
        q = q.reshape(b, t, self.heads, hd).transpose(1, 2)
        k = k.reshape(b, t, self.heads, hd).transpose(1, 2)
        v = v.reshape(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd)) + self.mask[:t, :t]
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class Recurrent(nn.Module):
    def __init__(self, features=32, classes=10):
        super().__init__()
        self.lstm = nn.LSTM(features, 48, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(96, 32, batch_first=True)
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.head(y[:, -1])


def build(name, batch, image_size):
    torch.manual_seed(0)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        x = torch.randn(batch, 784)
    elif name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18()
        x = torch.randn(batch, 3, image_size, image_size)
    elif name == "encoder":
        model = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True)
        x = torch.randn(batch, 128, 256)
    elif name == "gpt_block":
        model = GptBlock()
        x = torch.randn(batch, 64, 256)
    elif name == "recurrent":
        model = Recurrent()
        x = torch.randn(batch, 20, 32)
    elif name in ("encoder_dynamic", "gpt_block_dynamic"):
        model, x = build(name[: -len("_dynamic")], batch, image_size)
    else:
        import torchvision

        if hasattr(torchvision.models, "list_models"):  # the classification models, not detection's or video's
            known = name in torchvision.models.list_models(module=torchvision.models)
        else:
            known = callable(getattr(torchvision.models, name, None)) and not name.startswith("_") and name.islower()
        if not known:
            raise SystemExit(f"export_models.py: unknown model '{name}' (neither one of this script's nor a torchvision classification model)")
        model = getattr(torchvision.models, name)()
        # torchvision initializes some classifiers to zero (ViT's head): the output would be
        # exactly 0 whatever was computed before it, and a comparison of outputs would test
        # nothing. Such weights are drawn at random instead.
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2 and not p.any():
                    p.normal_(0.0, 0.02)
        x = torch.randn(batch, 3, image_size, image_size)
    return model.eval(), x


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--only", nargs="*", default=["mlp", "resnet18", "encoder", "gpt_block", "recurrent", "encoder_dynamic", "gpt_block_dynamic",
                                                  "squeezenet1_1", "densenet121"])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--suffix", default="")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    for name in args.only:
        model, x = build(name, args.batch, args.image_size)
        with torch.no_grad():
            y = model(x)
        # Exported with gradients enabled: without them nn.TransformerEncoderLayer takes its fused
        # fast path (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
        stem = os.path.join(args.out_dir, name + args.suffix)
        path = stem + ".onnx"
        dynamic = {"input": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}} if name.endswith("_dynamic") else None
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"], opset_version=17,
                          do_constant_folding=True, dynamic_axes=dynamic)
        np.save(stem + ".input.npy", x.numpy().astype(np.float32))
        np.save(stem + ".output.npy", y.numpy().astype(np.float32))
        if dynamic:  # the same model at another batch and sequence length
            torch.manual_seed(1)
            x2 = torch.randn(2, 50, x.shape[2])
            with torch.no_grad():
                y2 = model(x2)
            np.save(stem + ".input2.npy", x2.numpy().astype(np.float32))
            np.save(stem + ".output2.npy", y2.numpy().astype(np.float32))
        print(f"export_models.py: {path} ({os.path.getsize(path) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
