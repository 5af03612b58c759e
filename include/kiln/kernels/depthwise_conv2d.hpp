// SPDX-License-Identifier: Apache-2.0
/// \file
/// The depthwise convolution kernel (one input channel per group, any channel multiplier), which
/// conv2d (`nn.hpp`) runs for such convolutions, one output plane at a time:
/// - at stride 1 or 2 with a 3x3 or 5x5 window padded by half its size, in the flat form
///   (`depthwise_flat_plane`): the plane's positions a vector at a time straight through its rows,
///   each tap read from the input's phase planes, the taps whose column falls outside the row
///   masked off, so that narrow planes (14 x 14, 7 x 7) fill every lane;
/// - otherwise over a zero-padded copy of the input plane (`window_plane.hpp`), vectorised along
///   the output row, in tiles of several rows and vectors with a sum each (3x3 and 5x5 compiled
///   for their size; at stride 1 each input vector loaded once for the rows it serves).
/// Groups of planes are shared out by `parallel_for`, written straight into the output where its
/// planes are contiguous. The epilogue is applied to each vector as it is stored where it is a
/// bias and relu, clip or nothing (`register_epilogue`), else once per group.
#pragma once

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/register_epilogue.hpp>
#include <kiln/kernels/window_params.hpp>
#include <kiln/kernels/window_plane.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

namespace kiln::kernels::detail {

/// Stores vector `v` at `out + at`, or, where it would run past `out + end`, the part before it
/// (none when `at` is at or past `end`). Offsets, not pointers, so that nothing forms an address
/// past the output's end.
template <class V, class T>
__attribute__((always_inline)) inline void store_until(const V& v, T* out, std::int64_t at, std::int64_t end) {
  constexpr std::int64_t W = std::int64_t(V::size);
  if (at + W <= end) {
    v.store_unaligned(out + at);
  } else if (at < end) {
    alignas(64) T tmp[W];
    v.store_aligned(tmp);
    std::copy(tmp, tmp + (end - at), out + at);
  }
}

/// One tile of `conv2d_depthwise`: R output rows (from row y) times NV vectors of output
/// columns (from column x), over the window's KH x KW taps (0: the run-time `kh`, `kw`), into
/// R * NV independent sums that start from `bias`, so that the multiply-adds of a tile do not
/// wait on each other's latency (one sum per vector, as a plain loop keeps, waits about four
/// cycles per tap). With `Unit` (stride 1, no dilation, a compile-time KH) each input vector is
/// loaded once for the up to KH rows of the tile that read it: (R + KH - 1) * KW loads for
/// R * KH * KW multiply-adds, not one load each. The sums are finished by `fin` (the plane's
/// epilogue in registers, at its row 0) as they are stored. Row r of the tile goes to
/// `out + r * pitch`; a vector that would run past `limit` (the end of the output plane) is
/// stored in part.
template <class T, std::int64_t KH, std::int64_t KW, std::int64_t R, std::int64_t NV, bool Unit>
KILN_GEMM_KERNEL_INLINE void depthwise_tile(const window_plane<T>& plane, const T* k, T bias, const register_epilogue<T>& fin, const std::int64_t* taps,
                                            std::int64_t kh, std::int64_t kw, std::int64_t sh, std::int64_t dh, std::int64_t y, std::int64_t x,
                                            T* out, std::int64_t pitch, const T* limit) {
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
      store_until(fin(acc[r][v], 0), out, r * pitch + v * W, limit - out);
    }
}

/// The output rows [y0, y1) of one plane of `conv2d_depthwise`, R at a time, into `out` (OH rows
/// of OW, one after another; `limit` its end). A row's vectors are taken NV at a time from the
/// right: a row whose width is not a whole number of vectors runs its last vector into the next
/// row's first, which the next row's leftmost tile, stored after it, then overwrites.
template <class T, std::int64_t KH, std::int64_t KW, std::int64_t R, std::int64_t NV, bool Unit>
void depthwise_rows(const window_plane<T>& plane, const T* k, T bias, const register_epilogue<T>& fin, const std::int64_t* taps, std::int64_t kh,
                    std::int64_t kw, std::int64_t sh, std::int64_t dh, std::int64_t y0, std::int64_t y1, std::int64_t ow, T* out, const T* limit) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
  const std::int64_t vectors = (ow + W - 1) / W;
  for (std::int64_t y = y0; y + R <= y1; y += R) {
    std::int64_t v = vectors;
    for (; v >= NV; v -= NV)
      depthwise_tile<T, KH, KW, R, NV, Unit>(plane, k, bias, fin, taps, kh, kw, sh, dh, y, (v - NV) * W, out + y * ow + (v - NV) * W, ow, limit);
    for (; v > 0; --v)
      depthwise_tile<T, KH, KW, R, 1, Unit>(plane, k, bias, fin, taps, kh, kw, sh, dh, y, (v - 1) * W, out + y * ow + (v - 1) * W, ow, limit);
  }
}

/// One output plane of `conv2d_depthwise` into `out` (OH rows of OW, one after another), from
/// the padded input plane, plus `bias`, finished by `fin`. Stride 1 with a 3x3 or 5x5 window takes 4 rows by 2
/// vectors at a time (each input vector loaded once for the rows it serves); otherwise a row of
/// one or two vectors is computed 4 or 2 rows at a time (a 14 x 14 or 7 x 7 plane has one vector
/// per row), a longer one 4 vectors at a time.
template <class T, std::int64_t KH, std::int64_t KW>
void depthwise_plane(const window_plane<T>& plane, const T* k, T bias, const register_epilogue<T>& fin, const std::int64_t* taps, std::int64_t kh,
                     std::int64_t kw, std::int64_t sh, std::int64_t dh, std::int64_t oh, std::int64_t ow, T* out) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
  const T* limit = out + oh * ow;
  const std::int64_t vectors = (ow + W - 1) / W;
  const auto rows = [&]<std::int64_t R, std::int64_t NV, bool Unit>(std::int64_t y0, std::int64_t y1) {
    depthwise_rows<T, KH, KW, R, NV, Unit>(plane, k, bias, fin, taps, kh, kw, sh, dh, y0, y1, ow, out, limit);
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

/// Floor division for the small signed offsets of a window's taps.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// The flat form of a depthwise convolution at stride S (1 or 2) with a KH x KW window (odd
/// sizes) and padding KH / 2, KW / 2 on an input S times the output's size. Its input is S * S
/// phase planes, each of the output's size (oh x ow) and stored flat, row after row: phase (a, b)
/// holds input rows a, a + S, ... and columns b, b + S, .... Tap (i, j) of output position q (row
/// y, column x) is input (S * y + i - KH / 2, S * x + j - KW / 2): phase
/// ((i - KH / 2) mod S, (j - KW / 2) mod S) at position q + dy * ow + dx, with dy, dx the taps'
/// offsets divided by S, rounded down. So every tap reads consecutive outputs from consecutive
/// addresses, whatever the row width: the plane is taken `W` positions at a time straight through
/// its rows, and a 7 x 7 or 14 x 14 plane fills every lane of its vectors. Rows above and below
/// the plane read the zeros around each phase plane; a tap whose column falls outside the row
/// reads the neighbouring row, and is masked off by its column.
template <std::int64_t S, std::int64_t KH, std::int64_t KW>
struct flat_window {
  static_assert(S >= 1 && KH % 2 == 1 && KW % 2 == 1, "the flat depthwise form takes odd windows");
  static constexpr std::int64_t top = KH / 2, left = KW / 2;
  static constexpr std::int64_t phase(std::int64_t i, std::int64_t j) { return (i - top - S * floor_div(i - top, S)) * S + (j - left - S * floor_div(j - left, S)); }
  static constexpr std::int64_t dy(std::int64_t i) { return floor_div(i - top, S); }
  static constexpr std::int64_t dx(std::int64_t j) { return floor_div(j - left, S); }
  };

/// NV vectors of outputs of `depthwise_flat_plane`, from output position q: the sums of each
/// window column kept apart (KW sums per vector, so that the multiply-adds of a vector do not
/// wait on each other), then added with the columns that fall outside the row masked off, and
/// finished by `fin` as they are stored. `cols` holds each position's column (q mod ow).
template <class T, std::int64_t S, std::int64_t KH, std::int64_t KW, std::int64_t NV>
KILN_GEMM_KERNEL_INLINE void depthwise_flat_tile(const T* in, std::int64_t phase_pitch, const T* cols, const T* k, T bias,
                                                 const register_epilogue<T>& fin, std::int64_t ow, std::int64_t q, T* out, const T* limit) {
  using V = batch<T>;
  using F = flat_window<S, KH, KW>;
  constexpr std::int64_t W = std::int64_t(V::size);
  V acc[KW][NV];
  for (std::int64_t j = 0; j < KW; ++j)
    for (std::int64_t v = 0; v < NV; ++v) acc[j][v] = V(j == F::left ? bias : T(0));
  for (std::int64_t i = 0; i < KH; ++i)
    for (std::int64_t j = 0; j < KW; ++j) {
      const V wt(k[i * KW + j]);
      const T* src = in + F::phase(i, j) * phase_pitch + q + F::dy(i) * ow + F::dx(j);
      for (std::int64_t v = 0; v < NV; ++v) acc[j][v] = xsimd::fma(wt, V::load_unaligned(src + v * W), acc[j][v]);
    }
  for (std::int64_t v = 0; v < NV; ++v) {
    const V x = V::load_aligned(cols + q + v * W);
    V r = acc[F::left][v];
    for (std::int64_t j = 0; j < KW; ++j) {
      if (j == F::left) continue;
      if (F::dx(j) == 0) {
        r += acc[j][v];
      } else {  // column x + dx of the row: inside it for x >= -dx (dx < 0) or x < ow - dx
        const auto inside = F::dx(j) < 0 ? x >= V(T(-F::dx(j))) : x < V(T(ow - F::dx(j)));
        r += xsimd::select(inside, acc[j][v], V(T(0)));
      }
    }
    store_until(fin(r, 0), out, q + v * W, limit - out);
  }
}

/// One output plane (oh * ow = `positions`) of the flat form into `out`, two vectors at a time,
/// finished by `fin`.
/// `in` is the first of the S * S phase planes, `phase_pitch` apart, each at its first position
/// (the zeros before it at negative offsets). The last vector may store up to `limit`: the
/// group's later planes, written after this one.
template <class T, std::int64_t S, std::int64_t KH, std::int64_t KW>
void depthwise_flat_plane(const T* in, std::int64_t phase_pitch, const T* cols, const T* k, T bias, const register_epilogue<T>& fin, std::int64_t ow,
                          std::int64_t positions, T* out, const T* limit) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
  std::int64_t q = 0;
  for (; q + 2 * W <= positions; q += 2 * W) depthwise_flat_tile<T, S, KH, KW, 2>(in, phase_pitch, cols, k, bias, fin, ow, q, out, limit);
  for (; q < positions; q += W) depthwise_flat_tile<T, S, KH, KW, 1>(in, phase_pitch, cols, k, bias, fin, ow, q, out, limit);
}

/// even[t] = in[2 t], odd[t] = in[2 t + 1] for t < W (one vector of each; reads 2 W elements):
/// two loads and `deinterleave`.
template <class T>
__attribute__((always_inline)) inline void deinterleave_vector(const T* in, T* even, T* odd) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
  batch<T> e, o;
  deinterleave(batch<T>::load_unaligned(in), batch<T>::load_unaligned(in + W), e, o);
  e.store_unaligned(even);
  o.store_unaligned(odd);
}

/// Copies the h x w plane `src` (strides sh, sw) into the S * S phase planes of the flat form
/// (`depthwise_flat_plane`): phase (a, b) at `phases + (a * S + b) * pitch`, each oh x ow with
/// oh = h / S, ow = w / S. The zeros around them are the caller's. At stride 2 a row's two
/// phases are split a whole number of vectors at a time (`deinterleave_vector`), running past
/// the row's end into the rows after it, which are written later, wherever the reads stay inside
/// the plane and the writes inside the phase plane; other rows element by element.
template <class T, std::int64_t S>
void build_phase_planes(const T* src, std::int64_t h, std::int64_t w, std::int64_t sh, std::int64_t sw, T* phases, std::int64_t pitch) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
  const std::int64_t oh = h / S, ow = w / S;
  if (S == 1 && sw == 1 && (sh == w || h == 1)) {
    std::copy_n(src, h * w, phases);
    return;
  }
  const std::int64_t chunk = (ow + W - 1) / W * W;
  for (std::int64_t y = 0; y < h; ++y) {
    const T* in = src + y * sh;
    const std::int64_t r = y / S;
    T* row = phases + (y % S) * S * pitch + r * ow;
    if (S == 2 && sw == 1 && sh >= w && y * sh + 2 * chunk <= (h - 1) * sh + w && r * ow + chunk <= oh * ow) {
      for (std::int64_t m = 0; m < chunk; m += W) deinterleave_vector(in + 2 * m, row + m, row + pitch + m);
    } else {
      for (std::int64_t x = 0; x < w; ++x) row[(x % S) * pitch + x / S] = in[x * sw];
    }
  }
}

/// The flat form's kernel for a call's geometry, or null where it does not apply: strides 1 or 2
/// (both the same), no dilation, a 3x3 or 5x5 window padded by half its size, and an input
/// exactly S times the output's size.
template <class T>
auto flat_depthwise_kernel(const conv2d_params& p, const conv_geometry& g) -> decltype(&depthwise_flat_plane<T, 1, 3, 3>) {
  const std::int64_t s = p.strides[0];
  if (p.strides[1] != s || (s != 1 && s != 2) || p.dilation[0] != 1 || p.dilation[1] != 1) return nullptr;
  if (g.kh != g.kw || (g.kh != 3 && g.kh != 5) || p.padding[0] != g.kh / 2 || p.padding[1] != g.kw / 2) return nullptr;
  if (g.h != s * g.oh || g.w != s * g.ow) return nullptr;
  if (s == 1) return g.kh == 3 ? &depthwise_flat_plane<T, 1, 3, 3> : &depthwise_flat_plane<T, 1, 5, 5>;
  return g.kh == 3 ? &depthwise_flat_plane<T, 2, 3, 3> : &depthwise_flat_plane<T, 2, 5, 5>;
}

/// Depthwise conv2d (one input channel per group): a direct kernel per output plane, over a
/// zero-padded copy of the input plane whose columns are split by phase (`window_plane`), so
/// that any stride reads consecutive outputs from consecutive addresses. 3x3 and 5x5 windows
/// are compiled for their size (the taps unrolled, the weights in registers); the sums start
/// from the channel's bias (`bias`: one value per output channel `bias_stride` apart, or null).
/// The planes of a group of channels are computed one after another, each plane's rows one
/// after another, straight into the output where its planes are contiguous (else into a buffer),
/// so that the epilogue runs once per group of planes, not per row or plane: its fixed cost per
/// call was most of a 7 x 7 plane's time. Where the epilogue offers image n's work in registers
/// (`register_form(n)`: a bias per channel and relu, clip or nothing), the kernels apply it to
/// each vector as they store it, and the pass is left out (on MobileNet-V2's ReLU6 it cost about a
/// third of the convolution). The groups are shared out by `parallel_for`.
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
  const auto flat_kernel = flat_depthwise_kernel<T>(p, g);
  // Channels per group: about 2,048 outputs (at most 16 planes), and at least four groups per
  // thread where there are channels enough.
  const std::int64_t threads = std::int64_t(num_threads());
  const std::int64_t per_group = std::clamp<std::int64_t>(std::min(2048 / std::max<std::int64_t>(positions, 1), g.o / (4 * threads)), 1, 16);
  const std::int64_t groups = (g.o + per_group - 1) / per_group;
  const auto group = [&](std::int64_t t) {
    const std::int64_t n = t / groups, o0 = t % groups * per_group, m = std::min(per_group, g.o - o0);
    thread_local window_plane<T> plane;
    // The planes of the group: the output's where they are contiguous (the epilogue then runs in
    // place), else a buffer copied out afterwards.
    T* const dst = ob + n * os[0] + o0 * os[1];
    const bool in_place = contiguous_plane && (os[1] == positions || m == 1);
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> buffer;
    if (!in_place) grow(buffer, m * positions);
    T* const planes = in_place ? dst : buffer.data();
    // The epilogue in registers, where it can be, else a finish that changes nothing.
    std::optional<register_epilogue<T>> fused;
    if constexpr (offers_image_register_form<Apply, T>) fused = apply.register_form(n);
    const register_epilogue<T> fin = fused ? *fused : register_epilogue<T>{};
    if (flat_kernel) {
      // Each position's column, and the phase planes with their zeros: kept from call to call
      // while the geometry stays (the planes' contents are overwritten, their zeros are not).
      constexpr std::int64_t W = std::int64_t(batch<T>::size);
      thread_local prepared_buffer<T, 4> phase_buffer, col_buffer;
      const std::int64_t padded = (positions + W - 1) / W * W;
      const std::int64_t reach = (g.kh / 2 + sh - 1) / sh;  // rows and columns the taps reach around a phase plane
      const std::int64_t lead = reach * g.ow + reach;
      const std::int64_t pitch = lead + padded + lead;
      const std::array<std::int64_t, 4> key{g.ow, positions, lead, sh};
      const T* const cols = col_buffer.get(padded, key, [&](T* c) { flat_columns(c, padded, g.ow); });
      T* const phases = phase_buffer.get(sh * sh * pitch + W, key, [&](T* b) { std::fill_n(b, sh * sh * pitch + W, T(0)); });
      for (std::int64_t o = o0; o < o0 + m; ++o) {
        if (o == o0 || o % g.og == 0) {
          const T* const src = xb + n * xs[0] + o / g.og * xs[1];
          if (sh == 1) build_phase_planes<T, 1>(src, g.h, g.w, xs[2], xs[3], phases + lead, pitch);
          else build_phase_planes<T, 2>(src, g.h, g.w, xs[2], xs[3], phases + lead, pitch);
        }
        flat_kernel(phases + lead, pitch, cols, wb + o * g.kh * g.kw, bias ? bias[o * bias_stride] : T(0), fin.from_row(o), g.ow,
                    positions, planes + (o - o0) * positions, planes + m * positions);
      }
    }
    // Where each window column starts in a built plane: the same for every plane of the call.
    thread_local std::vector<std::int64_t> taps;
    for (std::int64_t o = o0; o < o0 + m && !flat_kernel; ++o) {
      const std::int64_t c = o / g.og;
      if (o == o0 || o % g.og == 0)  // a channel multiplier above 1 reads each input plane for several outputs
        plane.build(xb + n * xs[0] + c * xs[1], g.h, g.w, xs[2], xs[3], p.padding[0], p.padding[1], hp, wp, sw, T(0));
      if (o == o0) plane.taps(g.kw, dw, taps);
      plane_kernel(plane, wb + o * g.kh * g.kw, bias ? bias[o * bias_stride] : T(0), fin.from_row(o), taps.data(), g.kh, g.kw, sh, dh, g.oh,
                   g.ow, planes + (o - o0) * positions);
    }
    if (!fused) apply(n, planes, positions, 1, o0, 0, m, positions);
    if (!in_place)
      for (std::int64_t q = 0; q < m; ++q)
        for (std::int64_t y = 0; y < g.oh; ++y) store_row(planes + q * positions + y * g.ow, g.ow, dst + q * os[1] + y * os[2], os[3]);
  };
  // Each thread takes one contiguous range of groups, the same on every call (thread 0 the
  // first): the channels a 1x1 convolution before it wrote on the same thread, when that one cut
  // its output channels into ranges (`gemm_packed`), are read from the same core's cache.
  const std::int64_t tasks = g.n * groups, parts = std::min(tasks, threads);
  parallel_for(parts, [&](std::int64_t part) {
    for (std::int64_t t = part * tasks / parts; t < (part + 1) * tasks / parts; ++t) group(t);
  });
}

}  // namespace kiln::kernels::detail
