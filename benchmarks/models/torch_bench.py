#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's side of the end-to-end comparison (benchmarks/models/compare): the eager model that
scripts/export_models.py exported, rebuilt with the same seed, under torch.inference_mode().

    torch_bench.py NAME BATCH IMAGE_SIZE THREADS INPUT.npy

Prints one JSON line: {"engine": "pytorch", "version", "threads", "median_us", "min_us"}. Protocol
as in kiln_models.cpp: 3 warm-up runs, then 15 repetitions of at least 50 ms each; median and
minimum over repetitions of the mean time per run.
"""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import export_models  # noqa: E402


def main():
    name, batch, image_size, threads, input_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    torch.set_num_threads(threads)
    model, _ = export_models.build(name, batch, image_size)
    x = torch.from_numpy(np.load(input_path))
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        t = time.perf_counter()
        model(x)
        runs = max(1, int(0.05 / max(1e-7, time.perf_counter() - t)) + 1)
        means = []
        for _ in range(15):
            t = time.perf_counter()
            for _ in range(runs):
                model(x)
            means.append((time.perf_counter() - t) / runs * 1e6)
    means.sort()
    print(json.dumps({"engine": "pytorch", "version": torch.__version__, "threads": threads, "median_us": means[7], "min_us": means[0]}))


if __name__ == "__main__":
    main()
