// SPDX-License-Identifier: Apache-2.0
/// \file
/// Winograd's minimal filtering F(2x2, 3x3) for stride-1 3x3 convolutions (Lavin and Gray,
/// "Fast Algorithms for Convolutional Neural Networks", 2016): each 2x2 block of outputs (a
/// tile) comes from the 4x4 input patch under it with 16 multiplications per input and output
/// channel pair instead of 36. With the transformed weight U = G g G^T, computed once
/// (`winograd_weights`; the compiler's `prepack_weights` does it at compile time), a
/// convolution is
///
///     input transform   V[xi][c][t] = (B^T d B)[xi]   d: the 4x4 padded input under tile t
///     16 GEMMs          M[xi] (O x T) = U^T[xi] (O x C) * V[xi] (C x T)
///     output transform  y (the 2x2 outputs of tile t) = A^T m A   m: M[.][o][t]
///
/// 2.25x fewer multiply-adds than the direct kernel, spent in kernels::gemm's micro-kernel,
/// for the cost of the two transforms, which read and write every element a few times. It pays
/// where the channels are many and the tiles are enough to fill the GEMM's column panels: on
/// ResNet-18's 56², 28² and 14² stages, not on its 7² one (`prefer_winograd_conv`). The results
/// differ from the direct kernel's by a few units in the last place of the largest terms (the
/// transforms add and subtract inputs before multiplying).
///
/// How it runs: tiles are numbered row-major over the output and taken a few tile rows at a
/// time (a chunk, about 64 tiles; chunks are shared out among the threads). For each input
/// channel, the rows a chunk needs are copied into a zero-padded plane split into even and
/// odd columns (`window_plane` with stride 2), so that the 4x4 patches of consecutive tiles
/// are consecutive elements: the input transform runs on whole vectors of tiles and writes V
/// straight into the panels the GEMM's micro-kernel reads (as a B packed ahead of time), so the
/// GEMM packs nothing — A, the weight, is read in place. The output transform, again over
/// vectors of tiles, runs per output channel over the 16 GEMM results, interleaves the even and
/// odd output columns into the output's rows, and the epilogue (bias, fused expression) runs
/// over each block of channels of the chunk while it is in cache.
#pragma once

#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/window_plane.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace kiln::kernels::detail {

/// The transformed points of one F(2x2, 3x3) tile: a 4x4 patch in, 16 products per channel pair.
inline constexpr std::int64_t winograd_points = 16;

/// U = G g G^T for every (output, input) channel pair of the [O, C, 3, 3] weight `g`
/// (contiguous), stored as 16 row-major O x C matrices: u[(xi * O + o) * C + c] — the A
/// operands of the 16 GEMMs.
template <class T>
void winograd_weights(const T* g, std::int64_t o, std::int64_t c, T* u) {
  const T half(0.5);
  for (std::int64_t oo = 0; oo < o; ++oo)
    for (std::int64_t cc = 0; cc < c; ++cc) {
      const T* k = g + (oo * c + cc) * 9;
      T t[4][3];  // G g: 4 x 3
      for (int j = 0; j < 3; ++j) {
        t[0][j] = k[j];
        t[1][j] = half * (k[j] + k[3 + j] + k[6 + j]);
        t[2][j] = half * (k[j] - k[3 + j] + k[6 + j]);
        t[3][j] = k[6 + j];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) G^T: 4 x 4
        const T r[4] = {t[i][0], half * (t[i][0] + t[i][1] + t[i][2]), half * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
        for (int j = 0; j < 4; ++j) u[((i * 4 + j) * o + oo) * c + cc] = r[j];
      }
    }
}

/// What the Winograd kernel needs to know of one convolution: the input [N, C, H, W] (strides
/// `xs`), the padding before the first row and column, and the output [N, O, OH, OW] (strides
/// `ys`, contiguous rows: ys[3] == 1 and ys[2] == OW).
struct winograd_problem {
  std::int64_t n, c, h, w, o, oh, ow, top, left;
  std::array<std::int64_t, 4> xs, ys;
};

/// The per-thread buffers of `conv2d_winograd_packed`, reused across calls.
template <class T>
struct winograd_buffers {
  window_plane<T> plane;
  std::vector<T, xsimd::aligned_allocator<T, 64>> row, v, m, y;
  static winograd_buffers& of_this_thread() {
    thread_local winograd_buffers b;
    return b;
  }
};

/// The tile rows per chunk: about `target` tiles, at least one row, and, when the image has
/// enough tile rows, enough chunks for every thread; then evened out over the chunks.
inline std::int64_t winograd_chunk_rows(std::int64_t th, std::int64_t tw, std::int64_t threads) {
  constexpr std::int64_t target = 64;
  std::int64_t rows = std::clamp<std::int64_t>(target / tw, 1, th);
  if ((th + rows - 1) / rows < threads) rows = std::max<std::int64_t>(1, (th + threads - 1) / threads);
  const std::int64_t chunks = (th + rows - 1) / rows;
  return (th + chunks - 1) / chunks;
}

/// The input transform of tile rows [ty0, ty1) of image `x` (`nt` tiles, ntp rounded up to
/// whole column panels): V for every input channel, in the packed-B layout of a C x ntp matrix
/// per point (`prepack_b`'s blocks and panels), at `v`.
template <class T>
void winograd_input(const T* x, const winograd_problem& p, std::int64_t tw, std::int64_t ty0, std::int64_t ty1, std::int64_t ntp,
                    winograd_buffers<T>& b, T* v) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size), NR = gemm_detail::shape<T>::NR;
  constexpr std::int64_t P = winograd_points;
  const std::int64_t nt = (ty1 - ty0) * tw, K = p.c, KB = gemm_detail::block_rows<T>(K);
  const std::int64_t rs = ntp + W;  // a transformed row, with room for the last vector's spare lanes
  b.row.resize(std::size_t(P * rs));
  T* const row = b.row.data();
  // The padded rows [2 ty0, 2 ty1 + 2) hold input rows [y0, y1), which start at plane row `at`.
  const std::int64_t hp = 2 * (ty1 - ty0) + 2, wp = 2 * tw + 2;
  const std::int64_t y0 = std::clamp<std::int64_t>(2 * ty0 - p.top, 0, p.h), y1 = std::clamp<std::int64_t>(2 * ty1 + 2 - p.top, 0, p.h);
  const std::int64_t at = y0 + p.top - 2 * ty0;
  std::vector<std::int64_t> tap;
  for (std::int64_t c = 0; c < K; ++c) {
    b.plane.build(x + c * p.xs[1] + y0 * p.xs[2], std::max<std::int64_t>(0, y1 - y0), p.w, p.xs[2], p.xs[3], at, p.left, hp, wp, 2, T(0));
    b.plane.taps(4, 1, tap);  // columns 2 tx + j of tile tx: even[tx], odd[tx], even[tx + 1], odd[tx + 1]
    for (std::int64_t r = 0; r < ty1 - ty0; ++r) {
      const T* in[4] = {b.plane.row(2 * r), b.plane.row(2 * r + 1), b.plane.row(2 * r + 2), b.plane.row(2 * r + 3)};
      // Whole vectors along the tile row; the lanes past its end land where the next row's
      // tiles (or the spare lanes) go, and are overwritten or dropped.
      for (std::int64_t tx = 0; tx < tw; tx += W) {
        V d[4][4];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) d[i][j] = V::load_unaligned(in[i] + tap[std::size_t(j)] + tx);
        V t[4][4];  // B^T d
        for (int j = 0; j < 4; ++j) {
          t[0][j] = d[0][j] - d[2][j];
          t[1][j] = d[1][j] + d[2][j];
          t[2][j] = d[2][j] - d[1][j];
          t[3][j] = d[1][j] - d[3][j];
        }
        T* out = row + r * tw + tx;
        for (int i = 0; i < 4; ++i) {  // (B^T d) B
          (t[i][0] - t[i][2]).store_unaligned(out + (i * 4 + 0) * rs);
          (t[i][1] + t[i][2]).store_unaligned(out + (i * 4 + 1) * rs);
          (t[i][2] - t[i][1]).store_unaligned(out + (i * 4 + 2) * rs);
          (t[i][1] - t[i][3]).store_unaligned(out + (i * 4 + 3) * rs);
        }
      }
    }
    // Channel c is row c - p0 of its block of K: panel j of the block holds its NR columns.
    const std::int64_t p0 = c / KB * KB, kc = std::min(KB, K - p0);
    for (std::int64_t xi = 0; xi < P; ++xi) {
      T* src = row + xi * rs;
      std::fill(src + nt, src + ntp, T(0));  // columns past the last tile
      T* dst = v + xi * K * ntp + p0 * ntp + (c - p0) * NR;
      for (std::int64_t j = 0; j < ntp; j += NR, dst += NR * kc)
        for (std::int64_t e = 0; e < NR; e += W) V::load_unaligned(src + j + e).store_aligned(dst + e);
    }
  }
}

/// The output transform of output channel `o` over a chunk of `nt` tiles (`tw` per tile row,
/// from tile row ty0) whose 16 GEMM results are at m[xi * mstride + t]: writes the chunk's
/// output rows of that channel at `y` (the channel's plane, contiguous rows of p.ow).
template <class T>
void winograd_output(const T* m, std::int64_t mstride, const winograd_problem& p, std::int64_t tw, std::int64_t ty0, std::int64_t ty1,
                     std::int64_t ntp, T* ys, T* y) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  const std::int64_t nt = (ty1 - ty0) * tw;
  for (std::int64_t q = 0; q < nt; q += W) {
    V s[2][4];  // A^T m
    for (int j = 0; j < 4; ++j) {
      const V m0 = V::load_aligned(m + (0 * 4 + j) * mstride + q), m1 = V::load_aligned(m + (1 * 4 + j) * mstride + q);
      const V m2 = V::load_aligned(m + (2 * 4 + j) * mstride + q), m3 = V::load_aligned(m + (3 * 4 + j) * mstride + q);
      s[0][j] = m0 + m1 + m2;
      s[1][j] = m1 - m2 - m3;
    }
    for (int i = 0; i < 2; ++i) {  // (A^T m) A: outputs (2 ty + i, 2 tx + jj)
      (s[i][0] + s[i][1] + s[i][2]).store_aligned(ys + (i * 2 + 0) * ntp + q);
      (s[i][1] - s[i][2] - s[i][3]).store_aligned(ys + (i * 2 + 1) * ntp + q);
    }
  }
  // Even and odd columns interleaved into the output's rows (a loop compilers vectorise).
  const std::int64_t pairs = p.ow / 2;
  for (std::int64_t r = 0; r < ty1 - ty0; ++r)
    for (std::int64_t i = 0; i < 2; ++i) {
      const std::int64_t oy = 2 * (ty0 + r) + i;
      if (oy >= p.oh) break;
      T* __restrict dst = y + oy * p.ow;
      const T* __restrict even = ys + (i * 2) * ntp + r * tw;
      const T* __restrict odd = ys + (i * 2 + 1) * ntp + r * tw;
      for (std::int64_t tx = 0; tx < pairs; ++tx) {
        dst[2 * tx] = even[tx];
        dst[2 * tx + 1] = odd[tx];
      }
      if (p.ow % 2) dst[p.ow - 1] = even[pairs];
    }
}

/// The convolution of `x` (data at `xd`) with the transformed weight `u` (`winograd_weights`)
/// into `y` (data at `yd`); `apply(n, c, rs, cs, o, j, m, len)` as for the direct kernel, on
/// each finished block of output channels [o, o + m) and positions [j, j + len) of image n.
template <class T, class Apply>
void conv2d_winograd_packed(const T* xd, const T* u, const winograd_problem& p, T* yd, const Apply& apply) {
  using S = gemm_detail::shape<T>;
  constexpr std::int64_t NR = S::NR, MR = S::MR, P = winograd_points;
  const std::int64_t th = (p.oh + 1) / 2, tw = (p.ow + 1) / 2;
  const std::int64_t threads = std::int64_t(num_threads());
  const std::int64_t rows = winograd_chunk_rows(th, tw, threads), chunks = (th + rows - 1) / rows;
  const std::int64_t parts = std::min(threads, chunks);
  const std::int64_t max_ntp = (rows * tw + NR - 1) / NR * NR;
  // Output channels per block: the block's 16 GEMM results (16 x ob x ntp) in at most 1 MB (all of
  // ResNet-18's channels; blocks of 256 KB measured slower on Zen 5).
  const std::int64_t ob = std::min(p.o, std::max(MR, (std::int64_t(1024) << 10) / std::int64_t(sizeof(T)) / (P * max_ntp) / MR * MR));
  for (std::int64_t n = 0; n < p.n; ++n) {
    const T* x = xd + n * p.xs[0];
    T* y = yd + n * p.ys[0];
    parallel_for(parts, [&](std::int64_t part) {
      winograd_buffers<T>& b = winograd_buffers<T>::of_this_thread();
      b.v.resize(std::size_t(P * p.c * max_ntp));
      b.m.resize(std::size_t(P * ob * max_ntp));
      b.y.resize(std::size_t(4 * max_ntp));
      for (std::int64_t chunk = part * chunks / parts; chunk < (part + 1) * chunks / parts; ++chunk) {
        const std::int64_t ty0 = chunk * rows, ty1 = std::min(th, ty0 + rows);
        const std::int64_t nt = (ty1 - ty0) * tw, ntp = (nt + NR - 1) / NR * NR;
        winograd_input<T>(x, p, tw, ty0, ty1, ntp, b, b.v.data());
        const std::int64_t q0 = 2 * ty0 * p.ow, q1 = std::min(p.oh, 2 * ty1) * p.ow;  // the chunk's output positions
        for (std::int64_t o0 = 0; o0 < p.o; o0 += ob) {
          const std::int64_t mo = std::min(ob, p.o - o0);
          for (std::int64_t xi = 0; xi < P; ++xi) {
            const matrix_view<const T> a{u + (xi * p.o + o0) * p.c, mo, p.c, p.c, 1};
            const matrix_view<T> c{b.m.data() + xi * mo * ntp, mo, nt, ntp, 1};
            gemm_detail::gemm_rectangle<T>(a, gemm_detail::prepacked<T>{b.v.data() + xi * p.c * ntp, ntp}, c, 0, mo, 0, nt, false, no_epilogue{});
          }
          for (std::int64_t o = 0; o < mo; ++o)
            winograd_output<T>(b.m.data() + o * ntp, mo * ntp, p, tw, ty0, ty1, ntp, b.y.data(), y + (o0 + o) * p.ys[1]);
          apply(n, y + o0 * p.ys[1] + q0, p.ys[1], 1, o0, q0, mo, q1 - q0);
        }
      }
    });
  }
}

}  // namespace kiln::kernels::detail
