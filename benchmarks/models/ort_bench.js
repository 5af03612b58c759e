// SPDX-License-Identifier: Apache-2.0
// ONNX Runtime's side of the end-to-end comparison (benchmarks/models/compare): the CPU execution
// provider of the npm package onnxruntime-node, all graph optimizations, sequential execution.
//
//     node ort_bench.js MODEL.onnx INPUT.npy THREADS [OUTPUT.npy]
//
// Prints one JSON line: {"engine": "onnxruntime", "version", "threads", "median_us", "min_us", "cores"}.
// With OUTPUT.npy it also writes the model's first output there (float32), from the first run.
// Protocol as in kiln_models.cpp: 3 warm-up runs, then 15 repetitions of at least 50 ms each;
// median and minimum over repetitions of the mean time per run; cores = the process's CPU time over
// the wall time of the 15 repetitions.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.KILN_ORT_MODULE || 'onnxruntime-node');

function readNpy(file) {  // float32, C order: what scripts/export_models.py writes
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not an .npy file`);
  const major = b[6];
  const headerLen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.toString('latin1', start, start + headerLen);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header)) throw new Error(`${file}: expected little-endian float32 in C order`);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map(Number);
  const bytes = b.subarray(start + headerLen);
  const data = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  return new ort.Tensor('float32', data, shape);
}

function writeNpy(file, tensor) {  // float32, C order, format 1.0
  if (tensor.type !== 'float32') throw new Error(`the first output is ${tensor.type}, not float32`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';  // the data 64-byte aligned
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const [model, input, threads, output] = process.argv.slice(2);
  if (!model || !input || !threads) throw new Error('usage: node ort_bench.js MODEL.onnx INPUT.npy THREADS [OUTPUT.npy]');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const feeds = { [session.inputNames[0]]: readNpy(input) };
  const first = await session.run(feeds);
  if (output) writeNpy(output, first[session.outputNames[0]]);
  for (let i = 0; i < 2; ++i) await session.run(feeds);
  const now = () => Number(process.hrtime.bigint()) / 1e3;
  let t = now();
  await session.run(feeds);
  const runs = Math.max(1, Math.ceil(50e3 / Math.max(1, now() - t)));
  const means = [];
  const wall = now(), cpu = process.cpuUsage();
  for (let r = 0; r < 15; ++r) {
    t = now();
    for (let i = 0; i < runs; ++i) await session.run(feeds);
    means.push((now() - t) / runs);
  }
  const used = process.cpuUsage(cpu), cores = (used.user + used.system) / (now() - wall);
  means.sort((a, b) => a - b);
  let dir = path.dirname(require.resolve(process.env.KILN_ORT_MODULE || 'onnxruntime-node'));
  while (!fs.existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  const version = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'))).version;
  console.log(JSON.stringify({ engine: 'onnxruntime', version, threads: Number(threads), median_us: means[7], min_us: means[0], cores }));
}

main().catch((e) => { console.error(`ort_bench.js: ${e.message}`); process.exit(1); });
