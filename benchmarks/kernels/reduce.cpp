// SPDX-License-Identifier: Apache-2.0
// Softmax rows and reductions: kernels::softmax on 1024 x 1024 (issue 5's target: under 0.45 ms)
// beside a plain scalar three-pass softmax with std::exp, and sums over the last and the first
// axis in GB/s of input read, and global average pools (the mean of each [H, W] plane) on one
// and two threads (the planes are shared out from 2^18 elements on).
#include <kiln/kernels/pool2d.hpp>
#include <kiln/kernels/reduce.hpp>

#include <benchmark/benchmark.h>

#include <cmath>

using namespace kiln;
using kiln::runtime::tensor;

namespace {

tensor ramp(std::int64_t rows, std::int64_t cols) {
  tensor t = tensor::empty({rows, cols}, dtype::float32);
  for (std::int64_t i = 0; i < rows * cols; ++i) t.data<float>()[i] = float(i % 977) * 0.01f - 4.f;
  return t;
}

__attribute__((noinline)) void plain_softmax(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * cols;
    float* q = y + r * cols;
    float m = p[0];
    for (std::int64_t j = 1; j < cols; ++j) m = std::max(m, p[j]);
    float s = 0;
    for (std::int64_t j = 0; j < cols; ++j) s += q[j] = std::exp(p[j] - m);
    const float inv = 1 / s;
    for (std::int64_t j = 0; j < cols; ++j) q[j] *= inv;
  }
}

void softmax_plain(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  const tensor x = ramp(n, n), y = tensor::zeros({n, n}, dtype::float32);
  for (auto _ : s) {
    plain_softmax(x.data<float>(), y.data<float>(), n, n);
    benchmark::ClobberMemory();
  }
  s.SetItemsProcessed(s.iterations() * n * n);
}
void softmax_kiln(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  const tensor x = ramp(n, n), y = tensor::zeros({n, n}, dtype::float32);
  for (auto _ : s) {
    kernels::softmax(x, -1, y);
    benchmark::ClobberMemory();
  }
  s.SetItemsProcessed(s.iterations() * n * n);
}
void sum_axis(benchmark::State& s) {
  const std::int64_t n = 1024, axis = s.range(0);
  const tensor x = ramp(n, n), y = tensor::zeros({n}, dtype::float32);
  const std::int64_t axes[] = {axis};
  for (auto _ : s) {
    kernels::sum(x, axes, false, y);
    benchmark::ClobberMemory();
  }
  s.SetBytesProcessed(s.iterations() * n * n * 4);
}

void global_avg_pool(benchmark::State& s) {
  const std::int64_t c = s.range(0), h = s.range(1);
  kernels::set_num_threads(std::size_t(s.range(2)));
  const tensor x = ramp(c, h * h).view({1, c, h, h}), y = tensor::zeros({1, c, 1, 1}, dtype::float32);
  for (auto _ : s) {
    kernels::global_avg_pool2d(x, y);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  s.SetBytesProcessed(s.iterations() * c * h * h * 4);
}

}  // namespace

BENCHMARK(softmax_plain)->Name("softmax/plain")->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(softmax_kiln)->Name("softmax/kiln")->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(sum_axis)->Name("sum_1024x1024/axis")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
// EfficientNet-B0's squeeze-and-excitation inputs 32 x 112², 144 x 56² and 240 x 28² (below the
// threshold), and 384 x 32².
BENCHMARK(global_avg_pool)->Name("global_avg_pool2d/kiln")->ArgsProduct({{32}, {112}, {1, 2}})->ArgsProduct({{144}, {56}, {1, 2}})
    ->ArgsProduct({{240}, {28}, {1, 2}})->ArgsProduct({{384}, {32}, {1, 2}})->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
