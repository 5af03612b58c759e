// SPDX-License-Identifier: Apache-2.0
// Data movement: kernels::copy of a contiguous matrix and kernels::permute_dims of a matrix
// (a transposition, through 64-byte tiles) beside memcpy of the same bytes (the ceiling) and a
// plain transposing loop, at 256², 1024² and 4096² floats (256 KB: in L2; 4 MB; 64 MB: memory).
// Bytes counted: read and written, 8 per element.
#include <kiln/kernels/transform.hpp>

#include <benchmark/benchmark.h>

#include <cstring>

using namespace kiln;
using kiln::runtime::tensor;

namespace {

tensor ramp(std::int64_t n) {
  tensor t = tensor::empty({n, n}, dtype::float32);
  for (std::int64_t i = 0; i < n * n; ++i) t.data<float>()[i] = float(i % 977);
  return t;
}

void set_bytes(benchmark::State& s, std::int64_t n) { s.SetBytesProcessed(s.iterations() * n * n * 8); }

void copy_memcpy(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  const tensor x = ramp(n), y = tensor::zeros({n, n}, dtype::float32);
  for (auto _ : s) {
    std::memcpy(y.data(), x.data(), std::size_t(n * n) * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_bytes(s, n);
}
void copy_kiln(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  const tensor x = ramp(n), y = tensor::zeros({n, n}, dtype::float32);
  for (auto _ : s) {
    kernels::copy(x, y);
    benchmark::ClobberMemory();
  }
  set_bytes(s, n);
}
__attribute__((noinline)) void plain_transpose(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) y[j * n + i] = x[i * n + j];
}
void transpose_plain(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  const tensor x = ramp(n), y = tensor::zeros({n, n}, dtype::float32);
  for (auto _ : s) {
    plain_transpose(x.data<float>(), y.data<float>(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(s, n);
}
void transpose_kiln(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  const tensor x = ramp(n), y = tensor::zeros({n, n}, dtype::float32);
  for (auto _ : s) {
    kernels::permute_dims(x, {1, 0}, y);
    benchmark::ClobberMemory();
  }
  set_bytes(s, n);
}

}  // namespace

BENCHMARK(copy_memcpy)->Name("copy/memcpy")->Arg(256)->Arg(1024)->Arg(4096);
BENCHMARK(copy_kiln)->Name("copy/kiln")->Arg(256)->Arg(1024)->Arg(4096);
BENCHMARK(transpose_plain)->Name("transpose/plain")->Arg(256)->Arg(1024)->Arg(4096);
BENCHMARK(transpose_kiln)->Name("transpose/kiln")->Arg(256)->Arg(1024)->Arg(4096);
BENCHMARK_MAIN();
