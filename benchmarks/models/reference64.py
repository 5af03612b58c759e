#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The float64 reference of a model exported by scripts/export_models.py: the same PyTorch model
(rebuilt from the same seed), converted to double, on the exported input.

    reference64.py MODEL BATCH IMAGE_SIZE STEM

MODEL, BATCH and IMAGE_SIZE as export_models.py took them; STEM the path the export wrote
(STEM.input.npy, STEM.output.npy). Writes STEM.reference64.npy (float64). It first runs the rebuilt
model in float32 and fails unless that gives the exported output: a reference of other weights
would measure nothing. Run with /usr/bin/python3 (python3-torch, python3-torchvision).
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import export_models  # noqa: E402


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    name, batch, image, stem = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(1)
    model, _ = export_models.build(name, batch, image)
    x = np.load(stem + ".input.npy")
    exported = np.load(stem + ".output.npy")
    with torch.no_grad():
        y32 = model(torch.from_numpy(x)).numpy()
        if y32.shape != exported.shape or not np.allclose(y32, exported, rtol=1e-5, atol=1e-5 * float(np.abs(exported).max())):
            sys.exit(f"reference64.py: {name} rebuilt does not give {stem}.output.npy (largest difference "
                     f"{np.abs(y32.astype(np.float64) - exported).max() if y32.shape == exported.shape else 'shape ' + str(y32.shape)}): "
                     "export it again")
        y64 = model.double()(torch.from_numpy(x.astype(np.float64))).numpy()
    np.save(stem + ".reference64.npy", y64)
    return 0


if __name__ == "__main__":
    sys.exit(main())
