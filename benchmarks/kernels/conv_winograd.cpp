// SPDX-License-Identifier: Apache-2.0
// An experiment towards issue 15 (ResNet-18 against ONNX Runtime), not yet one of kiln's kernels:
// Winograd F(2x2, 3x3) for the stride-1 3x3 convolutions, built on kernels::gemm, timed beside
// the direct kernel kiln runs today (kernels::conv2d_prepacked) on ResNet-18's four 3x3 shapes.
//
//   input transform  V[xi][c][t] = (B^T d B)[xi]     d: the 4x4 padded input under tile t
//   16 GEMMs         M[xi] (O x NT) = U^T[xi] (O x C) * V[xi] (C x NT)
//   output transform y(2x2 of tile t) = A^T m A      m: M[.][o][t]
//
// Each tile is a 2x2 block of outputs; tiles are numbered row-major over the image and taken NT at
// a time (the benchmark's second argument). U = G g G^T is computed once, as a compiler pass would
// at compile time. The transforms are vectorised over tiles, reading a copy of the padded image
// split into even and odd columns so that neighbouring tiles are neighbouring elements. Not done
// yet: writing V in the GEMM's packed panel order (the GEMM packs it again), vector stores in the
// output transform, a fused epilogue, threads. Each case checks itself against the direct kernel
// first and prints the largest difference in its label.
#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/nn.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <vector>

using namespace kiln;
using kiln::runtime::tensor;

namespace {

using V = kernels::batch<float>;
constexpr std::int64_t W = std::int64_t(V::size);

struct wshape {
  const char* name;
  std::int64_t c, hw, o;
};
const wshape shapes[] = {{"layer1", 64, 56, 64}, {"layer2", 128, 28, 128}, {"layer3", 256, 14, 256}, {"layer4", 512, 7, 512}};

// U^T per xi: [16][O][C] row-major.
std::vector<float> transform_weights(const float* g, std::int64_t o, std::int64_t c) {
  std::vector<float> u(std::size_t(16 * o * c));
  for (std::int64_t oo = 0; oo < o; ++oo)
    for (std::int64_t cc = 0; cc < c; ++cc) {
      const float* k = g + (oo * c + cc) * 9;
      float t[4][3];  // G g
      for (int j = 0; j < 3; ++j) {
        t[0][j] = k[0 * 3 + j];
        t[1][j] = 0.5f * (k[0 * 3 + j] + k[1 * 3 + j] + k[2 * 3 + j]);
        t[2][j] = 0.5f * (k[0 * 3 + j] - k[1 * 3 + j] + k[2 * 3 + j]);
        t[3][j] = k[2 * 3 + j];
      }
      for (int i = 0; i < 4; ++i) {
        const float r[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]), 0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
        for (int j = 0; j < 4; ++j) u[std::size_t(((i * 4 + j) * o + oo) * c + cc)] = r[j];
      }
    }
  return u;
}

struct wino_buffers {
  std::vector<float, xsimd::aligned_allocator<float, 64>> even, odd, v, m;
};

// x [C, H, W] -> y [O, H, W], 3x3, stride 1, padding 1. Tiles are numbered row-major over the
// image and taken `nt` at a time (a multiple of W), whatever the rows.
void wino_conv(const float* x, const float* ut, std::int64_t C, std::int64_t H, std::int64_t Wd, std::int64_t O, float* y, wino_buffers& b,
               std::int64_t nt) {
  const std::int64_t TH = (H + 1) / 2, TW = (Wd + 1) / 2, T = TH * TW;
  const std::int64_t rows = 2 * TH + 2, half = TW + 1;  // phase-split padded plane: even/odd columns
  b.even.assign(std::size_t(C * rows * half), 0.f);
  b.odd.assign(std::size_t(C * rows * half), 0.f);
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t r = 0; r < H; ++r) {
      const float* src = x + (c * H + r) * Wd;
      float* e = b.even.data() + (c * rows + r + 1) * half;
      float* od = b.odd.data() + (c * rows + r + 1) * half;
      for (std::int64_t q = 0; q < Wd; ++q) {  // padded column q + 1
        const std::int64_t p = q + 1;
        (p % 2 ? od : e)[p / 2] = src[q];
      }
    }
  nt = std::min({nt, std::int64_t(512), (T + W - 1) / W * W});  // the scratch rows below hold 512 tiles
  alignas(64) float g[16][512 + W];
  for (std::int64_t t0 = 0; t0 < T; t0 += nt) {
    const std::int64_t NT = nt, real = std::min(nt, T - t0);
    b.v.resize(std::size_t(16 * C * NT));
    b.m.resize(std::size_t(16 * O * NT));
    float* v = b.v.data();
    for (std::int64_t c = 0; c < C; ++c) {
      // g[i*4+j][t - t0] = padded input (2ty + i, 2tx + j) of tile t
      for (std::int64_t t = t0; t < t0 + real;) {
        const std::int64_t ty = t / TW, tx = t % TW, n = std::min(TW - tx, t0 + real - t);
        for (int i = 0; i < 4; ++i) {
          const float* e = b.even.data() + (c * rows + 2 * ty + i) * half + tx;
          const float* od = b.odd.data() + (c * rows + 2 * ty + i) * half + tx;
          std::copy(e, e + n, g[i * 4 + 0] + (t - t0));
          std::copy(od, od + n, g[i * 4 + 1] + (t - t0));
          std::copy(e + 1, e + 1 + n, g[i * 4 + 2] + (t - t0));
          std::copy(od + 1, od + 1 + n, g[i * 4 + 3] + (t - t0));
        }
        t += n;
      }
      for (int k = 0; k < 16; ++k) std::fill(g[k] + real, g[k] + NT, 0.f);
      for (std::int64_t q = 0; q < NT; q += W) {
        V d[4][4];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) d[i][j] = V::load_aligned(g[i * 4 + j] + q);
        V tt[4][4];
        for (int j = 0; j < 4; ++j) {
          tt[0][j] = d[0][j] - d[2][j];
          tt[1][j] = d[1][j] + d[2][j];
          tt[2][j] = d[2][j] - d[1][j];
          tt[3][j] = d[1][j] - d[3][j];
        }
        for (int i = 0; i < 4; ++i) {
          const V r[4] = {tt[i][0] - tt[i][2], tt[i][1] + tt[i][2], tt[i][2] - tt[i][1], tt[i][1] - tt[i][3]};
          for (int j = 0; j < 4; ++j) r[j].store_aligned(v + ((i * 4 + j) * C + c) * NT + q);
        }
      }
    }
    for (int xi = 0; xi < 16; ++xi)
      kernels::gemm<float>({ut + xi * O * C, O, C, C, 1}, {v + xi * C * NT, C, NT, NT, 1}, {b.m.data() + xi * O * NT, O, NT, NT, 1});
    const float* m = b.m.data();
    alignas(64) float yb[4][512 + W];
    for (std::int64_t o = 0; o < O; ++o) {
      for (std::int64_t q = 0; q < NT; q += W) {
        V mm[4][4];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) mm[i][j] = V::load_aligned(m + ((i * 4 + j) * O + o) * NT + q);
        V s2[2][4];
        for (int j = 0; j < 4; ++j) {
          s2[0][j] = mm[0][j] + mm[1][j] + mm[2][j];
          s2[1][j] = mm[1][j] - mm[2][j] - mm[3][j];
        }
        for (int i = 0; i < 2; ++i) {
          (s2[i][0] + s2[i][1] + s2[i][2]).store_aligned(yb[i * 2 + 0] + q);
          (s2[i][1] - s2[i][2] - s2[i][3]).store_aligned(yb[i * 2 + 1] + q);
        }
      }
      for (std::int64_t t = t0; t < t0 + real; ++t) {
        const std::int64_t ty = t / TW, tx = t % TW;
        for (int i = 0; i < 2; ++i) {
          const std::int64_t row = 2 * ty + i;
          if (row >= H) continue;
          float* dst = y + (o * H + row) * Wd + 2 * tx;
          dst[0] = yb[i * 2 + 0][t - t0];
          if (2 * tx + 1 < Wd) dst[1] = yb[i * 2 + 1][t - t0];
        }
      }
    }
  }
}

struct problem {
  wshape s;
  tensor x, w, y, packed;
  kernels::conv2d_params p;
  std::vector<float> ut;
  explicit problem(const wshape& sh) : s(sh) {
    p.padding = {1, 1, 1, 1};
    x = tensor::empty({1, s.c, s.hw, s.hw}, dtype::float32);
    w = tensor::empty({s.o, s.c, 3, 3}, dtype::float32);
    for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 17) * 0.1f - 0.8f;
    for (std::int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = float((i * 7) % 13) * 0.01f - 0.06f;
    y = tensor::zeros({1, s.o, s.hw, s.hw}, dtype::float32);
    packed = kernels::prepack_conv_weight(w);
    ut = transform_weights(w.data<float>(), s.o, s.c);
  }
  double flops() const { return 2.0 * double(s.o * s.c * 9 * s.hw * s.hw); }
};

void direct(benchmark::State& st) {
  problem p(shapes[st.range(0)]);
  const auto l = kernels::native_conv_layout(dtype::float32, p.s.o, p.s.c, 3, 3);
  for (auto _ : st) {
    kernels::conv2d_prepacked(p.x, p.packed, l, {}, p.p, p.y);
    benchmark::ClobberMemory();
  }
  st.SetLabel(p.s.name);
  st.counters["GFLOP/s"] = benchmark::Counter(double(st.iterations()) * p.flops(), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
void wino(benchmark::State& st) {
  problem p(shapes[st.range(0)]);
  wino_buffers b;
  tensor y = tensor::zeros({1, p.s.o, p.s.hw, p.s.hw}, dtype::float32);
  kernels::conv2d_prepacked(p.x, p.packed, kernels::native_conv_layout(dtype::float32, p.s.o, p.s.c, 3, 3), {}, p.p, p.y);
  wino_conv(p.x.data<float>(), p.ut.data(), p.s.c, p.s.hw, p.s.hw, p.s.o, y.data<float>(), b, st.range(1));
  double err = 0, mag = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    err = std::max(err, double(std::abs(y.data<float>()[i] - p.y.data<float>()[i])));
    mag = std::max(mag, double(std::abs(p.y.data<float>()[i])));
  }
  for (auto _ : st) {
    wino_conv(p.x.data<float>(), p.ut.data(), p.s.c, p.s.hw, p.s.hw, p.s.o, y.data<float>(), b, st.range(1));
    benchmark::ClobberMemory();
  }
  char label[96];
  std::snprintf(label, sizeof label, "%s maxerr %.2g of %.2g", p.s.name, err, mag);
  st.SetLabel(label);
  st.counters["GFLOP/s"] = benchmark::Counter(double(st.iterations()) * p.flops(), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
}  // namespace

BENCHMARK(direct)->DenseRange(0, 3);
BENCHMARK(wino)->ArgsProduct({{0, 1, 2, 3}, {32, 64, 128, 256, 512}});
BENCHMARK_MAIN();
