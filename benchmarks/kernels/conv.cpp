// SPDX-License-Identifier: Apache-2.0
// conv2d in GFLOP/s on the ResNet-18 layer shapes (batch 1, 224x224 input): kernels::conv2d (one
// thread and two; with the weight packed ahead of time, kernels::conv2d_prepacked; and for the
// stride-1 3x3 layers with the weight transformed for Winograd's F(2x2, 3x3),
// kernels::conv2d_winograd) beside the classic baseline, im2col into a buffer followed by OpenBLAS
// cblas_sgemm (one thread), timed together. GFLOP/s counts the direct algorithm's multiply-adds
// for every kernel, so that the figures compare times. Depthwise convolutions (MobileNet-V2 and EfficientNet-B0 shapes) and the
// max pools of ResNet, SqueezeNet and GoogLeNet are compared with plain direct loops, since BLAS
// has nothing for them.
#include <kiln/kernels/nn.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#if KILN_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

using namespace kiln;
using kiln::runtime::tensor;

namespace {

struct conv_shape {
  const char* name;
  std::int64_t c, hw, o, k, stride, pad, groups;
};

// ResNet-18's distinct convolutions, other networks' dense ones, then depthwise ones
// (MobileNet-V2's and EfficientNet-B0's).
const conv_shape shapes[] = {
    {"conv1_7x7s2", 3, 224, 64, 7, 2, 3, 1},        {"layer1_3x3", 64, 56, 64, 3, 1, 1, 1},
    {"layer2_3x3s2", 64, 56, 128, 3, 2, 1, 1},      {"layer2_3x3", 128, 28, 128, 3, 1, 1, 1},
    {"layer2_down_1x1s2", 64, 56, 128, 1, 2, 0, 1}, {"layer3_3x3", 256, 14, 256, 3, 1, 1, 1},
    {"layer4_3x3", 512, 7, 512, 3, 1, 1, 1},        {"layer3_down_1x1s2", 128, 28, 256, 1, 2, 0, 1},
    {"layer4_down_1x1s2", 256, 14, 512, 1, 2, 0, 1},
    // SqueezeNet 1.1's first layer and the 3x3 layers of its fire modules (few input channels),
    // and DenseNet-121's 3x3 layers (32 output channels).
    {"sq_conv1_3x3s2", 3, 224, 64, 3, 2, 0, 1},     {"sq_fire2_3x3", 16, 55, 64, 3, 1, 1, 1},
    {"sq_fire4_3x3", 32, 27, 128, 3, 1, 1, 1},      {"sq_fire6_3x3", 48, 13, 192, 3, 1, 1, 1},
    {"dn_3x3_c128_28", 128, 28, 32, 3, 1, 1, 1},    {"dn_3x3_c128_14", 128, 14, 32, 3, 1, 1, 1},
    {"dw_3x3_c144_56", 144, 56, 144, 3, 1, 1, 144},
    {"dw_3x3s2_c96_112", 96, 112, 96, 3, 2, 1, 96},  {"dw_3x3_c480_14", 480, 14, 480, 3, 1, 1, 480},
    {"dw_5x5_c672_14", 672, 14, 672, 5, 1, 2, 672}, {"dw_5x5_c1152_7", 1152, 7, 1152, 5, 1, 2, 1152},
    {"dw_5x5s2_c144_56", 144, 56, 144, 5, 2, 2, 144},
};
constexpr std::int64_t num_dense = 15;

struct problem {
  const conv_shape& s;
  kernels::conv2d_params p;
  tensor x, w, y;
  std::int64_t oh;
  explicit problem(const conv_shape& sh) : s(sh) {
    p.strides = {s.stride, s.stride};
    p.padding = {s.pad, s.pad, s.pad, s.pad};
    p.groups = s.groups;
    x = tensor::empty({1, s.c, s.hw, s.hw}, dtype::float32);
    w = tensor::empty({s.o, s.c / s.groups, s.k, s.k}, dtype::float32);
    // Values without a short period (a multiplicative hash), so that the signs of the sums an
    // activation tests are not predictable either.
    const auto scramble = [](std::int64_t i, std::uint32_t m) { return float((std::uint32_t(i) * 2654435761u >> 7) % m); };
    for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = scramble(i, 17) * 0.1f - 0.8f;
    for (std::int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = scramble(i, 13) * 0.01f - 0.06f;
    oh = (s.hw + 2 * s.pad - s.k) / s.stride + 1;
    y = tensor::zeros({1, s.o, oh, oh}, dtype::float32);
  }
  double flops() const { return 2.0 * double(s.o * (s.c / s.groups) * s.k * s.k * oh * oh); }
};

void report(benchmark::State& st, const problem& p) {
  st.SetLabel(p.s.name);
  st.counters["GFLOP/s"] = benchmark::Counter(double(st.iterations()) * p.flops(), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void kiln_conv(benchmark::State& st, int threads) {
  kernels::set_num_threads(threads);
  problem p(shapes[st.range(0)]);
  for (auto _ : st) {
    kernels::conv2d(p.x, p.w, {}, p.p, p.y);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  report(st, p);
}
void kiln_1thread(benchmark::State& st) { kiln_conv(st, 1); }
void kiln_2threads(benchmark::State& st) { kiln_conv(st, 2); }

// The weight packed once, as the compiler's prepack_weights does for a constant weight: the
// direct kernel then serves every size.
void kiln_prepacked(benchmark::State& st, int threads) {
  kernels::set_num_threads(threads);
  problem p(shapes[st.range(0)]);
  const tensor packed = kernels::prepack_conv_weight(p.w);
  const kernels::packed_conv_layout l = kernels::native_conv_layout(dtype::float32, p.s.o, p.s.c, p.s.k, p.s.k);
  for (auto _ : st) {
    kernels::conv2d_prepacked(p.x, packed, l, {}, p.p, p.y);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  report(st, p);
}
void kiln_prepacked_1thread(benchmark::State& st) { kiln_prepacked(st, 1); }
void kiln_prepacked_2threads(benchmark::State& st) { kiln_prepacked(st, 2); }

// As a network runs the direct kernel: the weight packed once, and the folded batch norm's shift
// and the Relu fused (an epilogue over each finished block of outputs).
void kiln_prepacked_fused(benchmark::State& st, int threads) {
  kernels::set_num_threads(threads);
  problem p(shapes[st.range(0)]);
  const tensor packed = kernels::prepack_conv_weight(p.w);
  const kernels::packed_conv_layout l = kernels::native_conv_layout(dtype::float32, p.s.o, p.s.c, p.s.k, p.s.k);
  const tensor shift = tensor::empty({p.s.o, 1, 1}, dtype::float32);
  for (std::int64_t i = 0; i < p.s.o; ++i) shift.data<float>()[i] = float(i % 7) * 0.1f - 0.3f;
  const kernels::fused_expr e = kernels::fused_expr::parse("(relu (add x0 x1))");
  const tensor operands[] = {shift};
  for (auto _ : st) {
    kernels::conv2d_fused_prepacked(p.x, packed, l, {}, p.p, e, operands, p.y);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  report(st, p);
}

// The weight transformed once for Winograd's F(2x2, 3x3), as prepack_weights does for the
// stride-1 3x3 convolutions it prefers it for.
void kiln_winograd(benchmark::State& st, int threads) {
  kernels::set_num_threads(threads);
  problem p(shapes[st.range(0)]);
  const std::int64_t m = st.range(1);  // the output tile: F(m x m, 3x3)
  const tensor packed = kernels::prepack_conv_weight_winograd(p.w, m);
  for (auto _ : st) {
    kernels::conv2d_winograd(p.x, packed, kernels::native_winograd_layout(dtype::float32, p.s.o, p.s.c, m), {}, p.p, p.y);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  report(st, p);
}
void kiln_winograd_1thread(benchmark::State& st) { kiln_winograd(st, 1); }
// The same with the weight coming from memory, as in a network, where each layer's weight was
// last read a whole inference ago: 16 copies of it, taken in turn (16 x 2.4 MB for layer2's
// F(4x4) weight, more than the L3 cache holds), beside the direct kernel treated the same way.
void kiln_winograd_cold(benchmark::State& st, int threads) {
  kernels::set_num_threads(threads);
  problem p(shapes[st.range(0)]);
  const std::int64_t m = st.range(1);
  std::vector<tensor> packed;
  for (int i = 0; i < 16; ++i) packed.push_back(kernels::prepack_conv_weight_winograd(p.w, m));
  std::size_t i = 0;
  for (auto _ : st) {
    kernels::conv2d_winograd(p.x, packed[i++ % 16], kernels::native_winograd_layout(dtype::float32, p.s.o, p.s.c, m), {}, p.p, p.y);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  report(st, p);
}
void kiln_prepacked_cold(benchmark::State& st, int threads) {
  kernels::set_num_threads(threads);
  problem p(shapes[st.range(0)]);
  std::vector<tensor> packed;
  for (int i = 0; i < 16; ++i) packed.push_back(kernels::prepack_conv_weight(p.w));
  const kernels::packed_conv_layout l = kernels::native_conv_layout(dtype::float32, p.s.o, p.s.c, p.s.k, p.s.k);
  std::size_t i = 0;
  for (auto _ : st) {
    kernels::conv2d_prepacked(p.x, packed[i++ % 16], l, {}, p.p, p.y);
    benchmark::ClobberMemory();
  }
  kernels::set_num_threads(1);
  report(st, p);
}
void kiln_winograd_2threads(benchmark::State& st) { kiln_winograd(st, 2); }

/// Caffe's im2col: column (y, x) of row (c, i, j) is input[c, y*s + i - pad, x*s + j - pad].
void im2col(const float* x, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t s, std::int64_t pad, std::int64_t oh,
            std::int64_t ow, float* col) {
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t j = 0; j < k; ++j)
        for (std::int64_t y = 0; y < oh; ++y) {
          const std::int64_t iy = y * s + i - pad;
          for (std::int64_t xo = 0; xo < ow; ++xo) {
            const std::int64_t ix = xo * s + j - pad;
            *col++ = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[(ch * h + iy) * w + ix] : 0.f;
          }
        }
}

#if KILN_HAVE_OPENBLAS
void im2col_openblas(benchmark::State& st) {
  openblas_set_num_threads(1);
  problem p(shapes[st.range(0)]);
  const std::int64_t K = p.s.c * p.s.k * p.s.k, N = p.oh * p.oh;
  std::vector<float> col(std::size_t(K * N));
  for (auto _ : st) {
    im2col(p.x.data<float>(), p.s.c, p.s.hw, p.s.hw, p.s.k, p.s.stride, p.s.pad, p.oh, p.oh, col.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(p.s.o), int(N), int(K), 1.f, p.w.data<float>(), int(K), col.data(), int(N), 0.f,
                p.y.data<float>(), int(N));
    benchmark::ClobberMemory();
  }
  report(st, p);
}
#endif

/// The direct depthwise loop a user would write, with the bounds test in the inner loop.
void direct_depthwise(benchmark::State& st) {
  problem p(shapes[st.range(0)]);
  const auto& s = p.s;
  for (auto _ : st) {
    const float* x = p.x.data<float>();
    const float* w = p.w.data<float>();
    float* y = p.y.data<float>();
    for (std::int64_t c = 0; c < s.c; ++c)
      for (std::int64_t oy = 0; oy < p.oh; ++oy)
        for (std::int64_t ox = 0; ox < p.oh; ++ox) {
          float acc = 0;
          for (std::int64_t i = 0; i < s.k; ++i)
            for (std::int64_t j = 0; j < s.k; ++j) {
              const std::int64_t iy = oy * s.stride + i - s.pad, ix = ox * s.stride + j - s.pad;
              if (iy >= 0 && iy < s.hw && ix >= 0 && ix < s.hw) acc += x[(c * s.hw + iy) * s.hw + ix] * w[(c * s.k + i) * s.k + j];
            }
          y[(c * p.oh + oy) * p.oh + ox] = acc;
        }
    benchmark::ClobberMemory();
  }
  report(st, p);
}

// Max pools of the model zoo: ResNet's (3x3, stride 2, padding 1 on 64x112²), SqueezeNet's three
// (3x3, stride 2, ceil mode on 64x111², 128x55², 256x27²: rows of a few vectors and a part),
// GoogLeNet's at 28² (480 channels) and its inception branch at 7² (3x3, stride 1, padding 1 on
// 832x7²: rows shorter than a vector).
struct pool_problem {
  std::int64_t c, hw, k, s, pad;
  bool ceil;
};
constexpr pool_problem pool_problems[] = {{64, 112, 3, 2, 1, false}, {64, 111, 3, 2, 0, true}, {128, 55, 3, 2, 0, true},
                                          {256, 27, 3, 2, 0, true},   {480, 28, 3, 2, 0, true},  {832, 7, 3, 1, 1, true}};
constexpr std::int64_t num_pools = std::int64_t(std::size(pool_problems));

void kiln_max_pool(benchmark::State& st) {
  const pool_problem& pp = pool_problems[st.range(0)];
  const tensor x = tensor::empty({1, pp.c, pp.hw, pp.hw}, dtype::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 17);
  const kernels::pool2d_params p{{pp.k, pp.k}, {pp.s, pp.s}, {pp.pad, pp.pad, pp.pad, pp.pad}, {1, 1}, pp.ceil, false};
  const tensor y = kernels::max_pool2d(x, p);
  for (auto _ : st) {
    kernels::max_pool2d(x, p, y);
    benchmark::ClobberMemory();
  }
  st.SetLabel(std::to_string(pp.c) + "x" + std::to_string(pp.hw) + "² k" + std::to_string(pp.k) + " s" + std::to_string(pp.s) +
              (pp.ceil ? " ceil" : ""));
  st.SetBytesProcessed(std::int64_t(st.iterations()) * std::int64_t(x.nbytes() + y.nbytes()));
}
// The same windows element by element, with the bounds tested per tap.
void direct_max_pool(benchmark::State& st) {
  const pool_problem& pp = pool_problems[st.range(0)];
  const tensor x = tensor::empty({1, pp.c, pp.hw, pp.hw}, dtype::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 17);
  const kernels::pool2d_params p{{pp.k, pp.k}, {pp.s, pp.s}, {pp.pad, pp.pad, pp.pad, pp.pad}, {1, 1}, pp.ceil, false};
  const tensor y = kernels::max_pool2d(x, p);
  const std::int64_t oh = y.shape(2), hw = pp.hw;
  for (auto _ : st) {
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (std::int64_t c = 0; c < pp.c; ++c)
      for (std::int64_t oy = 0; oy < oh; ++oy)
        for (std::int64_t ox = 0; ox < oh; ++ox) {
          float m = -std::numeric_limits<float>::infinity();
          for (std::int64_t i = 0; i < pp.k; ++i)
            for (std::int64_t j = 0; j < pp.k; ++j) {
              const std::int64_t iy = oy * pp.s + i - pp.pad, ix = ox * pp.s + j - pp.pad;
              if (iy >= 0 && iy < hw && ix >= 0 && ix < hw) m = std::max(m, in[(c * hw + iy) * hw + ix]);
            }
          out[(c * oh + oy) * oh + ox] = m;
        }
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(std::int64_t(st.iterations()) * std::int64_t(x.nbytes() + y.nbytes()));
}

void dense(benchmark::internal::Benchmark* b) {
  for (std::int64_t i = 0; i < num_dense; ++i) b->Arg(i);
  b->Unit(benchmark::kMicrosecond);
}
void winograd_3x3(benchmark::internal::Benchmark* b) {  // the stride-1 3x3 shapes, F(2x2) and F(4x4)
  for (std::int64_t i = 0; i < num_dense; ++i)
    if (shapes[i].k == 3 && shapes[i].stride == 1) b->Args({i, 2})->Args({i, 4});
  b->Unit(benchmark::kMicrosecond);
}
void depthwise(benchmark::internal::Benchmark* b) {
  for (std::int64_t i = num_dense; i < std::int64_t(std::size(shapes)); ++i) b->Arg(i);
  b->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(kiln_1thread)->Name("conv2d/kiln")->Apply(dense);
BENCHMARK(kiln_2threads)->Name("conv2d/kiln_2threads")->Apply(dense)->UseRealTime();  // CPU time would count one thread
BENCHMARK(kiln_prepacked_1thread)->Name("conv2d/kiln_prepacked")->Apply(dense);
BENCHMARK(kiln_prepacked_2threads)->Name("conv2d/kiln_prepacked_2threads")->Apply(dense)->UseRealTime();
BENCHMARK_CAPTURE(kiln_prepacked_fused, 1thread, 1)->Name("conv2d/kiln_prepacked_fused")->Apply(dense);
BENCHMARK_CAPTURE(kiln_prepacked_fused, 2threads, 2)->Name("conv2d/kiln_prepacked_fused_2threads")->Apply(dense)->UseRealTime();
BENCHMARK_CAPTURE(kiln_winograd_cold, 1thread, 1)->Name("conv2d/kiln_winograd_cold")->Args({1, 4})->Args({3, 4})->Args({5, 2})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(kiln_prepacked_cold, 1thread, 1)->Name("conv2d/kiln_prepacked_cold")->Arg(1)->Arg(3)->Arg(5)->Arg(6)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(kiln_winograd_cold, 2threads, 2)->Name("conv2d/kiln_winograd_cold_2threads")->Args({1, 4})->Args({3, 4})->Args({5, 2})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(kiln_prepacked_cold, 2threads, 2)->Name("conv2d/kiln_prepacked_cold_2threads")->Arg(1)->Arg(3)->Arg(5)->Arg(6)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(kiln_winograd_1thread)->Name("conv2d/kiln_winograd")->Apply(winograd_3x3);
BENCHMARK(kiln_winograd_2threads)->Name("conv2d/kiln_winograd_2threads")->Apply(winograd_3x3)->UseRealTime();
#if KILN_HAVE_OPENBLAS
BENCHMARK(im2col_openblas)->Name("conv2d/im2col_openblas")->Apply(dense);
#endif
BENCHMARK(kiln_1thread)->Name("depthwise/kiln")->Apply(depthwise);
BENCHMARK(direct_depthwise)->Name("depthwise/direct_loop")->Apply(depthwise);
BENCHMARK(kiln_max_pool)->Name("max_pool2d/kiln")->DenseRange(0, num_pools - 1)->Unit(benchmark::kMicrosecond);
BENCHMARK(direct_max_pool)->Name("max_pool2d/direct_loop")->DenseRange(0, num_pools - 1)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
