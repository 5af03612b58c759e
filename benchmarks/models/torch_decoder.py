#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's side of the decoder comparison (benchmarks/models/decoder_compare): scripts/gpt2.py's
GPT-2 in eager mode with its own cache (the same weights as the ONNX file: the same seed), one
forward call at each case's shapes, under torch.inference_mode.

    torch_decoder.py SIZE THREADS prefill:N|decode:C ...

Prints one JSON line per case ({"engine": "pytorch", "version", "case", "threads", "median_ms",
"min_ms"}) and one with the peak resident memory ("peak_mib"). Inputs and protocol as in
kiln_decoder.cpp, except that a case whose one call takes more than a second is repeated 3 times,
not 7 (Debian's PyTorch on the reference BLAS takes tens of seconds for a long prefill).
"""
import json
import re
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gpt2  # noqa: E402


def main():
    if len(sys.argv) < 4:
        raise SystemExit("usage: torch_decoder.py SIZE THREADS prefill:N|decode:C ...")
    size, threads, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    torch.set_num_threads(threads)
    model = gpt2.build(size)
    hd = model.d // model.heads
    gen = torch.Generator().manual_seed(1)
    for case in cases:
        m = re.fullmatch(r"(prefill|decode):([0-9]+)(?:x([1-9][0-9]*))?", case)
        if not m:
            raise SystemExit(f"torch_decoder.py: a case is prefill:N or decode:C, with xB for a batch of B, not '{case}'")
        kind, n, batch = m.group(1), int(m.group(2)), int(m.group(3) or 1)
        past_len, t = (0, n) if kind == "prefill" else (n, 1)
        ids = torch.randint(0, 1000, (batch, t), generator=gen)
        mask = torch.ones(batch, past_len + t, dtype=torch.int64)
        pos = torch.arange(past_len, past_len + t).unsqueeze(0).expand(batch, t)
        past = [torch.rand(batch, model.heads, past_len, hd, generator=gen) * 2 - 1 for _ in range(2 * model.layers)]
        with torch.inference_mode():
            for _ in range(2):
                model(ids, mask, pos, *past)
            start = time.perf_counter()
            model(ids, mask, pos, *past)
            one = time.perf_counter() - start
            runs = max(1, int(0.05 / max(1e-6, one)) + 1)
            means = []
            # 7 repetitions, 3 when one call takes more than a second (a prefill on the reference BLAS)
            for _ in range(7 if one < 1 else 3):
                start = time.perf_counter()
                for _ in range(runs):
                    model(ids, mask, pos, *past)
                means.append((time.perf_counter() - start) / runs * 1e3)
        means.sort()
        print(json.dumps({"engine": "pytorch", "version": torch.__version__, "case": case, "threads": threads,
                          "median_ms": means[len(means) // 2], "min_ms": means[0]}), flush=True)
    print(json.dumps({"engine": "pytorch", "peak_mib": peak_mib()}))


def peak_mib():
    """The process's peak resident memory since it began: VmHWM, the high-water mark of its own
    address space. (getrusage's ru_maxrss is not: Linux carries it over from the parent across
    fork and exec, so a child of a large process reports the parent's size.)"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise SystemExit("torch_decoder.py: /proc/self/status has no VmHWM line")


if __name__ == "__main__":
    main()
