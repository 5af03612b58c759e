// SPDX-License-Identifier: Apache-2.0
/// \file
/// The depthwise convolution kernel (one input channel per group, any channel multiplier), which
/// conv2d (`nn.hpp`) runs for such convolutions: a direct kernel per output plane over a
/// zero-padded copy of the input plane (`window_plane.hpp`), vectorised along the output row, in
/// tiles of several rows and vectors with a sum each. 3x3 and 5x5 windows are compiled for their
/// size; at stride 1 each input vector is loaded once for the rows it serves. Groups of planes are
/// shared out by `parallel_for`, written straight into the output where its planes are
/// contiguous, and the epilogue is applied once per group.
#pragma once

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/window_params.hpp>
#include <kiln/kernels/window_plane.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kiln::kernels::detail {

/// One tile of `conv2d_depthwise`: R output rows (from row y) times NV vectors of output
/// columns (from column x), over the window's KH x KW taps (0: the run-time `kh`, `kw`), into
/// R * NV independent sums that start from `bias`, so that the multiply-adds of a tile do not
/// wait on each other's latency (one sum per vector, as a plain loop keeps, waits about four
/// cycles per tap). With `Unit` (stride 1, no dilation, a compile-time KH) each input vector is
/// loaded once for the up to KH rows of the tile that read it: (R + KH - 1) * KW loads for
/// R * KH * KW multiply-adds, not one load each. Row r of the tile goes to `out + r * pitch`; a
/// vector that would run past `limit` (the end of the output plane) is stored in part.
template <class T, std::int64_t KH, std::int64_t KW, std::int64_t R, std::int64_t NV, bool Unit>
KILN_GEMM_KERNEL_INLINE void depthwise_tile(const window_plane<T>& plane, const T* k, T bias, const std::int64_t* taps, std::int64_t kh,
                                            std::int64_t kw, std::int64_t sh, std::int64_t dh, std::int64_t y, std::int64_t x, T* out,
                                            std::int64_t pitch, const T* limit) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  if constexpr (KH != 0) kh = KH;
  if constexpr (KW != 0) kw = KW;
  V acc[R][NV];
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t v = 0; v < NV; ++v) acc[r][v] = V(bias);
  if constexpr (Unit) {
    static_assert(KH != 0 && KW != 0);
    for (std::int64_t q = 0; q < R + KH - 1; ++q) {  // input row y + q serves output rows y + q - i
      const T* in = plane.row(y + q) + x;
      for (std::int64_t j = 0; j < KW; ++j) {
        V a[NV];
        for (std::int64_t v = 0; v < NV; ++v) a[v] = V::load_unaligned(in + taps[j] + v * W);
        for (std::int64_t r = 0; r < R; ++r) {
          const std::int64_t i = q - r;
          if (i < 0 || i >= KH) continue;
          const V w(k[i * KW + j]);
          for (std::int64_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(w, a[v], acc[r][v]);
        }
      }
    }
  } else {
    for (std::int64_t i = 0; i < kh; ++i)
      for (std::int64_t j = 0; j < kw; ++j) {
        const V w(k[i * kw + j]);
        for (std::int64_t r = 0; r < R; ++r) {
          const T* in = plane.row((y + r) * sh + i * dh) + taps[j] + x;
          for (std::int64_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(w, V::load_unaligned(in + v * W), acc[r][v]);
        }
      }
  }
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t v = 0; v < NV; ++v) {
      T* dst = out + r * pitch + v * W;
      if (dst + W <= limit) {
        acc[r][v].store_unaligned(dst);
      } else {
        alignas(64) T tmp[W];
        acc[r][v].store_aligned(tmp);
        std::copy(tmp, tmp + (limit - dst), dst);
      }
    }
}

/// The output rows [y0, y1) of one plane of `conv2d_depthwise`, R at a time, into `out` (OH rows
/// of OW, one after another; `limit` its end). A row's vectors are taken NV at a time from the
/// right: a row whose width is not a whole number of vectors runs its last vector into the next
/// row's first, which the next row's leftmost tile, stored after it, then overwrites.
template <class T, std::int64_t KH, std::int64_t KW, std::int64_t R, std::int64_t NV, bool Unit>
void depthwise_rows(const window_plane<T>& plane, const T* k, T bias, const std::int64_t* taps, std::int64_t kh, std::int64_t kw, std::int64_t sh,
                    std::int64_t dh, std::int64_t y0, std::int64_t y1, std::int64_t ow, T* out, const T* limit) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
  const std::int64_t vectors = (ow + W - 1) / W;
  for (std::int64_t y = y0; y + R <= y1; y += R) {
    std::int64_t v = vectors;
    for (; v >= NV; v -= NV) depthwise_tile<T, KH, KW, R, NV, Unit>(plane, k, bias, taps, kh, kw, sh, dh, y, (v - NV) * W, out + y * ow + (v - NV) * W, ow, limit);
    for (; v > 0; --v) depthwise_tile<T, KH, KW, R, 1, Unit>(plane, k, bias, taps, kh, kw, sh, dh, y, (v - 1) * W, out + y * ow + (v - 1) * W, ow, limit);
  }
}

/// One output plane of `conv2d_depthwise` into `out` (OH rows of OW, one after another), from
/// the padded input plane, plus `bias`. Stride 1 with a 3x3 or 5x5 window takes 4 rows by 2
/// vectors at a time (each input vector loaded once for the rows it serves); otherwise a row of
/// one or two vectors is computed 4 or 2 rows at a time (a 14 x 14 or 7 x 7 plane has one vector
/// per row), a longer one 4 vectors at a time.
template <class T, std::int64_t KH, std::int64_t KW>
void depthwise_plane(const window_plane<T>& plane, const T* k, T bias, const std::int64_t* taps, std::int64_t kh, std::int64_t kw,
                     std::int64_t sh, std::int64_t dh, std::int64_t oh, std::int64_t ow, T* out) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
  const T* limit = out + oh * ow;
  const std::int64_t vectors = (ow + W - 1) / W;
  const auto rows = [&]<std::int64_t R, std::int64_t NV, bool Unit>(std::int64_t y0, std::int64_t y1) {
    depthwise_rows<T, KH, KW, R, NV, Unit>(plane, k, bias, taps, kh, kw, sh, dh, y0, y1, ow, out, limit);
  };
  if constexpr (KH != 0 && KW != 0) {
    if (sh == 1 && dh == 1) {
      const std::int64_t y = oh / 4 * 4;
      rows.template operator()<4, 2, true>(0, y);
      rows.template operator()<1, 2, true>(y, oh);
      return;
    }
  }
  std::int64_t y = 0;
  if (vectors == 1) rows.template operator()<4, 1, false>(0, y = oh / 4 * 4);
  else if (vectors == 2) rows.template operator()<2, 2, false>(0, y = oh / 2 * 2);
  rows.template operator()<1, 4, false>(y, oh);
}

/// Depthwise conv2d (one input channel per group): a direct kernel per output plane, over a
/// zero-padded copy of the input plane whose columns are split by phase (`window_plane`), so
/// that any stride reads consecutive outputs from consecutive addresses. 3x3 and 5x5 windows
/// are compiled for their size (the taps unrolled, the weights in registers); the sums start
/// from the channel's bias (`bias`: one value per output channel `bias_stride` apart, or null).
/// The planes of a group of channels are computed one after another, each plane's rows one
/// after another, straight into the output where its planes are contiguous (else into a buffer),
/// so that the epilogue runs once per group of planes, not per row or plane: its fixed cost per
/// call was most of a 7 x 7 plane's time. The groups are shared out by `parallel_for`.
template <class T, class Apply>
void conv2d_depthwise(const tensor& x, const tensor& wt, const T* bias, std::int64_t bias_stride, const conv2d_params& p, const conv_geometry& g,
                      const tensor& out, const Apply& apply) {
  const T* xb = static_cast<const T*>(x.data());
  const T* wb = static_cast<const T*>(wt.data());
  T* ob = static_cast<T*>(out.data());
  const auto& xs = x.strides();
  const auto& os = out.strides();
  const std::int64_t sh = p.strides[0], sw = p.strides[1], dh = p.dilation[0], dw = p.dilation[1];
  const std::int64_t hp = g.h + p.padding[0] + p.padding[2], wp = g.w + p.padding[1] + p.padding[3];
  const std::int64_t positions = g.oh * g.ow;
  const bool contiguous_plane = os[3] == 1 && (os[2] == g.ow || g.oh == 1);
  const auto plane_kernel = g.kh == 3 && g.kw == 3   ? &depthwise_plane<T, 3, 3>
                            : g.kh == 5 && g.kw == 5 ? &depthwise_plane<T, 5, 5>
                                                     : &depthwise_plane<T, 0, 0>;
  // Channels per group: about 2,048 outputs (at most 16 planes), and at least four groups per
  // thread where there are channels enough.
  const std::int64_t threads = std::int64_t(num_threads());
  const std::int64_t per_group = std::clamp<std::int64_t>(std::min(2048 / std::max<std::int64_t>(positions, 1), g.o / (4 * threads)), 1, 16);
  const std::int64_t groups = (g.o + per_group - 1) / per_group;
  parallel_for(g.n * groups, [&](std::int64_t t) {
    const std::int64_t n = t / groups, o0 = t % groups * per_group, m = std::min(per_group, g.o - o0);
    thread_local window_plane<T> plane;
    // The planes of the group: the output's where they are contiguous (the epilogue then runs in
    // place), else a buffer copied out afterwards.
    T* const dst = ob + n * os[0] + o0 * os[1];
    const bool in_place = contiguous_plane && (os[1] == positions || m == 1);
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> buffer;
    if (!in_place) grow(buffer, m * positions);
    T* const planes = in_place ? dst : buffer.data();
    // Where each window column starts in a built plane: the same for every plane of the call.
    thread_local std::vector<std::int64_t> taps;
    for (std::int64_t o = o0; o < o0 + m; ++o) {
      const std::int64_t c = o / g.og;
      if (o == o0 || o % g.og == 0)  // a channel multiplier above 1 reads each input plane for several outputs
        plane.build(xb + n * xs[0] + c * xs[1], g.h, g.w, xs[2], xs[3], p.padding[0], p.padding[1], hp, wp, sw, T(0));
      if (o == o0) plane.taps(g.kw, dw, taps);
      plane_kernel(plane, wb + o * g.kh * g.kw, bias ? bias[o * bias_stride] : T(0), taps.data(), g.kh, g.kw, sh, dh, g.oh, g.ow,
                   planes + (o - o0) * positions);
    }
    apply(n, planes, positions, 1, o0, 0, m, positions);
    if (!in_place)
      for (std::int64_t q = 0; q < m; ++q)
        for (std::int64_t y = 0; y < g.oh; ++y) store_row(planes + q * positions + y * g.ow, g.ow, dst + q * os[1] + y * os[2], os[3]);
  });
}

}  // namespace kiln::kernels::detail
