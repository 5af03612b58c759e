#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs ONNX RNN, GRU and LSTM models through kiln-run and through ONNX Runtime, and compares.

    scripts/check_recurrent_against_ort.py --kiln-run build/tools/kiln-run [--ort build/ort] [--work DIR]

Each case is one recurrent node built with onnx.helper over random data: every direction, with
and without sequence_lens (an empty sequence among them), initial states, peepholes, clip, every
activation function with its alphas and betas, GRU's linear_before_reset, LSTM's input_forget.
Outputs must agree to 1e-4. Cases ONNX Runtime refuses must be refused by kiln too. ONNX Runtime
is the npm package onnxruntime-node (benchmarks/models/compare --install-ort installs it in
build/ort); it is a check for developers, not part of the test suite. Exits 1 on any
difference, and when a tool fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

ORT_RUNNER = r"""
const [ortDir, model, specFile] = process.argv.slice(2);
const ort = require(ortDir + '/node_modules/onnxruntime-node');
const fs = require('fs');
(async () => {
  const spec = JSON.parse(fs.readFileSync(specFile));
  let session;
  try { session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1}); }
  catch (e) { console.log('REFUSED ' + String(e.message).split('\n')[0]); return; }
  const feeds = {};
  for (const [name, v] of Object.entries(spec.inputs)) {
    const buf = fs.readFileSync(v.file);
    const Array_ = v.type === 'int32' ? Int32Array : Float32Array;
    feeds[name] = new ort.Tensor(v.type, new Array_(buf.buffer, buf.byteOffset, buf.length / 4), v.dims);
  }
  const out = await session.run(feeds);
  for (const name of spec.outputs) fs.writeFileSync(specFile + '.' + name + '.bin', Buffer.from(out[name].data.buffer));
  console.log('RAN');
})().catch(e => { console.error(e); process.exit(1); });
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--ort", default=os.path.join(os.path.dirname(__file__), "..", "build", "ort"))
    ap.add_argument("--work", default=None, help="directory for the models and data (default: a temporary one)")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.ort, "node_modules", "onnxruntime-node")):
        sys.exit(f"check_recurrent_against_ort: onnxruntime-node is not in '{args.ort}' (benchmarks/models/compare --install-ort)")
    work = args.work or tempfile.mkdtemp(prefix="kiln-recurrent-")
    os.makedirs(work, exist_ok=True)
    runner = os.path.join(work, "ort_runner.js")
    with open(runner, "w") as f:
        f.write(ORT_RUNNER)
    rng = np.random.default_rng(1)
    failures = []

    def case(name, op, seq, batch, inp, hidden, attrs, bias=True, lens=None, initial=False, peepholes=False):
        gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
        dirs = 2 if attrs.get("direction") == "bidirectional" else 1
        vals = {"X": rng.standard_normal([seq, batch, inp]).astype(np.float32),
                "W": (rng.standard_normal([dirs, gates * hidden, inp]) * 0.5).astype(np.float32),
                "R": (rng.standard_normal([dirs, gates * hidden, hidden]) * 0.5).astype(np.float32)}
        names = ["X", "W", "R"]
        state = [dirs, batch, hidden]

        def optional(given, key, value):
            names.append(key if given else "")
            if given:
                vals[key] = value

        optional(bias, "B", rng.standard_normal([dirs, 2 * gates * hidden]).astype(np.float32))
        optional(lens is not None, "L", np.array(lens or [], np.int32))
        optional(initial, "H0", rng.standard_normal(state).astype(np.float32))
        if op == "LSTM":
            optional(initial, "C0", rng.standard_normal(state).astype(np.float32))
            optional(peepholes, "P", rng.standard_normal([dirs, 3 * hidden]).astype(np.float32))
        while names[-1] == "":
            names.pop()
        outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
        out_shapes = {"Y": [seq, dirs, batch, hidden], "Y_h": state, "Y_c": state}
        node = helper.make_node(op, names, outs, hidden_size=hidden, **attrs)
        inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "L" else TensorProto.FLOAT, list(vals[n].shape)) for n in names if n]
        outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, out_shapes[o]) for o in outs]
        model = helper.make_model(helper.make_graph([node], name, inputs, outputs), opset_imports=[helper.make_opsetid("", 14)])
        model.ir_version = 8
        stem = os.path.join(work, name)
        onnx.save(model, stem + ".onnx")
        spec = {"inputs": {}, "outputs": outs}
        kiln_args = []
        for n in names:
            if n:
                vals[n].tofile(f"{stem}.{n}.bin")
                np.save(f"{stem}.{n}.npy", vals[n])
                spec["inputs"][n] = {"file": f"{stem}.{n}.bin", "dims": list(vals[n].shape), "type": "int32" if n == "L" else "float32"}
                kiln_args += ["--input", f"{n}={stem}.{n}.npy"]
        with open(stem + ".json", "w") as f:
            json.dump(spec, f)
        ort = subprocess.run(["node", runner, os.path.abspath(args.ort), stem + ".onnx", stem + ".json"], capture_output=True, text=True)
        if ort.returncode != 0:
            sys.exit(f"check_recurrent_against_ort: ONNX Runtime failed on {name}:\n{ort.stderr}")
        kiln = subprocess.run([args.kiln_run, stem + ".onnx", *kiln_args, "--output", stem + ".kiln.npy"], capture_output=True, text=True)
        if ort.stdout.startswith("REFUSED"):
            ok = kiln.returncode != 0
            print(f"{name:24s} {'ok ' if ok else 'BAD'} ONNX Runtime refuses it; kiln {'too' if ok else 'runs it'}")
        elif kiln.returncode != 0:
            ok = False
            print(f"{name:24s} BAD kiln fails: {kiln.stderr.strip()}")
        else:
            worst = 0.0
            for i, o in enumerate(outs):
                got = np.load(f"{stem}.kiln.{i}.npy")
                want = np.fromfile(f"{stem}.json.{o}.bin", np.float32)
                worst = max(worst, float(np.abs(got.ravel() - want).max()) if got.size == want.size else float("inf"))
            ok = worst < 1e-4
            print(f"{name:24s} {'ok ' if ok else 'BAD'} largest difference {worst:.1e}")
        if not ok:
            failures.append(name)

    for op in ["RNN", "GRU", "LSTM"]:
        case(f"{op}_forward", op, 5, 3, 4, 6, {})
        case(f"{op}_reverse", op, 5, 3, 4, 6, {"direction": "reverse"}, initial=True)
        case(f"{op}_bidirectional", op, 5, 3, 4, 6, {"direction": "bidirectional"}, initial=True, peepholes=True)
        case(f"{op}_bi_lengths", op, 5, 3, 4, 6, {"direction": "bidirectional"}, lens=[5, 2, 3], initial=True, peepholes=True)
        case(f"{op}_reverse_lengths", op, 5, 3, 4, 6, {"direction": "reverse"}, lens=[1, 5, 3], initial=True)
        case(f"{op}_empty_sequence", op, 4, 3, 3, 5, {"direction": "bidirectional"}, lens=[0, 4, 2], initial=True)
        case(f"{op}_clip", op, 4, 2, 3, 5, {"clip": 0.7})
        case(f"{op}_no_bias", op, 4, 2, 3, 5, {}, bias=False)
    activations = {"RNN": (["LeakyRelu", "HardSigmoid"], [0.2, 0.3], [0.6]),
                   "GRU": (["HardSigmoid", "ScaledTanh", "Affine", "Elu"], [0.3, 0.8, 0.5, 1.5], [0.4, 1.2, 0.1]),
                   "LSTM": (["Sigmoid", "Softsign", "ThresholdedRelu", "Relu", "Softplus", "Tanh"], [0.1], [])}
    for op, (fns, alphas, betas) in activations.items():
        a = {"direction": "bidirectional", "activations": fns}
        if alphas:
            a["activation_alpha"] = alphas
        if betas:
            a["activation_beta"] = betas
        case(f"{op}_activations", op, 4, 2, 3, 5, a)
    case("RNN_two_defaults", "RNN", 4, 2, 3, 5, {"activations": ["Relu", "Tanh"]})
    case("RNN_one_for_two", "RNN", 4, 2, 3, 5, {"direction": "bidirectional", "activations": ["Relu"]})
    case("GRU_one_for_two", "GRU", 4, 2, 3, 5, {"direction": "bidirectional", "activations": ["Sigmoid", "Relu"]})
    case("LSTM_one_for_two", "LSTM", 4, 2, 3, 5, {"direction": "bidirectional", "activations": ["Sigmoid", "Relu", "Tanh"]})
    case("GRU_linear_before_reset", "GRU", 5, 3, 4, 6, {"linear_before_reset": 1}, initial=True)
    case("GRU_lbr_bi_lengths", "GRU", 5, 3, 4, 6, {"linear_before_reset": 1, "direction": "bidirectional"}, lens=[4, 5, 1], initial=True)
    case("LSTM_input_forget", "LSTM", 5, 3, 4, 6, {"input_forget": 1}, initial=True, peepholes=True)
    if failures:
        print(f"check_recurrent_against_ort: {len(failures)} case(s) differ: {', '.join(failures)}")
        return 1
    print("check_recurrent_against_ort: every case agrees with ONNX Runtime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
