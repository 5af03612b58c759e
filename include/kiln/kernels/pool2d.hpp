// SPDX-License-Identifier: Apache-2.0
/// \file
/// Pooling on NCHW tensors (the IR's `nn.max_pool2d`, `nn.avg_pool2d`, `nn.adaptive_avg_pool2d`
/// and `nn.global_avg_pool2d`):
///
///     tensor m = kernels::max_pool2d(y, {.pool_size = {3, 3}, .strides = {2, 2}, .padding = {1, 1, 1, 1}});
///     tensor g = kernels::global_avg_pool2d(m);            // [N, C, 1, 1]
///
/// Pooling is separable: per output row, the window's input rows are combined column by column
/// into one padded row (padding -inf for max, 0 for average), whose columns, split into s phases
/// for a horizontal stride s, the window then combines into the output row, vectorised along it.
/// `ceil_mode`, `count_include_pad` and the empty windows follow PyTorch (`nn.hpp`'s file comment).
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/ops.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/reduce.hpp>
#include <kiln/kernels/transform.hpp>
#include <kiln/kernels/window_params.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

namespace kiln::kernels {

namespace detail {

struct pool_geometry {
  std::int64_t n, c, h, w, oh, ow;
};

KILN_DECL pool_geometry check_pool2d(std::string_view op, const tensor& x, const pool2d_params& p, bool floating_only);

/// Per output position along one axis, how many window taps fall in [lo, hi).
KILN_DECL std::vector<std::int64_t> tap_counts(std::int64_t out, std::int64_t k, std::int64_t stride, std::int64_t dilation,
                                               std::int64_t pad, std::int64_t lo, std::int64_t hi);

/// A float max pool at stride 1 whose output has the input's size (a KH x KW window padded by
/// KH - 1 rows and KW - 1 columns in all: GoogLeNet's 3x3 branch pools), on a small plane stored
/// flat, straight through its rows a vector of positions at a time, so that a 7 x 7 or 14 x 14
/// plane fills every lane of its vectors. The plane is copied between rows of `fill` (the window's
/// rows above and below it); tap (i, j) of position p then reads the copy at p + i dh w + j dw -
/// left, a column outside the row (the neighbouring row's element) masked off by the position's
/// column. Returns whether the plane may hold a NaN (the plain maximum may drop one): the sum of
/// its elements, taken on the side, is NaN. The caller then does the plane again exactly.
template <class T>
bool max_pool_same_plane(const T* in, std::int64_t h, std::int64_t w, std::int64_t kh, std::int64_t kw, std::int64_t top,
                         std::int64_t left, std::int64_t dh, std::int64_t dw, T* out) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  const T fill = -std::numeric_limits<T>::infinity();
  const std::int64_t positions = h * w;
  // The copy: W elements before it (the first taps' columns reach `left` before the plane), the
  // rows above, the plane, the rows below, and as far as the last vector's taps reach.
  const std::int64_t lead = W + left, first = lead + top * w, size = first + (h + kh) * dh * w + 2 * W + kw * dw;
  thread_local prepared_buffer<T, 4> copy_buffer;
  thread_local prepared_buffer<T, 2> col_buffer;
  // The rows of `fill` around the plane's place are never written: filled once per geometry.
  T* const c = copy_buffer.get(size, {first, positions, size, w}, [&](T* b) { std::fill_n(b, size, fill); }) + first;
  const T* const cols = col_buffer.get(positions + W, {positions, w}, [&](T* b) { flat_columns(b, positions + W, w); });
  V sum(T(0));
  if (positions >= W) {
    std::int64_t q = 0;
    for (; q + W <= positions; q += W) {
      const V v = V::load_unaligned(in + q);
      sum += v;
      v.store_unaligned(c + q);
    }
    if (q < positions) {  // the last elements: one vector overlapping the one before
      const V v = V::load_unaligned(in + positions - W);
      sum += v;
      v.store_unaligned(c + positions - W);
    }
  } else {
    for (std::int64_t q = 0; q < positions; ++q) c[q] = in[q];
    sum += V::load_unaligned(c);  // (followed by rows of -inf: a NaN still shows)
  }
  const T* const base = c - top * w - left;  // tap (0, 0) of position 0
  const auto vector_at = [&](std::int64_t q) {
    const V col = V::load_unaligned(cols + q);
    V r(fill);
    for (std::int64_t j = 0; j < kw; ++j) {
      V m(fill);
      for (std::int64_t i = 0; i < kh; ++i) m = xsimd::max(m, V::load_unaligned(base + q + i * dh * w + j * dw));
      const std::int64_t dx = j * dw - left;  // column x + dx of the row
      if (dx < 0) m = xsimd::select(col >= V(T(-dx)), m, V(fill));
      else if (dx > 0) m = xsimd::select(col < V(T(w - dx)), m, V(fill));
      r = xsimd::max(r, m);
    }
    return r;
  };
  if (positions >= W) {
    std::int64_t q = 0;
    for (; q + W <= positions; q += W) vector_at(q).store_unaligned(out + q);
    if (q < positions) vector_at(positions - W).store_unaligned(out + positions - W);  // overlapping the one before
  } else {
    alignas(64) T tmp[W];
    vector_at(0).store_aligned(tmp);
    std::copy(tmp, tmp + positions, out);
  }
  return xsimd::any(xsimd::isnan(sum));
}

/// The rows of output row y's window that lie inside the input (h rows, `row_stride` apart, from
/// `plane`; `top` padding rows before them): their starts into `rows`, and how many there are.
template <class T>
std::int64_t window_rows(const T* plane, std::int64_t h, std::int64_t row_stride, std::int64_t y, std::int64_t kh, std::int64_t sh, std::int64_t dh,
                         std::int64_t top, const T** rows) {
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < kh; ++i)
    if (const std::int64_t r = y * sh + i * dh - top; r >= 0 && r < h) rows[count++] = plane + r * row_stride;
  return count;
}

/// One plane of a float max pool three columns wide at horizontal stride 2 (kw = 3, sw = 2,
/// dw = 1: the 3 x 3 / 2 pools of ResNet, SqueezeNet, GoogLeNet and DenseNet; kh <= 8), straight
/// from the input's rows (h x w, `row_stride` apart, contiguous), `top` and `left` padding before
/// them, into the oh x ow output plane (`out_stride` apart). Per output row, W outputs from x0
/// take their window's columns s = 2 x0 - left .. s + 2 W: the window's rows' vectors at s,
/// s + W and s + 2 W combined down the rows, the first two `deinterleave`d into the first two
/// taps, the third tap the even lanes one lane along (`shift_one`, which takes the third vector's
/// first lane). The third vector is the next W outputs' first: 2 loads per row, 3 permutes per W
/// outputs, no copy of the row. The loads reach W - 1 elements past the window (into the next
/// rows): a vector runs where they stay before `x_end` (one past the input's last element), and a
/// row of fewer than W outputs stores only its own lanes. Outputs whose window crosses the row's
/// ends (padding, ceil mode) take the NaN-propagating maximum, element by element. The plain
/// vector maximum may drop a NaN: the loaded values are summed on the side, and the result says
/// whether that sum came out NaN (the caller then redoes the plane exactly).
template <class T>
bool max_pool_3s2_plane(const T* plane, std::int64_t h, std::int64_t w, std::int64_t row_stride, std::int64_t kh, std::int64_t sh, std::int64_t dh,
                        std::int64_t top, std::int64_t left, std::int64_t oh, std::int64_t ow, const T* x_end, T* out, std::int64_t out_stride) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  // Outputs [x_lo, x_hi) of a row have their whole window inside it.
  const std::int64_t x_lo = std::min(ow, (left + 1) / 2), x_hi = w - 3 + left >= 0 ? std::clamp((w - 3 + left) / 2 + 1, x_lo, ow) : x_lo;
  V sum0(T(0)), sum1(T(0)), sum2(T(0));
  const T* rows[8];
  for (std::int64_t y = 0; y < oh; ++y, out += out_stride) {
    const std::int64_t count = window_rows(plane, h, row_stride, y, kh, sh, dh, top, rows);
    const std::int64_t readable = count > 0 ? x_end - rows[count - 1] : 0;  // from each row's start (the last row's is the least)
    const auto scalar = [&](std::int64_t x) {
      T s = -std::numeric_limits<T>::infinity();
      for (std::int64_t col = std::max<std::int64_t>(0, 2 * x - left); col < std::min(w, 2 * x - left + 3); ++col)
        for (std::int64_t r = 0; r < count; ++r) s = ops::maximum{}(s, rows[r][col]);
      out[x] = s;
    };
    const auto fits = [&](std::int64_t x0) { return 2 * x0 - left + 3 * W <= readable; };
    // The window's rows' vectors at column c, combined; their sum added into `total`.
    const auto column = [&](std::int64_t c, V& total) __attribute__((always_inline)) {
      V m = V::load_unaligned(rows[0] + c), t = m;
      for (std::int64_t r = 1; r < count; ++r) {
        const V v = V::load_unaligned(rows[r] + c);
        m = xsimd::max(m, v);
        t += v;
      }
      total += t;
      return m;
    };
    // n <= W outputs from x0, given the combination of the first vector; returns the third's.
    const auto outputs = [&](std::int64_t x0, const V& a, std::int64_t n) __attribute__((always_inline)) {
      const std::int64_t s = 2 * x0 - left;
      const V b = column(s + W, sum1), e = column(s + 2 * W, sum2);
      V even, odd;
      deinterleave(a, b, even, odd);
      const V v = xsimd::max(xsimd::max(even, odd), shift_one(even, e));
      if (n == W) v.store_unaligned(out + x0);
      else store_lanes(v, 0, n, out + x0);
      return e;
    };
    std::int64_t x = 0;
    for (; x < x_lo; ++x) scalar(x);
    if (count > 0 && x < x_hi && fits(x)) {
      if (x_hi - x < W) {  // a short row: one vector, its own lanes stored
        (void)outputs(x, column(2 * x - left, sum0), x_hi - x);
        x = x_hi;
      } else {
        V a = column(2 * x - left, sum0);
        for (; x + W <= x_hi && fits(x); x += W) a = outputs(x, a, W);
        if (x < x_hi && fits(x_hi - W)) {  // the last ones: a vector overlapping the one before
          (void)outputs(x_hi - W, column(2 * (x_hi - W) - left, sum0), W);
          x = x_hi;
        }
      }
    }
    for (; x < ow; ++x) scalar(x);
  }
  return xsimd::any(xsimd::isnan(sum0 + sum1 + sum2));
}

/// max_pool2d (Max) or avg_pool2d, separably: for each output row, the window's input rows are
/// first combined column by column into one padded row (`line`: contiguous vector loads, no
/// copy of the plane), which the window's columns then combine into the output row. Pooling
/// reads each input row about kh / sh times and does kh + kw combinations per output instead of
/// kh * kw. For a horizontal stride s the combined row is split into s phases first, so that
/// the columns' step vectorises as well (padded column q at (q % s) * phase + q / s). Each step
/// runs over a band of output rows (about 16 KB of them) before the next, so that no vector load
/// spans two stores that have not reached the cache. A row shorter than a vector is read a vector
/// at a time into the rows after it while that stays inside x. A float max pool at stride 1 that
/// keeps a small plane's size runs on the plane stored flat instead (`max_pool_same_plane`), and
/// a float max pool three columns wide at stride 2 straight from its rows (`max_pool_3s2_plane`).
///
/// Float max takes the plain maximum, which may drop a NaN, while it sums the inputs it reads on
/// the side; a plane whose sum comes out NaN (a NaN input, or rarely infinities of both signs)
/// is done again with the NaN-propagating `maximum`.
template <class T, bool Max>
void pool2d(const tensor& x, const pool2d_params& p, const pool_geometry& g, const tensor& out) {
  using V = batch<T>;
  constexpr bool vectorized = ops::is_simd_type<T> && (Max || std::is_floating_point_v<T>);
  constexpr bool float_max = Max && std::is_floating_point_v<T>;
  constexpr std::int64_t W = vectorized ? std::int64_t(V::size) : 1;
  const T fill =
      Max ? (std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest())
          : T(0);
  const std::int64_t kh = p.pool_size[0], kw = p.pool_size[1], sh = p.strides[0], sw = p.strides[1], dh = p.dilation[0],
                     dw = p.dilation[1];
  const std::int64_t top = p.padding[0], left = p.padding[1];
  // The padded row covers every window, ceil-mode ones included; `span` elements per phase copy
  // leave room for the output loop's last vectors, which run past the row.
  const std::int64_t wp = std::max(g.w + left + p.padding[3], (g.ow - 1) * sw + (kw - 1) * dw + 1);
  // (Whole vectors, so that the split by phase runs in whole vectors too.)
  const std::int64_t phase = ((wp + sw - 1) / sw + W - 1) / W * W, span = sw * phase + 4 * W;
  // Output rows per band (below): their rows of the steps within about 16 KB.
  const std::int64_t band = std::clamp<std::int64_t>(std::int64_t(16384 / sizeof(T)) / (2 * span), 1, 16);
  std::vector<T> inv_h, inv_w;  // avg: 1 / divisor, factored per axis
  if constexpr (!Max) {
    const bool inc = p.count_include_pad;
    const auto ch = tap_counts(g.oh, kh, sh, dh, p.padding[0], inc ? -p.padding[0] : 0, inc ? g.h + p.padding[2] : g.h);
    const auto cw = tap_counts(g.ow, kw, sw, dw, p.padding[1], inc ? -p.padding[1] : 0, inc ? g.w + p.padding[3] : g.w);
    for (auto c : ch) inv_h.push_back(T(1) / T(c));
    for (auto c : cw) inv_w.push_back(T(1) / T(c));
  }
  std::vector<std::int64_t> taps(static_cast<std::size_t>(kw));  // where output column 0 finds tap j in the phases
  for (std::int64_t j = 0; j < kw; ++j) taps[std::size_t(j)] = j * dw % sw * phase + j * dw / sw;
  const T* xb = static_cast<const T*>(x.data());
  T* ob = static_cast<T*>(out.data());
  const auto& xs = x.strides();
  const auto& os = out.strides();
  // One past x's last element in memory (x's first where a stride is negative: nothing read past
  // a row's end then).
  const T* x_end = xb;
  if (x.numel() > 0 && std::all_of(xs.begin(), xs.end(), [](std::int64_t st) { return st >= 0; })) {
    std::int64_t last = 0;
    for (std::size_t a = 0; a < x.ndim(); ++a) last += (x.shape(a) - 1) * xs[a];
    x_end = xb + last + 1;
  }
  // The exact combination, for scalars and for the second try at a plane with a NaN.
  const auto exact = [](auto a, auto b) {
    if constexpr (Max) return ops::maximum{}(a, b);
    else return a + b;
  };
  // A float max pool at stride 1 that keeps the size of a small plane stored flat: in one piece
  // (`max_pool_same_plane`).
  bool same_flat = false;
  if constexpr (float_max && vectorized)
    same_flat = sh == 1 && sw == 1 && g.oh == g.h && g.ow == g.w && g.h * g.w <= 4096 && xs[3] == 1 && xs[2] == g.w &&
                os[3] == 1 && os[2] == g.w;
  // A float max pool three columns wide at horizontal stride 2: from its rows (`max_pool_3s2_plane`).
  bool three_by_two = false;
  if constexpr (float_max && vectorized)
    three_by_two = std::is_same_v<T, float> && kw == 3 && sw == 2 && dw == 1 && kh <= 8 && xs[3] == 1 && os[3] == 1 && xs[2] >= 0;
  // Plane by plane. (Cut into one band of rows per thread instead, so that each thread reads the
  // rows the first convolution wrote on its core, ResNet-18's max pool measured no faster on two
  // threads: its 3.2 MB input is in neither core's L2 cache.)
  parallel_for(g.n * g.c, [&](std::int64_t t) {
    const std::int64_t n = t / g.c, c = t % g.c;
    const T* plane = xb + n * xs[0] + c * xs[1];
    T* oplane = ob + n * os[0] + c * os[1];
    if constexpr (float_max && vectorized) {  // else a NaN, or another geometry: below
      if (same_flat && !max_pool_same_plane(plane, g.h, g.w, kh, kw, top, left, dh, dw, oplane)) return;
      if (three_by_two && !max_pool_3s2_plane(plane, g.h, g.w, xs[2], kh, sh, dh, top, left, g.oh, g.ow, x_end, oplane, os[2])) return;
    }
    // Output row b of a band: its combined padded row, and the same split by phase; then one
    // output row. The padding columns are never written: filled once for a thread and geometry.
    thread_local prepared_buffer<T, 5> buffer;
    thread_local std::vector<const T*> rows;
    const std::int64_t acc_size = (g.ow + 4 * W - 1) / (4 * W) * 4 * W;
    T* const lines =
        buffer.get(band * 2 * span + acc_size, {band, span, left, g.w, sw}, [&](T* b) { std::fill_n(b, band * 2 * span, fill); });
    const auto line_of = [&](std::int64_t b) { return lines + b * 2 * span; };
    const auto phases_of = [&](std::int64_t b) { return sw == 1 ? line_of(b) : line_of(b) + span; };
    T* const acc = lines + band * 2 * span;
    rows.resize(std::size_t(kh));
    // Whether a whole vector from each of the window's first `count` rows stays inside x.
    const auto rows_readable = [&](std::int64_t count) {
      for (std::int64_t r = 0; r < count; ++r)
        if (x_end - rows[std::size_t(r)] < W) return false;
      return true;
    };
    // One pass over the plane; `Fast`: the plain vector maximum, and whether a NaN may have been
    // lost (always false otherwise).
    const auto pass = [&]<bool Fast>() {
      using sum_type = std::conditional_t<vectorized, V, T>;
      [[maybe_unused]] sum_type sum0(T(0)), sum1(T(0));
      [[maybe_unused]] bool scalar_nan = false;
      const auto combine = [&](auto a, auto b) {
        if constexpr (Fast) return xsimd::max(a, b);
        else return exact(a, b);
      };
      // A band of output rows at a time, in three steps over its rows, so that no step reads
      // what the step before has just stored (a vector load across two recent stores waits for
      // them to reach the cache).
      for (std::int64_t y0 = 0; y0 < g.oh; y0 += band) {
        const std::int64_t y1 = std::min(g.oh, y0 + band);
        for (std::int64_t y = y0; y < y1; ++y) {
          T* const line = line_of(y - y0);
          const std::int64_t count = window_rows(plane, g.h, xs[2], y, kh, sh, dh, top, rows.data());
          // The rows combined, column by column, into line[left, left + w).
          T* const dst = line + left;
          std::int64_t col = 0;
          if constexpr (vectorized) {
            if (xs[3] == 1) {
              const auto column = [&](std::int64_t at, sum_type& sum) {
                V s(fill);
                [[maybe_unused]] V total(T(0));
                for (std::int64_t r = 0; r < count; ++r) {
                  const V v = V::load_unaligned(rows[std::size_t(r)] + at);
                  s = combine(s, v);
                  if constexpr (Fast && float_max) total += v;
                }
                if constexpr (Fast && float_max) sum += total;
                s.store_unaligned(dst + at);
              };
              for (; col + 2 * W <= g.w; col += 2 * W) {
                column(col, sum0);
                column(col + W, sum1);
              }
              for (; col + W <= g.w; col += W) column(col, sum0);
              if (col < g.w && g.w >= W) {  // the last columns: one vector ending at the row's end
                column(g.w - W, sum1);
                col = g.w;
              } else if (col < g.w && rows_readable(count)) {
                // A row shorter than a vector: one vector from each row, running into the rows
                // after it; the columns past the row's end are put back to the padding.
                column(0, sum1);
                std::fill(dst + g.w, dst + W, fill);
                col = g.w;
              }
            }
          }
          for (; col < g.w; ++col) {
            T s = fill;
            for (std::int64_t r = 0; r < count; ++r) {
              const T v = rows[std::size_t(r)][col * xs[3]];
              s = exact(s, v);
              if constexpr (Fast && float_max) scalar_nan |= std::isnan(v);
            }
            dst[col] = s;
          }
        }
        // Split by phase (the common stride 2 in one loop over pairs, which compilers vectorise
        // as a deinterleave).
        for (std::int64_t y = y0; y < y1 && sw > 1; ++y) {
          const T* const line = line_of(y - y0);
          T* const phases = phases_of(y - y0);
          if (sw == 2) {
            T* __restrict even = phases;
            T* __restrict odd = phases + phase;
            for (std::int64_t m = 0; m < phase; ++m) {
              even[m] = line[2 * m];
              odd[m] = line[2 * m + 1];
            }
          } else if (sw > 2) {
            for (std::int64_t q = 0; q < sw * phase; ++q) phases[q % sw * phase + q / sw] = line[q];
          }
        }
        for (std::int64_t y = y0; y < y1; ++y) {
          const T* const phases = phases_of(y - y0);
          // The window's columns combined into the output row.
          std::int64_t xo = 0;
          if constexpr (vectorized) {
            const auto vectors = [&]<int U>() {
              V s[U];
              for (int u = 0; u < U; ++u) s[u] = V(fill);
              for (std::int64_t j = 0; j < kw; ++j) {
                const T* at = phases + taps[std::size_t(j)] + xo;
                for (int u = 0; u < U; ++u) s[u] = combine(s[u], V::load_unaligned(at + u * W));
              }
              for (int u = 0; u < U; ++u) s[u].store_aligned(acc + xo + u * W);
            };
            for (; xo + 3 * W < g.ow; xo += 4 * W) vectors.template operator()<4>();  // the last vectors may run past the row
            for (; xo < g.ow; xo += W) vectors.template operator()<1>();
          }
          for (; xo < g.ow; ++xo) {
            T s = fill;
            for (std::int64_t j = 0; j < kw; ++j) s = exact(s, phases[taps[std::size_t(j)] + xo]);
            acc[xo] = s;
          }
          if constexpr (!Max)
            for (std::int64_t j = 0; j < g.ow; ++j) acc[j] *= inv_h[std::size_t(y)] * inv_w[std::size_t(j)];
          T* const orow = oplane + y * os[2];
          if (os[3] == 1)  // (a loop the compiler vectorises: std::copy calls memmove for each short row)
            for (std::int64_t j = 0; j < g.ow; ++j) orow[j] = acc[j];
          else store_row(acc, g.ow, orow, os[3]);
        }
      }
      if constexpr (float_max) {  // (nested: Clang checks the call in a branch that depends on Fast alone)
        if constexpr (Fast) return scalar_nan || xsimd::any(xsimd::isnan(sum0 + sum1));
        else return false;
      } else {
        return false;
      }
    };
    if constexpr (vectorized && Max) {
      if (pass.template operator()<true>()) pass.template operator()<false>();
    } else {
      pass.template operator()<false>();
    }
  });
}

template <bool Max>
void pool2d_op(std::string_view op, const tensor& x, const pool2d_params& p, const tensor& out);

/// The allocating form of max_pool2d and avg_pool2d.
template <bool Max>
tensor pool2d_new(std::string_view op, const tensor& x, const pool2d_params& p) {
  const pool_geometry g = check_pool2d(op, x, p, !Max);
  tensor out = new_output({g.n, g.c, g.oh, g.ow}, x.type());
  pool2d_op<Max>(op, x, p, out);
  return out;
}

template <bool Max>
void pool2d_op(std::string_view op, const tensor& x, const pool2d_params& p, const tensor& out) {
  const pool_geometry g = check_pool2d(op, x, p, !Max);
  check_output(op, out, x.type(), std::array{g.n, g.c, g.oh, g.ow});
  check_disjoint(op, x, out);
  if (out.numel() == 0) return;
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    if constexpr (Max || std::is_floating_point_v<T>) pool2d<T, Max>(x, p, g, out);
  });
}

}  // namespace detail

/// out = the maximum over each pooling window of x ([N, C, H, W]; any numeric dtype).
KILN_DECL void max_pool2d(const tensor& x, const pool2d_params& p, const tensor& out);
KILN_DECL tensor max_pool2d(const tensor& x, const pool2d_params& p);
/// out = the mean over each pooling window of x ([N, C, H, W]; float32 or float64).
KILN_DECL void avg_pool2d(const tensor& x, const pool2d_params& p, const tensor& out);
KILN_DECL tensor avg_pool2d(const tensor& x, const pool2d_params& p);

/// out[n, c, i, j] = the mean of x[n, c] over rows [floor(i H / OH), ceil((i+1) H / OH)) and the
/// same columns (PyTorch's adaptive average pooling); out's shape [N, C, OH, OW] sets the bins.
KILN_DECL void adaptive_avg_pool2d(const tensor& x, const tensor& out);
KILN_DECL tensor adaptive_avg_pool2d(const tensor& x, std::array<std::int64_t, 2> output_size);

/// out[n, c, 0, 0] = the mean of x[n, c] over H and W.
KILN_DECL void global_avg_pool2d(const tensor& x, const tensor& out);
KILN_DECL tensor global_avg_pool2d(const tensor& x);

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/pool2d.ipp>
#endif
