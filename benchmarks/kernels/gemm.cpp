// SPDX-License-Identifier: Apache-2.0
// sgemm in GFLOP/s: kernels::matmul (one thread, and two with set_num_threads) beside OpenBLAS
// (cblas_sgemm, one thread) and Eigen (one thread), square n = 64 .. 1024 and the transformer shape M=128, K=768, N=3072. The baselines
// are benchmark-only dependencies (libopenblas-dev, libeigen3-dev), compiled in when found. dense/*: dense-layer shapes
// with the weight packed on every call and packed once ahead (matmul_prepacked). fma_peak: the core's
// FMA peak, the ceiling the others are read against.
#include <kiln/kernels/linalg.hpp>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>

#include <utility>

#if KILN_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif
#if KILN_HAVE_EIGEN
#include <Eigen/Core>
#endif

using namespace kiln;
using kiln::runtime::tensor;

namespace {

struct problem {
  std::int64_t m, k, n;
  tensor a, b, c;
  problem(std::int64_t m_, std::int64_t k_, std::int64_t n_)
      : m(m_), k(k_), n(n_), a(tensor::empty({m_, k_}, dtype::float32)), b(tensor::empty({k_, n_}, dtype::float32)),
        c(tensor::zeros({m_, n_}, dtype::float32)) {
    for (std::int64_t i = 0; i < m * k; ++i) a.data<float>()[i] = float(i % 17) * 0.1f - 0.8f;
    for (std::int64_t i = 0; i < k * n; ++i) b.data<float>()[i] = float(i % 13) * 0.1f - 0.6f;
  }
};

void flops(benchmark::State& s, const problem& p) {
  s.counters["GFLOP/s"] = benchmark::Counter(double(s.iterations()) * 2.0 * double(p.m * p.k * p.n), benchmark::Counter::kIsRate,
                                             benchmark::Counter::kIs1000);
}

void kiln_sgemm(benchmark::State& s) {
  problem p(s.range(0), s.range(1), s.range(2));
  for (auto _ : s) {
    kernels::matmul(p.a, p.b, p.c);
    benchmark::ClobberMemory();
  }
  flops(s, p);
}
void kiln_sgemm_2threads(benchmark::State& s) {
  kernels::set_num_threads(2);
  problem p(s.range(0), s.range(1), s.range(2));
  for (auto _ : s) {
    kernels::matmul(p.a, p.b, p.c);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  flops(s, p);
}
/// The same product with B packed once, ahead of the loop (`prepack_weight`: what the compiler's
/// prepack_weights does for a constant weight), beside `kiln_sgemm` packing it on every call.
void kiln_sgemm_prepacked(benchmark::State& s) {
  problem p(s.range(0), s.range(1), s.range(2));
  const tensor packed = kernels::prepack_weight(p.b);
  const kernels::packed_weight_layout layout = kernels::native_weight_layout(dtype::float32, p.k, p.n);
  for (auto _ : s) {
    kernels::matmul_prepacked(p.a, packed, layout, p.c);
    benchmark::ClobberMemory();
  }
  flops(s, p);
}
#if KILN_HAVE_OPENBLAS
void openblas_sgemm(benchmark::State& s) {
  openblas_set_num_threads(1);
  problem p(s.range(0), s.range(1), s.range(2));
  for (auto _ : s) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(p.m), int(p.n), int(p.k), 1.f, p.a.data<float>(), int(p.k),
                p.b.data<float>(), int(p.n), 0.f, p.c.data<float>(), int(p.n));
    benchmark::ClobberMemory();
  }
  flops(s, p);
}
#endif
#if KILN_HAVE_EIGEN
void eigen_sgemm(benchmark::State& s) {
  problem p(s.range(0), s.range(1), s.range(2));
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const mat> a(p.a.data<float>(), p.m, p.k), b(p.b.data<float>(), p.k, p.n);
  Eigen::Map<mat> c(p.c.data<float>(), p.m, p.n);
  for (auto _ : s) {
    c.noalias() = a * b;
    benchmark::ClobberMemory();
  }
  flops(s, p);
}
#endif

/// The ceiling: the FMA units' peak on this core, in the same run. 24 independent chains of
/// fused multiply-adds on the widest vectors xsimd compiles for (more than the units' count times
/// their latency, so that they never wait on each other), nothing loaded or stored; a GEMM's
/// GFLOP/s over this figure is its share of what the core can do.
void fma_peak(benchmark::State& s) {
  using V = xsimd::batch<float>;
  constexpr int chains = 24;
  V acc[chains];
  for (int i = 0; i < chains; ++i) acc[i] = V(float(i));
  const V a(1.0000001f), b(0.9999999f);
  constexpr std::int64_t steps = 4096;
  for (auto _ : s) {
    for (std::int64_t k = 0; k < steps; ++k)
      [&]<std::size_t... I>(std::index_sequence<I...>) { ((acc[I] = xsimd::fma(a, acc[I], b)), ...); }(std::make_index_sequence<chains>{});
    for (int i = 0; i < chains; ++i) benchmark::DoNotOptimize(acc[i]);
  }
  s.counters["GFLOP/s"] = benchmark::Counter(double(s.iterations()) * double(steps) * chains * 2.0 * double(V::size), benchmark::Counter::kIsRate,
                                             benchmark::Counter::kIs1000);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {64, 128, 256, 512, 1024}) b->Args({n, n, n});
  b->Args({128, 768, 3072});
  b->Unit(benchmark::kMicrosecond);
}

/// Dense layers: the MLP's first layer at batch 1 and 64, and a transformer's feed-forward layer.
void dense_shapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 784, 512})->Args({60, 784, 512})->Args({64, 784, 512})->Args({72, 784, 512})->Args({64, 512, 512})->Args({64, 512, 10});
  b->Args({128, 768, 3072});
  b->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(fma_peak)->Name("fma_peak");
BENCHMARK(kiln_sgemm)->Name("sgemm/kiln")->Apply(shapes);
BENCHMARK(kiln_sgemm)->Name("dense/kiln")->Apply(dense_shapes);
BENCHMARK(kiln_sgemm_prepacked)->Name("dense/kiln_prepacked")->Apply(dense_shapes);
BENCHMARK(kiln_sgemm_2threads)->Name("sgemm/kiln_2threads")->Apply(shapes)->UseRealTime();  // CPU time would count one thread
#if KILN_HAVE_OPENBLAS
BENCHMARK(openblas_sgemm)->Name("sgemm/openblas")->Apply(shapes);
BENCHMARK(openblas_sgemm)->Name("dense/openblas")->Apply(dense_shapes);
#endif
#if KILN_HAVE_EIGEN
BENCHMARK(eigen_sgemm)->Name("sgemm/eigen")->Apply(shapes);
#endif

BENCHMARK_MAIN();
