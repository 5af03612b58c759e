// SPDX-License-Identifier: Apache-2.0
// ONNX Runtime's side of the decoder comparison (benchmarks/models/decoder_compare): the CPU
// execution provider of the npm package onnxruntime-node, all graph optimizations, sequential
// execution, one call of the decoder with past at each case's shapes.
//
//     node ort_decoder.js MODEL.onnx THREADS prefill:N|decode:C[xB] ...
//
// Prints one JSON line per case: {"engine": "onnxruntime", "version", "case", "threads",
// "median_ms", "min_ms"}, then one with the process's peak resident memory ("peak_mib").
// Inputs and protocol as in kiln_decoder.cpp: token ids below 1,000, a mask of ones, positions
// counting on from the cache, random cache contents; 2 warm-up calls, then 7 repetitions of at
// least 50 ms each, the median and minimum of the mean time per call.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.KILN_ORT_MODULE || 'onnxruntime-node');

function feeds(session, past, t, batch) {
  const out = {};
  let seed = 1;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296);
  for (const name of session.inputNames) {
    const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : undefined;
    if (name === 'input_ids') out[name] = new ort.Tensor('int64', BigInt64Array.from({ length: batch * t }, () => BigInt(Math.floor(rand() * 1000))), [batch, t]);
    else if (name === 'attention_mask') out[name] = new ort.Tensor('int64', new BigInt64Array(batch * (past + t)).fill(1n), [batch, past + t]);
    else if (name === 'position_ids') out[name] = new ort.Tensor('int64', BigInt64Array.from({ length: batch * t }, (_, i) => BigInt(past + (i % t))), [batch, t]);
    else if (name.startsWith('past')) {
      if (!meta || !meta.shape) throw new Error(`cannot read the shape of ${name}`);
      const shape = meta.shape.map((d, i) => (i === 0 ? batch : typeof d === 'number' ? d : past));
      const n = shape.reduce((a, b) => a * b, 1);
      out[name] = new ort.Tensor('float32', Float32Array.from({ length: n }, () => rand() * 2 - 1), shape);
    } else throw new Error(`input ${name} is not one of a decoder with past`);
  }
  return out;
}

async function main() {
  const [model, threads, ...cases] = process.argv.slice(2);
  if (!model || !threads || cases.length === 0) throw new Error('usage: node ort_decoder.js MODEL.onnx THREADS prefill:N|decode:C ...');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  let dir = path.dirname(require.resolve(process.env.KILN_ORT_MODULE || 'onnxruntime-node'));
  while (!fs.existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  const version = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'))).version;
  const now = () => Number(process.hrtime.bigint()) / 1e6;
  for (const c of cases) {
    const m = /^(prefill|decode):([0-9]+)(?:x([1-9][0-9]*))?$/.exec(c);
    if (!m) throw new Error(`a case is prefill:N or decode:C, with xB for a batch of B, not '${c}'`);
    const [, kind, n, b] = m;
    const past = kind === 'decode' ? Number(n) : 0, t = kind === 'prefill' ? Number(n) : 1, batch = b ? Number(b) : 1;
    const f = feeds(session, past, t, batch);
    for (let i = 0; i < 2; ++i) await session.run(f);
    let start = now();
    await session.run(f);
    const runs = Math.max(1, Math.ceil(50 / Math.max(1e-3, now() - start)));
    const means = [];
    for (let r = 0; r < 7; ++r) {
      start = now();
      for (let i = 0; i < runs; ++i) await session.run(f);
      means.push((now() - start) / runs);
    }
    means.sort((a, b) => a - b);
    console.log(JSON.stringify({ engine: 'onnxruntime', version, case: c, threads: Number(threads), median_ms: means[3], min_ms: means[0] }));
  }
  // VmHWM, the high-water mark of this process's own address space: resourceUsage().maxRSS is
  // getrusage's, which Linux carries over from the parent across fork and exec.
  const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  if (!hwm) throw new Error('/proc/self/status has no VmHWM line');
  console.log(JSON.stringify({ engine: 'onnxruntime', peak_mib: Number(hwm[1]) / 1024 }));
}

main().catch((e) => { console.error(`ort_decoder.js: ${e.message}`); process.exit(1); });
