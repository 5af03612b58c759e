#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's side of the end-to-end comparison (benchmarks/models/compare): the eager model that
scripts/export_models.py exported, rebuilt with the same seed, under torch.inference_mode().

    torch_bench.py NAME BATCH IMAGE_SIZE THREADS INPUT.npy

Prints one JSON line: {"engine": "pytorch", "version", "threads", "median_us", "min_us", "cores"}.
Protocol as in kiln_models.cpp: 3 warm-up runs, then 15 repetitions of at least 50 ms each; median
and minimum over repetitions of the mean time per run; cores = the process's CPU time over the wall
time of the 15 repetitions.

torch.set_num_threads sizes PyTorch's own (OpenMP) pool, but Debian's PyTorch calls the system
OpenBLAS for matrix products (nn.Linear, torch.matmul), and OpenBLAS starts as many threads as the
machine has CPUs unless OPENBLAS_NUM_THREADS says otherwise: "1 thread" would then run its GEMMs on
every core. OPENBLAS_NUM_THREADS is therefore set to THREADS before numpy or torch loads OpenBLAS.
"""
import json
import os
import sys
import time

if __name__ == "__main__" and len(sys.argv) > 4:
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[4]  # read once, when numpy or torch loads OpenBLAS
import numpy as np  # noqa: E402
import torch  # noqa: E402

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
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(15):
            t = time.perf_counter()
            for _ in range(runs):
                model(x)
            means.append((time.perf_counter() - t) / runs * 1e6)
        cores = (time.process_time() - cpu) / (time.perf_counter() - wall)
    means.sort()
    print(json.dumps({"engine": "pytorch", "version": torch.__version__, "threads": threads, "median_us": means[7], "min_us": means[0], "cores": cores}))


if __name__ == "__main__":
    main()
