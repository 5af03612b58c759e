// SPDX-License-Identifier: Apache-2.0
// Epilogue fusion in the kernels, one thread, float32: the fused form (one kernel call that
// applies the epilogue to each block of the product while it is in L1) against the same
// operators as separate kernels and against the bare matmul / conv2d. The target: the fused form
// within 5% of the bare kernel.
//
//   matmul/<M>/<K>/<N>     x @ w, then + bias[N] and gelu (or relu)   (the transformer's FFN:
//                          128 x 256 x 1024 and 128 x 1024 x 256; the MLP's first layer at
//                          batch 64: 64 x 784 x 512)
//   conv/<C>/<HW>          3x3 conv, pad 1, C -> C channels, then + bias[C, 1, 1], + residual, relu
//                                                           (a ResNet basic block's second conv)
//
// Each benchmark reports GFLOP/s of the product alone, so the forms compare directly.
#include <kiln/kernels/kernels.hpp>

#include <benchmark/benchmark.h>

#include <cmath>

using namespace kiln;
using kiln::runtime::tensor;
namespace k = kiln::kernels;

namespace {

/// Values in [-scale, scale]. Weights are scaled by 1/sqrt(fan-in), as trained ones are, so that
/// the products are of order 1: an activation of large values (gelu of -20 underflows to a
/// denormal) would time the floating-point unit's slow path rather than the kernels.
tensor filled(runtime::shape_vector shape, unsigned seed, float scale = 1) {
  tensor t = tensor::empty(std::move(shape), dtype::float32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (float((std::int64_t(seed) * 7919 + i * 31) % 23) / 11.f - 1.f) * scale;
  return t;
}

void rate(benchmark::State& s, double flop) {
  s.counters["GFLOP/s"] = benchmark::Counter(double(s.iterations()) * flop, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

struct dense {
  std::int64_t m, kk, n;
  tensor x, w, bias, product, biased, out;
  explicit dense(const benchmark::State& s)
      : m(s.range(0)), kk(s.range(1)), n(s.range(2)), x(filled({m, kk}, 1)), w(filled({kk, n}, 2, 1.f / std::sqrt(float(kk)))), bias(filled({n}, 3)),
        product(tensor::empty({m, n}, dtype::float32)), biased(tensor::empty({m, n}, dtype::float32)), out(tensor::empty({m, n}, dtype::float32)) {}
  double flop() const { return 2.0 * double(m * kk * n); }
};

void matmul_bare(benchmark::State& s) {
  dense d(s);
  for (auto _ : s) {
    k::matmul(d.x, d.w, d.out);
    benchmark::ClobberMemory();
  }
  rate(s, d.flop());
}
void matmul_separate(benchmark::State& s) {
  dense d(s);
  for (auto _ : s) {
    k::matmul(d.x, d.w, d.product);
    k::add(d.product, d.bias, d.biased);
    k::gelu(d.biased, d.out);
    benchmark::ClobberMemory();
  }
  rate(s, d.flop());
}
void matmul_fused(benchmark::State& s, const char* epilogue) {
  dense d(s);
  const k::fused_expr e = k::fused_expr::parse(epilogue);
  for (auto _ : s) {
    k::matmul_fused(d.x, d.w, e, {d.bias}, d.out);
    benchmark::ClobberMemory();
  }
  rate(s, d.flop());
}

struct block {
  std::int64_t c, hw;
  tensor x, w, bias, residual, product, t1, t2, out;
  k::conv2d_params p;
  explicit block(const benchmark::State& s)
      : c(s.range(0)), hw(s.range(1)), x(filled({1, c, hw, hw}, 1)), w(filled({c, c, 3, 3}, 2, 1.f / std::sqrt(float(c * 9)))), bias(filled({c, 1, 1}, 3)),
        residual(filled({1, c, hw, hw}, 4)), product(tensor::empty({1, c, hw, hw}, dtype::float32)), t1(tensor::empty({1, c, hw, hw}, dtype::float32)),
        t2(tensor::empty({1, c, hw, hw}, dtype::float32)), out(tensor::empty({1, c, hw, hw}, dtype::float32)) {
    p.padding = {1, 1, 1, 1};
  }
  double flop() const { return 2.0 * double(c * c * 9 * hw * hw); }
};

void conv_bare(benchmark::State& s) {
  block b(s);
  for (auto _ : s) {
    k::conv2d(b.x, b.w, tensor(), b.p, b.out);
    benchmark::ClobberMemory();
  }
  rate(s, b.flop());
}
void conv_separate(benchmark::State& s) {
  block b(s);
  for (auto _ : s) {
    k::conv2d(b.x, b.w, tensor(), b.p, b.product);
    k::add(b.product, b.bias, b.t1);
    k::add(b.t1, b.residual, b.t2);
    k::relu(b.t2, b.out);
    benchmark::ClobberMemory();
  }
  rate(s, b.flop());
}
void conv_fused(benchmark::State& s) {
  block b(s);
  const k::fused_expr e = k::fused_expr::parse("(relu (add (add x0 x1) x2))");
  for (auto _ : s) {
    k::conv2d_fused(b.x, b.w, tensor(), b.p, e, {b.bias, b.residual}, b.out);
    benchmark::ClobberMemory();
  }
  rate(s, b.flop());
}

// The same block with the weight transformed for Winograd's F(m x m, 3x3), as prepack_weights
// does for ResNet's stride-1 3x3 convolutions: bare, and with the epilogue fused.
void conv_winograd(benchmark::State& s, bool fused) {
  block b(s);
  const std::int64_t m = k::winograd_tile_size(b.hw, b.hw);  // as prepack_weights picks it
  const tensor u = k::prepack_conv_weight_winograd(b.w, m);
  const k::winograd_conv_layout l = k::native_winograd_layout(b.w.type(), b.c, b.c, m);
  const k::fused_expr e = k::fused_expr::parse("(relu (add (add x0 x1) x2))");
  for (auto _ : s) {
    if (fused)
      k::conv2d_fused_winograd(b.x, u, l, tensor(), b.p, e, {b.bias, b.residual}, b.out);
    else
      k::conv2d_winograd(b.x, u, l, tensor(), b.p, b.out);
    benchmark::ClobberMemory();
  }
  rate(s, b.flop());
}

void dense_shapes(benchmark::internal::Benchmark* b) {
  b->Args({128, 256, 1024})->Args({64, 784, 512})->Args({128, 1024, 256})->Unit(benchmark::kMicrosecond);
}
void conv_shapes(benchmark::internal::Benchmark* b) {
  b->Args({32, 28})->Args({64, 56})->Args({128, 28})->Args({256, 14})->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(matmul_bare)->Name("matmul/bare")->Apply(dense_shapes);
BENCHMARK(matmul_separate)->Name("matmul+bias+gelu/separate")->Apply(dense_shapes);
BENCHMARK_CAPTURE(matmul_fused, gelu, "(gelu (add x0 x1))")->Name("matmul+bias+gelu/fused")->Apply(dense_shapes);
// The same with relu: what the epilogue costs when its arithmetic is cheap (gelu's erf is not).
BENCHMARK_CAPTURE(matmul_fused, relu, "(relu (add x0 x1))")->Name("matmul+bias+relu/fused")->Apply(dense_shapes);
BENCHMARK(conv_bare)->Name("conv/bare")->Apply(conv_shapes);
BENCHMARK(conv_separate)->Name("conv+bias+residual+relu/separate")->Apply(conv_shapes);
BENCHMARK(conv_fused)->Name("conv+bias+residual+relu/fused")->Apply(conv_shapes);
BENCHMARK_CAPTURE(conv_winograd, bare, false)->Name("conv/winograd_bare")->Apply(conv_shapes);
BENCHMARK_CAPTURE(conv_winograd, fused, true)->Name("conv+bias+residual+relu/winograd_fused")->Apply(conv_shapes);

BENCHMARK_MAIN();
