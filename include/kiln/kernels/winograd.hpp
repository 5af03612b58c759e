// SPDX-License-Identifier: Apache-2.0
/// \file
/// Winograd's minimal filtering F(m x m, 3x3) for stride-1 3x3 convolutions, m = 2 or 4 (Lavin
/// and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each m x m block of
/// outputs (a tile) comes from the (m+2) x (m+2) input patch under it with (m+2)² multiplications
/// per input and output channel pair instead of 9 m². With the transformed weight U = G g G^T,
/// computed once (`winograd_weights`; the compiler's `prepack_weights` does it at compile time),
/// a convolution is, with P = (m+2)² points,
///
///     input transform   V[xi][c][t] = (B^T d B)[xi]   d: the padded input patch under tile t
///     P GEMMs           M[xi] (O x T) = U^T[xi] (O x C) * V[xi] (C x T)
///     output transform  y (the m x m outputs of tile t) = A^T m A   m: M[.][o][t]
///
/// F(2x2) does 2.25x fewer multiply-adds than the direct kernel, F(4x4) 4x fewer, spent in
/// kernels::gemm's micro-kernel, for the cost of the two transforms, which read and write every
/// element a few times (fewer per output with the larger tile). It pays where the channels are
/// many and the tiles are enough to fill the GEMM's column panels (`prefer_winograd_conv`,
/// `winograd_tile_size`). The transforms add and subtract inputs before multiplying: F(2x2)
/// differs from the direct kernel by a few units in the last place of the largest terms, F(4x4)
/// (points 0, ±1, ±2, ∞; coefficients up to 8 and 1/24) by a few more; both are computed with
/// the weight transformed in double.
///
/// How it runs: each thread takes an even share of the output's tile rows and works it a few
/// tile rows at a time (a chunk, about 64 tiles; `winograd_schedule`). For each input
/// channel, the rows a chunk needs are copied into a zero-padded plane whose columns are split
/// into m phases (`window_plane` with stride m), so that the patches of consecutive tiles are
/// consecutive elements: the input transform runs on whole vectors of tiles and writes V
/// straight into the panels the GEMM's micro-kernel reads (as a B packed ahead of time); the
/// transformed weight is stored in the micro-kernel's A panels (as an A packed ahead of time), so
/// the GEMM packs nothing. The output transform, again over vectors of tiles, runs per output
/// channel over the P GEMM results, interleaves the m phases of output columns into the
/// output's rows, and the epilogue (bias, fused expression) runs over each block of channels of
/// the chunk while it is in cache. The transforms are written
/// once, for any m, from the constant matrices (`winograd_matrices`): each row's sum is unrolled
/// at compile time, its zero coefficients skipped and its ±1 ones added without a multiply.
#pragma once

#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/window_plane.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace kiln::kernels::detail {

/// The matrices of F(m x m, 3x3): B^T ((m+2) x (m+2)), G ((m+2) x 3), A^T (m x (m+2)).
template <int M>
struct winograd_matrices;
template <>
struct winograd_matrices<2> {  // points 0, 1, -1, ∞
  static constexpr double bt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr double g[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static constexpr double at[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};
template <>
struct winograd_matrices<4> {  // points 0, 1, -1, 2, -2, ∞
  static constexpr double bt[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                      {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr double g[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  static constexpr double at[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

/// The transformed points of one F(m x m, 3x3) tile: (m+2)² products per channel pair.
constexpr std::int64_t winograd_points(std::int64_t m) { return (m + 2) * (m + 2); }

/// Row `I` of the constant matrix `Mat` times the N vectors `in` (in[k * stride]): unrolled at
/// compile time, zero coefficients skipped, ±1 ones added or subtracted without a multiply.
template <const auto& Mat, int I, int N, class V>
__attribute__((always_inline)) inline V winograd_row(const V* in, int stride) {
  using T = typename V::value_type;
  V acc;
  bool started = false;  // known at every step once unrolled
  [&]<int... K>(std::integer_sequence<int, K...>) __attribute__((always_inline)) {
    (
        [&] {
          constexpr double c = Mat[I][K];
          if constexpr (c != 0) {
            const V x = in[K * stride];
            if (!started) acc = c == 1 ? x : c == -1 ? -x : V(T(c)) * x;
            else acc = c == 1 ? acc + x : c == -1 ? acc - x : xsimd::fma(V(T(c)), x, acc);
            started = true;
          }
        }(),
        ...);
  }(std::make_integer_sequence<int, N>());
  return acc;
}

/// U = G g G^T for every (output, input) channel pair of the [O, C, 3, 3] weight `g`
/// (contiguous), computed in double and stored as P O x C matrices packed as GEMM A operands in
/// layout `l` (`native_packed_a_layout` for this build; the padding rows are zero): U[xi](o, c)
/// at u[xi * packed_b_size(C, O, l) + packed_b_index(C, O, l, c, o)] — the A operands of the P
/// GEMMs, read in place.
template <int M, class T>
void winograd_weights(const T* g, std::int64_t o, std::int64_t c, packed_b_layout l, T* u) {
  using W = winograd_matrices<M>;
  constexpr int R = M + 2;
  const std::int64_t size = packed_b_size(c, o, l);
  std::fill(u, u + winograd_points(M) * size, T(0));
  for (std::int64_t oo = 0; oo < o; ++oo)
    for (std::int64_t cc = 0; cc < c; ++cc) {
      const T* k = g + (oo * c + cc) * 9;
      double t[R][3];  // G g
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < 3; ++j) t[i][j] = W::g[i][0] * double(k[j]) + W::g[i][1] * double(k[3 + j]) + W::g[i][2] * double(k[6 + j]);
      const std::int64_t at = packed_b_index(c, o, l, cc, oo);
      for (int i = 0; i < R; ++i)  // (G g) G^T
        for (int j = 0; j < R; ++j) u[(i * R + j) * size + at] = T(t[i][0] * W::g[j][0] + t[i][1] * W::g[j][1] + t[i][2] * W::g[j][2]);
    }
}

/// What the Winograd kernel needs to know of one convolution: the input [N, C, H, W] (strides
/// `xs`), the padding before the first row and column, and the output [N, O, OH, OW] (strides
/// `ys`, contiguous rows: ys[3] == 1 and ys[2] == OW).
struct winograd_problem {
  std::int64_t n, c, h, w, o, oh, ow, top, left;
  std::array<std::int64_t, 4> xs, ys;
};

/// The per-thread buffers of `conv2d_winograd_packed`, reused across calls (and only grown, `grow`).
template <class T>
struct winograd_buffers {
  window_plane<T> plane;
  std::vector<T, xsimd::aligned_allocator<T, 64>> row, v, m, y;
  static winograd_buffers& of_this_thread() {
    thread_local winograd_buffers b;
    return b;
  }
};

/// How `conv2d_winograd_packed` shares out an image's th tile rows of tw tiles: each of `parts`
/// threads takes an even share of the rows, and works it a chunk of about `target` tiles (at
/// least a row) at a time, the last chunk shorter. The GEMM pads each chunk to whole panels of NR
/// columns, which is why the chunks are not evened out: ResNet-18's 14 x 14 tiles on one thread
/// take rows 4, 4, 4 and 2, 7 panels of 32 tiles; evened to 3, 4, 3 and 4 they took 8, and
/// 5-18 % longer. (Chunks of a fixed row count shared out by chunks, as before, gave one thread
/// 8 of those 14 rows and the other 6. Shares cut inside a row, which both threads then
/// transform, were measured no faster on 7 x 7 tiles: 24 or 25 tiles are one panel, as 21 or 28.)
struct winograd_schedule {
  static constexpr std::int64_t target = 64;
  std::int64_t th, tw, parts;

  winograd_schedule(std::int64_t th_, std::int64_t tw_, std::int64_t threads) : th(th_), tw(tw_), parts(std::min(threads, th_)) {}

  /// Calls f(ty0, ty1) for each chunk of tile rows [ty0, ty1) of part `q`, in order.
  template <class F>
  void for_each_chunk(std::int64_t q, F&& f) const {
    const std::int64_t r0 = q * th / parts, r1 = (q + 1) * th / parts, per = std::max<std::int64_t>(1, target / tw);
    for (std::int64_t ty0 = r0; ty0 < r1; ty0 += per) f(ty0, std::min(r1, ty0 + per));
  }
  /// The most tile rows in one chunk: the first chunk of the largest share.
  std::int64_t max_rows() const {
    if (parts == 0) return 0;
    return std::min(std::max<std::int64_t>(1, target / tw), (th + parts - 1) / parts);
  }
};

/// The input transform of tile rows [ty0, ty1) of image `x` (`nt` tiles, ntp rounded up to
/// whole column panels): V for every input channel, in the packed-B layout of a C x ntp matrix
/// per point (`prepack_b`'s blocks and panels), at `v`.
template <int M, class T>
void winograd_input(const T* x, const winograd_problem& p, std::int64_t tw, std::int64_t ty0, std::int64_t ty1, std::int64_t ntp,
                    winograd_buffers<T>& b, T* v) {
  using V = batch<T>;
  using Mat = winograd_matrices<M>;
  constexpr int R = M + 2;
  constexpr std::int64_t W = std::int64_t(V::size), NR = gemm_detail::shape<T>::NR, P = winograd_points(M);
  const std::int64_t nt = (ty1 - ty0) * tw, K = p.c;
  const packed_b_layout layout = native_packed_b_layout<T>(K);
  const std::int64_t rs = ntp + W;  // a transformed row, with room for the last vector's spare lanes
  grow(b.row, P * rs);
  T* const row = b.row.data();
  // The padded rows [M ty0, M ty1 + 2) hold input rows [y0, y1), which start at plane row `at`.
  const std::int64_t hp = M * (ty1 - ty0) + 2, wp = M * tw + 2;
  const std::int64_t y0 = std::clamp<std::int64_t>(M * ty0 - p.top, 0, p.h), y1 = std::clamp<std::int64_t>(M * ty1 + 2 - p.top, 0, p.h);
  const std::int64_t at = y0 + p.top - M * ty0;
  std::vector<std::int64_t> tap;
  for (std::int64_t c = 0; c < K; ++c) {
    b.plane.build(x + c * p.xs[1] + y0 * p.xs[2], std::max<std::int64_t>(0, y1 - y0), p.w, p.xs[2], p.xs[3], at, p.left, hp, wp, M, T(0));
    b.plane.taps(R, 1, tap);  // column M tx + j of tile tx: phase j % M, element tx + j / M
    for (std::int64_t r = 0; r < ty1 - ty0; ++r) {
      const T* in[R];
      for (int i = 0; i < R; ++i) in[i] = b.plane.row(M * r + i);
      // Whole vectors along the tile row; the lanes past its end land where the next row's
      // tiles (or the spare lanes) go, and are overwritten or dropped.
      for (std::int64_t tx = 0; tx < tw; tx += W) {
        V d[R][R], e[R][R];  // the patches; d B
        for (int i = 0; i < R; ++i) {
          for (int j = 0; j < R; ++j) d[i][j] = V::load_unaligned(in[i] + tap[std::size_t(j)] + tx);
          [&]<int... J>(std::integer_sequence<int, J...>) { ((e[i][J] = winograd_row<Mat::bt, J, R>(&d[i][0], 1)), ...); }(std::make_integer_sequence<int, R>());
        }
        T* out = row + r * tw + tx;
        [&]<int... I>(std::integer_sequence<int, I...>) {  // B^T (d B)
          (([&] {
             for (int j = 0; j < R; ++j) winograd_row<Mat::bt, I, R>(&e[0][j], R).store_unaligned(out + (I * R + j) * rs);
           }()),
           ...);
        }(std::make_integer_sequence<int, R>());
      }
    }
    // Row c of each point's C x ntp matrix, panel by panel, where `prepack_b` would put it (the
    // index computed once per channel: the panels of a row are `step` apart).
    const std::int64_t at0 = packed_b_index(K, ntp, layout, c, 0), step = packed_b_index(K, ntp, layout, c, NR) - at0;
    for (std::int64_t xi = 0; xi < P; ++xi) {
      T* src = row + xi * rs;
      std::fill(src + nt, src + ntp, T(0));  // columns past the last tile
      T* dst = v + xi * K * ntp + at0;
      for (std::int64_t j = 0; j < ntp; j += NR, dst += step)
        for (std::int64_t e = 0; e < NR; e += W) V::load_unaligned(src + j + e).store_aligned(dst + e);
    }
  }
}

/// The output transform of output channel `o` over a chunk of `nt` tiles (`tw` per tile row,
/// from tile row ty0) whose P GEMM results are at m[xi * mstride + t]: writes the chunk's
/// output rows of that channel at `y` (the channel's plane, contiguous rows of p.ow), through
/// `ys` (M² rows of ntp).
template <int M, class T>
void winograd_output(const T* m, std::int64_t mstride, const winograd_problem& p, std::int64_t tw, std::int64_t ty0, std::int64_t ty1,
                     std::int64_t ntp, T* ys, T* y) {
  using V = batch<T>;
  using Mat = winograd_matrices<M>;
  constexpr int R = M + 2;
  constexpr std::int64_t W = std::int64_t(V::size);
  const std::int64_t nt = (ty1 - ty0) * tw;
  for (std::int64_t q = 0; q < nt; q += W) {
    V s[M][R];  // A^T m
    for (int j = 0; j < R; ++j) {
      V col[R];
      for (int i = 0; i < R; ++i) col[i] = V::load_aligned(m + (i * R + j) * mstride + q);
      [&]<int... I>(std::integer_sequence<int, I...>) { ((s[I][j] = winograd_row<Mat::at, I, R>(col, 1)), ...); }(std::make_integer_sequence<int, M>());
    }
    for (int i = 0; i < M; ++i)  // (A^T m) A: outputs (M ty + i, M tx + jj)
      [&]<int... J>(std::integer_sequence<int, J...>) {
        ((winograd_row<Mat::at, J, R>(&s[i][0], 1).store_aligned(ys + (i * M + J) * ntp + q)), ...);
      }(std::make_integer_sequence<int, M>());
  }
  // The M phases of output columns interleaved into the output's rows (a loop compilers vectorise).
  const std::int64_t whole = p.ow / M;
  for (std::int64_t r = 0; r < ty1 - ty0; ++r)
    for (std::int64_t i = 0; i < M; ++i) {
      const std::int64_t oy = M * (ty0 + r) + i;
      if (oy >= p.oh) break;
      T* __restrict dst = y + oy * p.ow;
      const T* __restrict src = ys + i * M * ntp + r * tw;
      for (std::int64_t tx = 0; tx < whole; ++tx)
        for (std::int64_t jj = 0; jj < M; ++jj) dst[M * tx + jj] = src[jj * ntp + tx];
      for (std::int64_t jj = 0; M * whole + jj < p.ow; ++jj) dst[M * whole + jj] = src[jj * ntp + whole];
    }
}

/// The convolution of `x` (data at `xd`) with the transformed weight `u` (`winograd_weights`, in
/// this build's layout) into `y` (data at `yd`); `apply(n, c, rs, cs, o, j, m, len)` as for the direct kernel, on
/// each finished block of output channels [o, o + m) and positions [j, j + len) of image n.
template <int M, class T, class Apply>
void conv2d_winograd_packed(const T* xd, const T* u, const winograd_problem& p, T* yd, const Apply& apply) {
  using S = gemm_detail::shape<T>;
  constexpr std::int64_t NR = S::NR, MR = S::MR, P = winograd_points(M);
  const std::int64_t th = (p.oh + M - 1) / M, tw = (p.ow + M - 1) / M;
  const winograd_schedule schedule(th, tw, std::int64_t(num_threads()));
  const std::int64_t max_ntp = (schedule.max_rows() * tw + NR - 1) / NR * NR, padded_o = (p.o + MR - 1) / MR * MR;
  const std::int64_t point_size = packed_b_size(p.c, p.o, native_packed_a_layout<T>(p.c));  // one point's O x C matrix in u
  const gemm_detail::blocking blocks = gemm_detail::current_blocking<T>();
  // Output channels per block: the block's P GEMM results (P x ob x ntp) in at most 1 MB (all of
  // ResNet-18's channels; blocks of 256 KB measured slower on Zen 5).
  const std::int64_t ob = std::min(p.o, std::max(MR, (std::int64_t(1024) << 10) / std::int64_t(sizeof(T)) / (P * max_ntp) / MR * MR));
  // The P results are `ps` = mo * ntp + spread apart: mo * ntp alone is a multiple of 4 KB for
  // most shapes, which put the output transform's P loads of one tile in one set of the L1 cache.
  constexpr std::int64_t spread = 64 / std::int64_t(sizeof(T));
  for (std::int64_t n = 0; n < p.n; ++n) {
    const T* x = xd + n * p.xs[0];
    T* y = yd + n * p.ys[0];
    parallel_for(schedule.parts, [&](std::int64_t part) {
      winograd_buffers<T>& b = winograd_buffers<T>::of_this_thread();
      grow(b.v, P * p.c * max_ntp);
      grow(b.m, P * (ob * max_ntp + spread));
      grow(b.y, M * M * max_ntp);
      schedule.for_each_chunk(part, [&](std::int64_t ty0, std::int64_t ty1) {
        const std::int64_t nt = (ty1 - ty0) * tw, ntp = (nt + NR - 1) / NR * NR;
        winograd_input<M, T>(x, p, tw, ty0, ty1, ntp, b, b.v.data());
        const std::int64_t q0 = M * ty0 * p.ow, q1 = std::min(p.oh, M * ty1) * p.ow;  // the chunk's output positions
        for (std::int64_t o0 = 0; o0 < p.o; o0 += ob) {
          const std::int64_t mo = std::min(ob, p.o - o0), ps = mo * ntp + spread;
          for (std::int64_t xi = 0; xi < P; ++xi) {
            const gemm_detail::prepacked_a<T> a{u + xi * point_size, p.c, padded_o, o0};
            const matrix_view<T> c{b.m.data() + xi * ps, mo, nt, ntp, 1};
            gemm_detail::gemm_rectangle<T>(a, gemm_detail::prepacked<T>{b.v.data() + xi * p.c * ntp, ntp}, c, 0, mo, 0, nt, false, no_epilogue{}, blocks);
          }
          for (std::int64_t o = 0; o < mo; ++o)
            winograd_output<M, T>(b.m.data() + o * ntp, ps, p, tw, ty0, ty1, ntp, b.y.data(), y + (o0 + o) * p.ys[1]);
          apply(n, y + o0 * p.ys[1] + q0, p.ys[1], 1, o0, q0, mo, q1 - q0);
        }
      });
    });
  }
}

}  // namespace kiln::kernels::detail
