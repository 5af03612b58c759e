// SPDX-License-Identifier: Apache-2.0
// Elementwise kernels against the machine: GB/s of kernels::add beside a plain C++ loop doing the
// same add (the bandwidth ceiling of each cache level, measured in the same run), and element
// throughput of exp and tanh beside scalar std:: loops.
//
//   add/plain/N    c[i] = a[i] + b[i], compiled with the same flags (-O3 -march=native)
//   add/kiln/N     kernels::add(a, b, c): the checks, the loop plan and the xsimd loop
//   exp/std/N      c[i] = std::exp(a[i]);  exp/kiln/N  kernels::exp(a, c)   (same for tanh)
//   chain/...      y = relu(a * b + c) * 0.5, four operators over three inputs: a plain fused loop
//                  (the ceiling: one pass, 16 bytes per element), kiln's compile-time fused
//                  kernel, the run-time fused_expr, and four separate kernel calls (four passes)
//   se_scale/kiln/C/H/T   kernels::multiply of a [1, C, H, H] activation by a [1, C, 1, 1] scale
//                  (a squeeze-and-excitation block's last step) on T threads: the elements are
//                  shared out from min_parallel_elements (2^17) on
#include <kiln/kernels/fused.hpp>

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

struct chain_operands {
  tensor a, b, c, y, t1, t2, t3, half;
  explicit chain_operands(std::int64_t n)
      : a(tensor::empty({n}, dtype::float32)), b(tensor::empty({n}, dtype::float32)), c(tensor::empty({n}, dtype::float32)),
        y(tensor::zeros({n}, dtype::float32)), t1(tensor::zeros({n}, dtype::float32)), t2(tensor::zeros({n}, dtype::float32)),
        t3(tensor::zeros({n}, dtype::float32)), half(tensor::from_values<float>({}, {0.5f})) {
    for (std::int64_t i = 0; i < n; ++i) {
      a.data<float>()[i] = float(i % 100) * 0.01f - 0.5f;
      b.data<float>()[i] = float(i % 7) * 0.25f;
      c.data<float>()[i] = float(i % 13) * -0.1f;
    }
  }
};

__attribute__((noinline)) void plain_chain(const float* a, const float* b, const float* c, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = a[i] * b[i] + c[i];
    y[i] = (v < 0 ? 0.f : v) * 0.5f;
  }
}
constexpr auto chain_expr = kernels::fx::relu(kernels::fx::arg<0>{} * kernels::fx::arg<1>{} + kernels::fx::arg<2>{}) * 0.5;

void chain_plain(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  chain_operands o(n);
  for (auto _ : s) {
    plain_chain(o.a.data<float>(), o.b.data<float>(), o.c.data<float>(), o.y.data<float>(), n);
    benchmark::ClobberMemory();
  }
  bytes(s, n, 4);
}
void chain_compile_time(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  chain_operands o(n);
  const tensor in[] = {o.a, o.b, o.c};
  for (auto _ : s) {
    kernels::run_fused(chain_expr, in, o.y);
    benchmark::ClobberMemory();
  }
  bytes(s, n, 4);
}
void chain_run_time(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  chain_operands o(n);
  const tensor in[] = {o.a, o.b, o.c};
  const kernels::fused_expr e = kernels::fused_expr::parse("(multiply (relu (add (multiply x0 x1) x2)) 0.5)");
  for (auto _ : s) {
    e.run(in, o.y);
    benchmark::ClobberMemory();
  }
  bytes(s, n, 4);
}
void chain_unfused(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  chain_operands o(n);
  for (auto _ : s) {
    kernels::multiply(o.a, o.b, o.t1);
    kernels::add(o.t1, o.c, o.t2);
    kernels::relu(o.t2, o.t3);
    kernels::multiply(o.t3, o.half, o.y);
    benchmark::ClobberMemory();
  }
  bytes(s, n, 4);  // the useful bytes: the same 16 per element as the fused forms
}

void se_scale(benchmark::State& s) {
  const std::int64_t c = s.range(0), h = s.range(1);
  kernels::set_num_threads(std::size_t(s.range(2)));
  const tensor x = tensor::empty({1, c, h, h}, dtype::float32), scale = tensor::empty({1, c, 1, 1}, dtype::float32),
               y = tensor::zeros({1, c, h, h}, dtype::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 977) * 0.01f - 4.f;
  for (std::int64_t i = 0; i < c; ++i) scale.data<float>()[i] = float(i % 7) * 0.25f;
  for (auto _ : s) {
    kernels::multiply(x, scale, y);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  bytes(s, c * h * h, 2);
}

// 1K .. 16M floats: 12 KB (L1) to 192 MB (memory) for the three arrays.
void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n = 1 << 10; n <= 1 << 24; n <<= 2) b->Arg(n);
}

}  // namespace

BENCHMARK(add_plain)->Name("add/plain")->Apply(sizes);
BENCHMARK(add_kiln)->Name("add/kiln")->Apply(sizes);
BENCHMARK(chain_plain)->Name("chain/plain")->Apply(sizes);
BENCHMARK(chain_compile_time)->Name("chain/kiln_compile_time")->Apply(sizes);
BENCHMARK(chain_run_time)->Name("chain/kiln_run_time")->Apply(sizes);
BENCHMARK(chain_unfused)->Name("chain/kiln_unfused")->Apply(sizes);
// EfficientNet-B0's 32 x 112² and 144 x 56² (above the threshold), 64 x 32² and 128 x 32²
// (either side of it).
BENCHMARK(se_scale)->Name("se_scale/kiln")->ArgsProduct({{32}, {112}, {1, 2}})->ArgsProduct({{144}, {56}, {1, 2}})
    ->ArgsProduct({{64, 128}, {32}, {1, 2}})->Unit(benchmark::kMicrosecond);
BENCHMARK(exp_std)->Name("exp/std")->Arg(1 << 12)->Arg(1 << 20);
BENCHMARK(exp_kiln)->Name("exp/kiln")->Arg(1 << 12)->Arg(1 << 20);
BENCHMARK(tanh_std)->Name("tanh/std")->Arg(1 << 12)->Arg(1 << 20);
BENCHMARK(tanh_kiln)->Name("tanh/kiln")->Arg(1 << 12)->Arg(1 << 20);

BENCHMARK_MAIN();
