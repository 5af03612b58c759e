// SPDX-License-Identifier: Apache-2.0
// Elementwise kernels against the machine: GB/s of kernels::add beside a plain C++ loop doing the
// same add (the bandwidth ceiling of each cache level, measured in the same run), and element
// throughput of exp and tanh beside scalar std:: loops.
//
//   add/plain/N    c[i] = a[i] + b[i], compiled with the same flags (-O3 -march=native)
//   add/kiln/N     kernels::add(a, b, c): the checks, the loop plan and the xsimd loop
//   exp/std/N      c[i] = std::exp(a[i]);  exp/kiln/N  kernels::exp(a, c)   (same for tanh)
#include <kiln/kernels/elementwise.hpp>

#include <benchmark/benchmark.h>

#include <cmath>

using namespace kiln;
using kiln::runtime::tensor;

namespace {

struct operands {
  tensor a, b, c;
  explicit operands(std::int64_t n, float lo = -1, float hi = 1)
      : a(tensor::empty({n}, dtype::float32)), b(tensor::empty({n}, dtype::float32)), c(tensor::zeros({n}, dtype::float32)) {
    float* pa = a.data<float>();
    float* pb = b.data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      pa[i] = lo + (hi - lo) * float(i % 1000) / 1000.f;
      pb[i] = float(i % 7) * 0.25f;
    }
  }
};

void bytes(benchmark::State& s, std::int64_t n, int arrays) {
  s.SetBytesProcessed(s.iterations() * n * std::int64_t(sizeof(float)) * arrays);
}

__attribute__((noinline)) void plain_add(const float* a, const float* b, float* c, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

void add_plain(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  operands o(n);
  for (auto _ : s) {
    plain_add(o.a.data<float>(), o.b.data<float>(), o.c.data<float>(), n);
    benchmark::ClobberMemory();
  }
  bytes(s, n, 3);
}
void add_kiln(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  operands o(n);
  for (auto _ : s) {
    kernels::add(o.a, o.b, o.c);
    benchmark::ClobberMemory();
  }
  bytes(s, n, 3);
}

template <float (*F)(float)>
__attribute__((noinline)) void plain_map(const float* a, float* c, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) c[i] = F(a[i]);
}
float std_exp(float x) { return std::exp(x); }
float std_tanh(float x) { return std::tanh(x); }

void exp_std(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  operands o(n, -10, 10);
  for (auto _ : s) {
    plain_map<std_exp>(o.a.data<float>(), o.c.data<float>(), n);
    benchmark::ClobberMemory();
  }
  s.SetItemsProcessed(s.iterations() * n);
}
void exp_kiln(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  operands o(n, -10, 10);
  for (auto _ : s) {
    kernels::exp(o.a, o.c);
    benchmark::ClobberMemory();
  }
  s.SetItemsProcessed(s.iterations() * n);
}
void tanh_std(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  operands o(n, -10, 10);
  for (auto _ : s) {
    plain_map<std_tanh>(o.a.data<float>(), o.c.data<float>(), n);
    benchmark::ClobberMemory();
  }
  s.SetItemsProcessed(s.iterations() * n);
}
void tanh_kiln(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  operands o(n, -10, 10);
  for (auto _ : s) {
    kernels::tanh(o.a, o.c);
    benchmark::ClobberMemory();
  }
  s.SetItemsProcessed(s.iterations() * n);
}

// 1K .. 16M floats: 12 KB (L1) to 192 MB (memory) for the three arrays.
void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n = 1 << 10; n <= 1 << 24; n <<= 2) b->Arg(n);
}

}  // namespace

BENCHMARK(add_plain)->Name("add/plain")->Apply(sizes);
BENCHMARK(add_kiln)->Name("add/kiln")->Apply(sizes);
BENCHMARK(exp_std)->Name("exp/std")->Arg(1 << 12)->Arg(1 << 20);
BENCHMARK(exp_kiln)->Name("exp/kiln")->Arg(1 << 12)->Arg(1 << 20);
BENCHMARK(tanh_std)->Name("tanh/std")->Arg(1 << 12)->Arg(1 << 20);
BENCHMARK(tanh_kiln)->Name("tanh/kiln")->Arg(1 << 12)->Arg(1 << 20);

BENCHMARK_MAIN();
