// SPDX-License-Identifier: Apache-2.0
/// \file
/// Convolution and pooling on NCHW tensors (the IR's `nn.conv2d`, `nn.conv2d_transpose`, `nn.max_pool2d`,
/// `nn.avg_pool2d`, `nn.adaptive_avg_pool2d` and `nn.global_avg_pool2d`).
///
///     conv2d_params p;  p.strides = {2, 2};  p.padding = {1, 1, 1, 1};
///     tensor y = kernels::conv2d(x, w, bias, p);           // x [N, C, H, W], w [O, C/groups, KH, KW]
///     tensor m = kernels::max_pool2d(y, {.pool_size = {3, 3}, .strides = {2, 2}, .padding = {1, 1, 1, 1}});
///     tensor g = kernels::global_avg_pool2d(m);            // [N, O, 1, 1]
///
/// How conv2d computes:
/// - With one group, a window of more than one tap and at least 256 output positions (the early
///   layers of a CNN), directly (`conv2d_direct`): output channels along the vectors, a tile of
///   output positions along the registers, input elements broadcast from a zero-padded copy of
///   the image, so nothing of the image is packed; the weights are reordered once per call.
/// - Otherwise, per image and group, as one GEMM: the weights ([O/groups, C/groups * KH * KW],
///   row-major) times the im2col matrix of the input ([C/groups * KH * KW, OH * OW]). The im2col
///   matrix is never built: the GEMM's B-packing routine reads its panels straight out of the
///   image (`gemm_packed`), with zeros where a window hangs over the padding. A 1x1 convolution
///   with stride 1 and no padding multiplies the image itself; a strided or padded one (ResNet's
///   downsamplings) gathers its panels' rows from the positions it reads (`im2col_packer::pointwise`).
/// - Depthwise (one input channel per group, any channel multiplier): a direct kernel per output
///   plane over a zero-padded copy of the input plane, vectorised along the output row, in tiles
///   of several rows and vectors (`depthwise_tile`). Groups of planes are shared out by `parallel_for`.
/// - With few taps per output (at most 256, a network's first layer) and output rows of at least
///   two vectors, the direct kernel turned around (`conv2d_direct_rows`): output positions along
///   the vectors, straight through the rows of planes split by stride phase, output channels
///   along the registers, on the same reordered weights.
/// - With a constant weight packed at compile time (the compiler's `prepack_weights`): the direct
///   kernel on the reordered weight (`conv2d_prepacked`, any output size), or for stride-1 3x3
///   convolutions with enough channels (`prefer_winograd_conv`), Winograd's F(2x2, 3x3) or
///   F(4x4, 3x3) on the transformed weight (`conv2d_winograd`, `winograd.hpp`).
///
/// The attributes and their checks are `window_params.hpp`; the depthwise kernel is
/// `depthwise_conv2d.hpp`; pooling is `pool2d.hpp`, which this header includes.
///
/// Pooling is separable: per output row, the window's input rows are combined column by column
/// into one padded row (padding -inf for max, 0 for average), whose columns, split into s phases
/// for a horizontal stride s, the window then combines into the output row, vectorised along it.
/// `ceil_mode` adds a last, partial window where the input leaves a
/// remainder, as long as it starts inside the input or its leading padding (PyTorch's rule).
/// avg_pool2d divides by the number of input elements in the window, or with
/// `count_include_pad` by the window's size clipped to the padded input; a window that covers no
/// input element gives NaN (0 / 0). max_pool2d over a window with no input element gives -inf
/// (the lowest value for integers); NaN propagates.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/depthwise_conv2d.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/ops.hpp>
#include <kiln/kernels/packing.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/pool2d.hpp>
#include <kiln/kernels/reduce.hpp>
#include <kiln/kernels/register_epilogue.hpp>
#include <kiln/kernels/transform.hpp>
#include <kiln/kernels/window_params.hpp>
#include <kiln/kernels/window_plane.hpp>
#include <kiln/kernels/winograd.hpp>

#include <array>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::kernels {

namespace detail {

// ---- conv2d ---------------------------------------------------------------------------------------------

KILN_DECL conv_geometry check_conv2d(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p);

/// Packs panels of the im2col matrix of one image's group of channels (see `gemm_packed`):
/// row (c, i, j) and column (y, x) hold input[c, y*sh + i*dh - top, x*sw + j*dw - left], or 0
/// in the padding.
template <class T>
struct im2col_packer {
  const T* x;                                 ///< the group's first channel of the image
  std::int64_t sc, sh, sw;                    ///< its strides (elements)
  std::int64_t h, w, kh, kw, ow;
  std::int64_t stride_h, stride_w, dil_h, dil_w, top, left;
  const T* end;  ///< one past the group's last input element (reads stop there)

  /// Writes rows [p0, p0 + kc) x columns [j0, j0 + nc) into NR-column panels, each row straight
  /// into its panels (row k of panel q at out[q * kc * NR + k * NR]).
  void operator()(std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t nc, T* out) const {
    if (kh == 1 && kw == 1) pointwise(p0, kc, j0, nc, out);
    else if (stride_w == 1 && sw == 1) contiguous(p0, kc, j0, nc, out);
    else general(p0, kc, j0, nc, out);
  }

private:
  /// A piece of a packed row: `len` elements at `dst` (from the block's start) copied from `src`
  /// (from the channel's first element), or zeros when `src` < 0. Never crosses a panel.
  struct run {
    std::int64_t dst, src, len;
  };

  /// Cuts the row's columns [col, col + len) (relative to j0) where a panel ends: `f(at, t, n)`
  /// for each piece of n columns, t columns into the range, at element `at` of the block's first
  /// row (panels of kc rows).
  template <class F>
  static void cut_at_panels(std::int64_t col, std::int64_t len, std::int64_t kc, F&& f) {
    constexpr std::int64_t NR = gemm_detail::shape<T>::NR;
    for (std::int64_t t = 0; t < len;) {
      const std::int64_t c = col + t, n = std::min(NR - c % NR, len - t);
      f(c / NR * kc * NR + c % NR, t, n);
      t += n;
    }
  }

  /// A 1x1 window (a strided or padded one: a plain 1x1 convolution multiplies the image in
  /// place), such as ResNet's downsamplings: row k is channel p0 + k read at the output
  /// positions. Each row is gathered into a contiguous run, an output row's columns at a time,
  /// then copied into its panels a whole panel row at a time. (The general path cuts each output
  /// row where a panel ends and copies the pieces: 2.5-7 cycles per element on those shapes.)
  void pointwise(std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t nc, T* out) const {
    constexpr std::int64_t NR = gemm_detail::shape<T>::NR;
    const std::int64_t padded = (nc + NR - 1) / NR * NR, step = stride_w * sw;
    // The output columns whose input column is inside the row: [lo, hi).
    const std::int64_t lo = std::min(ow, (left + stride_w - 1) / stride_w), hi = std::clamp((w + left + stride_w - 1) / stride_w, lo, ow);
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> row;
    grow(row, padded);
    std::fill(row.data() + nc, row.data() + padded, T(0));
    for (std::int64_t k = 0; k < kc; ++k) {
      const T* plane = x + (p0 + k) * sc;
      std::int64_t y = j0 / ow, x0 = j0 % ow;
      for (std::int64_t q = 0; q < nc; x0 = 0, ++y) {
        const std::int64_t len = std::min(ow - x0, nc - q), iy = y * stride_h - top;
        T* const d = row.data() + q - x0;  // output column x0 of row y at d + x0
        if (iy < 0 || iy >= h) {
          std::fill(d + x0, d + x0 + len, T(0));
        } else {
          const std::int64_t a = std::clamp(lo, x0, x0 + len), b = std::clamp(hi, a, x0 + len);
          std::fill(d + x0, d + a, T(0));
          const T* src = plane + iy * sh + (a * stride_w - left) * sw;
          if (step == 2)  // a constant step, which the compiler vectorises (loads and a permute)
            for (std::int64_t e = 0; e < b - a; ++e) d[a + e] = src[2 * e];
          else
            for (std::int64_t e = 0; e < b - a; ++e) d[a + e] = src[e * step];
          std::fill(d + b, d + x0 + len, T(0));
        }
        q += len;
      }
      for (std::int64_t c = 0; c < padded; c += NR) std::copy_n(row.data() + c, NR, out + c * kc + k * NR);
    }
  }

  /// Rows whose input columns are contiguous (horizontal stride 1). Rows of one window tap
  /// (i, j) differ only in their channel, so the pieces each row is made of (cut where an output
  /// row, the padding or a panel ends) are worked out once per tap; each row is then one copy or
  /// fill per piece. A piece is copied as one whole panel row (two vectors) even when shorter:
  /// the pieces of a row come in order, so the next overwrites what spills past one, and what
  /// spills past the last lands in the next row of the same panel, written later. The block's
  /// last row, and reads that would pass `end`, copy exactly.
  void contiguous(std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t nc, T* out) const {
    constexpr std::int64_t NR = gemm_detail::shape<T>::NR;
    using V = batch<T>;
    constexpr std::int64_t W = std::int64_t(V::size);
    static_assert(NR == 2 * W, "a panel row is two vectors");
    const std::int64_t taps = kh * kw, padded = (nc + NR - 1) / NR * NR;
    thread_local std::vector<run> runs;
    thread_local std::vector<std::size_t> first;  // tap t's pieces: runs[first[t], first[t + 1])
    runs.clear();
    first.assign(std::size_t(taps + 1), 0);
    const auto piece = [&](std::int64_t col, std::int64_t len, std::int64_t src) {
      cut_at_panels(col, len, kc, [&](std::int64_t at, std::int64_t t, std::int64_t n) { runs.push_back({at, src < 0 ? -1 : src + t, n}); });
    };
    for (std::int64_t tap = 0; tap < taps; ++tap) {
      first[std::size_t(tap)] = runs.size();
      const std::int64_t i = tap / kw, j = tap % kw, off = j * dil_w - left;
      const std::int64_t lo = off >= 0 ? 0 : -off, hi = std::max<std::int64_t>(0, w - off);  // valid output columns [lo, hi)
      std::int64_t y = j0 / ow, x0 = j0 % ow, q = 0;
      while (q < nc) {
        const std::int64_t len = std::min(ow - x0, nc - q), iy = y * stride_h + i * dil_h - top;
        if (iy < 0 || iy >= h) {
          piece(q, len, -1);
        } else {
          const std::int64_t a = std::clamp(lo, x0, x0 + len), b = std::clamp(hi, a, x0 + len);
          piece(q, a - x0, -1);
          piece(q + (a - x0), b - a, iy * sh + a + off);
          piece(q + (b - x0), x0 + len - b, -1);
        }
        q += len;
        x0 = 0;
        ++y;
      }
      piece(nc, padded - nc, -1);
    }
    first[std::size_t(taps)] = runs.size();
    for (std::int64_t k = 0; k < kc; ++k) {
      const std::int64_t r = p0 + k, tap = r % taps;
      const T* plane = x + r / taps * sc;
      T* row = out + k * NR;
      const bool spill = k + 1 < kc;
      for (std::size_t e = first[std::size_t(tap)]; e < first[std::size_t(tap) + 1]; ++e) {
        const run& p = runs[e];
        T* d = row + p.dst;
        if (p.src < 0) {
          if (spill) {
            V(T(0)).store_unaligned(d);
            V(T(0)).store_unaligned(d + W);
          } else {
            std::fill_n(d, p.len, T(0));
          }
        } else if (const T* s = plane + p.src; spill && end - s >= NR) {
          V::load_unaligned(s).store_unaligned(d);
          V::load_unaligned(s + W).store_unaligned(d + W);
        } else {
          std::copy_n(s, p.len, d);
        }
      }
    }
  }

  /// Rows with a horizontal step other than one element: each row written run by run, a run of
  /// output columns cut where a panel ends.
  void general(std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t nc, T* out) const {
    constexpr std::int64_t NR = gemm_detail::shape<T>::NR;
    const std::int64_t padded = (nc + NR - 1) / NR * NR;
    for (std::int64_t k = 0; k < kc; ++k) {
      const std::int64_t r = p0 + k, c = r / (kh * kw), i = r / kw % kh, j = r % kw;
      const T* plane = x + c * sc;
      T* const base = out + k * NR;
      // Columns [q, q + len) of this row (relative to j0) from `fill(dst, t, n)`, which writes
      // the n columns starting t columns into the run.
      const auto put = [&](std::int64_t q, std::int64_t len, auto&& fill) {
        cut_at_panels(q, len, kc, [&](std::int64_t at, std::int64_t t, std::int64_t n) { fill(base + at, t, n); });
      };
      const auto zeros = [](T* dst, std::int64_t, std::int64_t n) { std::fill_n(dst, n, T(0)); };
      const std::int64_t off = j * dil_w - left;  // input column of output column 0
      // The output columns whose input column is inside the row: [lo, hi).
      const std::int64_t lo = off >= 0 ? 0 : (-off + stride_w - 1) / stride_w;
      const std::int64_t hi = w - 1 - off >= 0 ? (w - 1 - off) / stride_w + 1 : 0;
      std::int64_t y = j0 / ow, x0 = j0 % ow, q = 0;
      while (q < nc) {
        const std::int64_t len = std::min(ow - x0, nc - q), iy = y * stride_h + i * dil_h - top;
        if (iy < 0 || iy >= h) {
          put(q, len, zeros);
        } else {
          const T* src = plane + iy * sh;
          const std::int64_t a = std::clamp(lo, x0, x0 + len), b = std::clamp(hi, a, x0 + len);
          put(q, a - x0, zeros);
          if (stride_w * sw == 2)  // a constant step, which the compiler vectorises (loads and a permute)
            put(q + (a - x0), b - a, [&](T* dst, std::int64_t t, std::int64_t n) {
              const T* s0 = src + ((a + t) * stride_w + off) * sw;
              for (std::int64_t e = 0; e < n; ++e) dst[e] = s0[2 * e];
            });
          else
            put(q + (a - x0), b - a, [&](T* dst, std::int64_t t, std::int64_t n) {
              const T* s0 = src + ((a + t) * stride_w + off) * sw;
              for (std::int64_t e = 0; e < n; ++e) dst[e] = s0[e * stride_w * sw];
            });
          put(q + (b - x0), x0 + len - b, zeros);
        }
        q += len;
        x0 = 0;
        ++y;
      }
      put(nc, padded - nc, zeros);
    }
  }
};

/// Writes `ow` elements to `dst`: element e is src[(e * stride - left) * step], the input row
/// `src` (w elements `step` apart) read by a 1x1 window at output column e, or 0 in the padding.
template <class T>
void gather_row(const T* src, std::int64_t w, std::int64_t step, std::int64_t stride, std::int64_t left, std::int64_t ow, T* dst) {
  // Output columns [lo, hi) read inside the row.
  const std::int64_t lo = std::min(ow, (left + stride - 1) / stride), hi = std::clamp((w + left + stride - 1) / stride, lo, ow);
  const T* from = src + (lo * stride - left) * step;
  const std::int64_t s = stride * step;
  std::fill(dst, dst + lo, T(0));
  if (s == 2)  // a constant step, which the compiler vectorises (loads and a permute)
    for (std::int64_t e = 0; e < hi - lo; ++e) dst[lo + e] = from[2 * e];
  else
    for (std::int64_t e = 0; e < hi - lo; ++e) dst[lo + e] = from[e * s];
  std::fill(dst + hi, dst + ow, T(0));
}

/// A convolution's epilogue, `e(n, c, rs, cs, o, j, m, len)` on the m x len block of image n's
/// output at `c` (rows `rs` apart, elements `cs` apart), output channel `o` and position `j` on:
/// the bias of each channel added, then the fused expression of image n (`per_image`) applied.
/// Where the two come to one bias per channel and a simple activation, they are also a
/// `register_epilogue`, which the GEMM's micro-kernels apply as they store (`register_form`).
template <class T>
struct conv_epilogue {
  const T* bias = nullptr;  ///< channel o's at bias[o * bias_stride], or none
  std::int64_t bias_stride = 0;
  const std::vector<fused_epilogue<T>>* per_image = nullptr;  ///< none when empty

  void operator()(std::int64_t n, T* c, std::int64_t rs, std::int64_t cs, std::int64_t o, std::int64_t j, std::int64_t m, std::int64_t len) const {
    if (bias) {
      for (std::int64_t i = 0; i < m; ++i) {
        const T v = bias[(o + i) * bias_stride];
        T* row = c + i * rs;
        if (cs == 1)
          for (std::int64_t e = 0; e < len; ++e) row[e] += v;
        else
          for (std::int64_t e = 0; e < len; ++e) row[e * cs] += v;
      }
    }
    if (!per_image->empty()) (*per_image)[std::size_t(n)](c, rs, cs, o, j, m, len);
  }
  /// Image n's epilogue as a `register_epilogue` (for channel 0), or nothing.
  std::optional<register_epilogue<T>> register_form(std::int64_t n) const {
    if (per_image->empty()) {
      if (!bias) return std::nullopt;  // nothing to do
      register_epilogue<T> r;
      r.bias = bias, r.bias_stride = bias_stride;
      return r;
    }
    std::optional<register_epilogue<T>> r = (*per_image)[std::size_t(n)].in_register();
    if (r && bias) {
      if (r->bias) return std::nullopt;  // two biases
      r->bias = bias, r->bias_stride = bias_stride;
    }
    return r;
  }
};

/// The epilogue of `conv2d_depthwise`, whose sums already start from the convolution's bias:
/// image n's fused expression alone (`per_image`, none when empty), applied to a block as
/// `conv_epilogue` does, or offered in registers.
template <class T>
struct depthwise_epilogue {
  const std::vector<fused_epilogue<T>>* per_image = nullptr;

  void operator()(std::int64_t n, T* c, std::int64_t rs, std::int64_t cs, std::int64_t o, std::int64_t j, std::int64_t m, std::int64_t len) const {
    if (!per_image->empty()) (*per_image)[std::size_t(n)](c, rs, cs, o, j, m, len);
  }
  /// Image n's expression as a `register_epilogue` (for channel 0), one that changes nothing
  /// when there is none, or nothing when it cannot be put so.
  std::optional<register_epilogue<T>> register_form(std::int64_t n) const {
    if (per_image->empty()) return register_epilogue<T>{};
    return (*per_image)[std::size_t(n)].in_register();
  }
};

/// The epilogue of one image's group in `conv2d_gemm`: `apply` at that image and first channel,
/// and `apply`'s register form for them, where it has one.
template <class T, class Apply>
struct conv_gemm_epilogue {
  const Apply& apply;
  std::int64_t n, o0;
  std::optional<register_epilogue<T>> form;

  conv_gemm_epilogue(const Apply& a, std::int64_t image, std::int64_t channel) : apply(a), n(image), o0(channel) {
    if constexpr (offers_image_register_form<Apply, T>) {
      form = apply.register_form(n);
      if (form) form = form->from_row(o0);
    }
  }
  void operator()(T* c, std::int64_t rs, std::int64_t cs, std::int64_t i, std::int64_t j, std::int64_t m, std::int64_t len) const {
    apply(n, c, rs, cs, o0 + i, j, m, len);
  }
  const register_epilogue<T>* register_form() const
    requires offers_image_register_form<Apply, T>
  {
    return form ? &*form : nullptr;
  }
};

/// conv2d through the GEMM, into `out`, whose (H, W) axes are one contiguous row per channel.
/// `apply(n, c, rs, cs, o, j, m, len)` is the epilogue (`gemm_packed`) of image n, given the
/// block's output channel `o` and position `j` within the (OH * OW) row; a `conv_epilogue` may
/// also be applied by the micro-kernels (`register_form`).
template <class T, class Apply>
void conv2d_gemm(const tensor& x, const tensor& wt, const conv2d_params& p, const conv_geometry& g, const tensor& out, const Apply& apply) {
  const T* xb = static_cast<const T*>(x.data());
  const T* wb = static_cast<const T*>(wt.data());  // contiguous
  T* ob = static_cast<T*>(out.data());
  const auto& xs = x.strides();
  const std::int64_t K = g.cg * g.kh * g.kw, N = g.oh * g.ow;
  const bool pointwise = g.kh == 1 && g.kw == 1 && p.strides == std::array<std::int64_t, 2>{1, 1} &&
                         p.padding == std::array<std::int64_t, 4>{0, 0, 0, 0} && xs[3] == 1 && (xs[2] == g.w || g.h == 1);
  // One image's group: its own GEMM. With at least as many groups as threads (RegNet's groups of
  // 8 channels), the groups are shared out and each product runs on one thread: products of 8
  // rows, cut among the threads one by one, left the second thread idle most of the time.
  const auto group = [&](std::int64_t n, std::int64_t grp) {
    const matrix_view<const T> a{wb + grp * g.og * K, g.og, K, K, 1};
    const matrix_view<T> c{ob + n * out.strides()[0] + grp * g.og * out.strides()[1], g.og, N, out.strides()[1], 1};
    const T* image = xb + n * xs[0] + grp * g.cg * xs[1];
    const conv_gemm_epilogue<T, Apply> epilogue(apply, n, grp * g.og);
    if (pointwise) {
      gemm<T>(a, {image, g.cg, N, xs[1], 1}, c, false, epilogue);
    } else {
      const T* image_end = image + (g.cg - 1) * xs[1] + (g.h - 1) * xs[2] + (g.w - 1) * xs[3] + 1;
      const im2col_packer<T> pack{image, xs[1], xs[2], xs[3], g.h, g.w, g.kh, g.kw, g.ow, p.strides[0], p.strides[1],
                                  p.dilation[0], p.dilation[1], p.padding[0], p.padding[1], image_end};
      gemm_packed<T>(a, N, pack, c, false, epilogue);
    }
  };
  const std::int64_t products = g.n * p.groups;
  if (p.groups > 1 && products >= std::int64_t(num_threads())) {
    parallel_for(products, [&](std::int64_t t) { group(t / p.groups, t % p.groups); });
  } else {
    for (std::int64_t t = 0; t < products; ++t) group(t / p.groups, t % p.groups);
  }
}

/// A 1 x 1 convolution (stride 1, no padding, one group; x's positions one element apart) as the
/// transposed product: per image, Y^T [P x O] = X^T [P x C] W^T [C x O] (P = H W), W^T prepacked
/// as the GEMM's B (`packed`, this build's layout: `prepack_conv_weight_pointwise`), into a
/// buffer of P rows; then Y^T transposed into `out`'s channel rows (contiguous), a block of
/// 64 bytes of channels at a time (`transpose_tile`), each block finished by `apply` while it is
/// in L1. The output channels then run along the GEMM's vectors and the positions along its
/// rows: where P is small, W X pads P to whole vectors (7 x 7 = 49 positions take 64 lanes) and
/// X^T W^T pads nothing. Each element is the sum `conv2d_gemm` forms (for more than 4 positions:
/// fewer make both products small-M ones, which sum in other orders).
template <class T, class Apply>
void conv2d_pointwise_packed(const tensor& x, const T* packed, const conv_geometry& g, const tensor& out, const Apply& apply) {
  constexpr std::int64_t B = 64 / std::int64_t(sizeof(T));
  const T* xb = static_cast<const T*>(x.data());
  T* ob = static_cast<T*>(out.data());
  const auto& xs = x.strides();
  const auto& os = out.strides();
  const std::int64_t P = g.h * g.w, C = g.c, O = g.o;
  thread_local std::vector<T> buffer;  // the calling thread's; the GEMM's threads write into it
  if (buffer.size() < std::size_t(P * O)) buffer.resize(std::size_t(P * O));
  T* const yt = buffer.data();
  for (std::int64_t n = 0; n < g.n; ++n) {
    gemm_prepacked<T>({xb + n * xs[0], P, C, 1, xs[1]}, packed, {yt, P, O, O, 1});
    T* const y = ob + n * os[0];
    parallel_for((O + B - 1) / B, [&](std::int64_t t) {
      const std::int64_t o0 = t * B, m = std::min(B, O - o0);
      T* const rows = y + o0 * os[1];
      for (std::int64_t j0 = 0; j0 < P; j0 += B) {
        const std::int64_t len = std::min(B, P - j0);
        if (m == B && len == B) {
          transpose_tile<T, B>(rows + j0, os[1], yt + j0 * O + o0, O);
          continue;
        }
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < len; ++j) rows[i * os[1] + j0 + j] = yt[(j0 + j) * O + o0 + i];
      }
      apply(n, rows, os[1], 1, o0, 0, m, P);
    });
  }
}

/// Direct conv2d, one group, for outputs with many positions: the GEMM's roles turned around, so
/// that the image is not packed. Output channels go along the vectors (blocks of OB = 2W, the
/// weights in the order [block][k][OB], `pack_direct_weights`) and TP consecutive output
/// positions (any rows) along the registers: for each tap k = (c, i, j), TP input elements are
/// broadcast straight from a zero-padded copy of the image and multiplied into TP x 2
/// accumulators, as in the GEMM's micro-kernel (MR = TP). A finished TP x OB tile is transposed
/// into the output's channel rows; the epilogue runs over each block's rows of a thread's
/// positions (run per group of tiles instead, the interpreted epilogue's fixed cost per call
/// made ResNet-18 3-5 % slower). Each thread reads a padded copy of its own of the rows its
/// tiles need. Reordering the weights costs about one multiply-add per weight: done per call,
/// this pays where each weight serves many positions (`use_direct_conv`); a weight reordered
/// once, at compile time (`prepack_conv_weight`), runs here whatever the output's size.
template <class T>
struct direct_conv_shape {
  using V = batch<T>;
  static constexpr std::int64_t W = std::int64_t(V::size);
  static constexpr std::int64_t OB = 2 * W;                          ///< output channels per block
  static constexpr std::int64_t TP = sizeof(V) >= 64 ? 12 : 6;       ///< output positions per tile
};

/// Whether `conv2d_direct` suits a convolution whose weights it must reorder on each call: it
/// applies, and the output has enough positions for each reordered weight to serve many.
KILN_DECL bool use_direct_conv(const conv_geometry& g, const conv2d_params& p);

/// The O x K weight matrix `w` (row-major) in the direct kernel's order: blocks of OB output
/// channels, each K rows of OB values, zero past the last channel. `out` holds
/// ceil(O / OB) * K * OB elements.
template <class T>
void pack_direct_weights(const T* w, std::int64_t o, std::int64_t k, std::int64_t ob, T* out) {
  const std::int64_t blocks = (o + ob - 1) / ob;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t m = std::min(ob, o - b * ob);
    for (std::int64_t r = 0; r < k; ++r) {
      T* dst = out + (b * k + r) * ob;
      for (std::int64_t i = 0; i < m; ++i) dst[i] = w[(b * ob + i) * k + r];
      std::fill(dst + m, dst + ob, T(0));
    }
  }
}

/// The inverse of `pack_direct_weights`: the O x K matrix back from its blocks.
template <class T>
void unpack_direct_weights(const T* packed, std::int64_t o, std::int64_t k, std::int64_t ob, T* w) {
  for (std::int64_t c = 0; c < o; ++c)
    for (std::int64_t r = 0; r < k; ++r) w[c * k + r] = packed[(c / ob * k + r) * ob + c % ob];
}

/// What `direct_tile` finishes a tile's sums with on the last chunk of taps, in registers: a
/// register epilogue (a bias per output channel, a clip) put as vectors along the block's OB
/// channels.
template <class T>
struct direct_finish {
  using V = typename direct_conv_shape<T>::V;
  V bias[2];
  ops::clip clip;
  bool biased, clips;
  /// `e`'s work on the block of `m` channels whose first is e's row 0 (channels past m: no bias).
  explicit direct_finish(const register_epilogue<T>& e, std::int64_t m) : clip{e.lo, e.hi}, biased(e.bias != nullptr), clips(e.clips()) {
    constexpr std::int64_t W = direct_conv_shape<T>::W;
    alignas(64) T b[2 * W] = {};
    if (e.bias)
      for (std::int64_t c = 0; c < m; ++c) b[c] = e.bias[c * e.bias_stride];
    bias[0] = V::load_aligned(b);
    bias[1] = V::load_aligned(b + W);
  }
  __attribute__((always_inline)) V operator()(V v, int half) const {
    if (biased) v += bias[half];
    return clips ? clip(v) : v;
  }
};

/// One tile of `conv2d_direct`: TP output positions (window corners `corner`, offsets into the
/// padded image `img`) times one block of OB output channels, over taps [k0, k0 + kc) (weights
/// `w` and tap offsets `tap` start at k0). The TP x OB sums go to `sums`, added to what it holds
/// unless `first`, finished by `finish` when it is given (the last chunk). Meanwhile it
/// prefetches the weights of `ahead` taps from `next` (one tap's OB values per step of k, from
/// the first step).
template <class T, std::int64_t TP>
inline void direct_tile(const T* img, const std::int64_t* corner, const T* w, const std::int64_t* tap, std::int64_t kc, T* sums, bool first,
                        const T* next, std::int64_t ahead, const direct_finish<T>* finish) {
  using V = typename direct_conv_shape<T>::V;
  constexpr std::int64_t W = direct_conv_shape<T>::W, OB = direct_conv_shape<T>::OB;
  std::array<const T*, TP> at;
  for (std::int64_t t = 0; t < TP; ++t) at[std::size_t(t)] = img + corner[t];
  V acc[TP][2];
  for (std::int64_t t = 0; t < TP; ++t) {
    acc[t][0] = first ? V(T(0)) : V::load_aligned(sums + t * OB);
    acc[t][1] = first ? V(T(0)) : V::load_aligned(sums + t * OB + W);
  }
  for (std::int64_t k = 0; k < kc; ++k) {
    const V w0 = V::load_aligned(w + k * OB), w1 = V::load_aligned(w + k * OB + W);
    if (k < ahead)
      for (std::int64_t e = 0; e < OB; e += 64 / std::int64_t(sizeof(T))) __builtin_prefetch(next + k * OB + e);
    const std::int64_t off = tap[k];
    for (std::int64_t t = 0; t < TP; ++t) {
      const V a(at[std::size_t(t)][off]);
      acc[t][0] = xsimd::fma(a, w0, acc[t][0]);
      acc[t][1] = xsimd::fma(a, w1, acc[t][1]);
    }
  }
  if (finish)
    for (std::int64_t t = 0; t < TP; ++t) {
      acc[t][0] = (*finish)(acc[t][0], 0);
      acc[t][1] = (*finish)(acc[t][1], 1);
    }
  for (std::int64_t t = 0; t < TP; ++t) {
    acc[t][0].store_aligned(sums + t * OB);
    acc[t][1].store_aligned(sums + t * OB + W);
  }
}

/// The tile width (positions per tile, a compile-time width between TP / 2 and TP) that covers
/// N positions at the least cost, counting the two weight loads of each tap as two positions'
/// worth: 49 positions (ResNet's last layer) take 5 tiles of 10, not 5 of 12.
template <class T>
std::int64_t direct_tile_width(std::int64_t n) {
  constexpr std::int64_t TP = direct_conv_shape<T>::TP;
  std::int64_t best = TP, cost = (n + TP - 1) / TP * (TP + 2);
  for (std::int64_t tp = TP - 1; tp >= TP / 2 + 1; --tp)
    if (const std::int64_t c = (n + tp - 1) / tp * (tp + 2); c < cost) best = tp, cost = c;
  return best;
}

/// Calls `f.template operator()<tp>()` for a run-time tile width tp in (TP / 2, TP].
template <class T, class F>
void with_tile_width(std::int64_t tp, F&& f) {
  constexpr std::int64_t TP = direct_conv_shape<T>::TP;
  [&]<std::int64_t... I>(std::integer_sequence<std::int64_t, I...>) {
    (void)((tp == TP - I ? (f.template operator()<TP - I>(), true) : false) || ...);
  }(std::make_integer_sequence<std::int64_t, TP - TP / 2>());
}

/// The calling thread's buffer for `conv2d_direct_packed`'s padded image (one per thread and
/// element type, whatever the tile width and epilogue).
template <class T>
std::vector<T>& direct_image_buffer() {
  thread_local std::vector<T> image;
  return image;
}

/// The output positions `conv2d_direct_rows` puts along one vector register's lanes, and how
/// many output channels it broadcasts a weight to per tap (a quarter of the direct kernel's
/// block, so that it reads the same packed weights).
template <class T>
struct direct_rows_shape {
  using V = batch<T>;
  static constexpr std::int64_t W = std::int64_t(V::size);
  static constexpr std::int64_t OC = direct_conv_shape<T>::OB / 4;  ///< output channels per tile
  static constexpr std::int64_t NV = 3;                             ///< at most this many vectors of positions per tile
};

/// Whether `conv2d_direct_packed` runs a convolution as `conv2d_direct_rows`: few taps per
/// output (a network's first layer, on 3 input channels), so that a tile's weights stay in the
/// L1 cache, and output rows at least two vectors wide.
template <class T>
bool use_direct_rows(const conv_geometry& g) {
  return g.c * g.kh * g.kw <= 256 && g.ow >= 2 * direct_rows_shape<T>::W && g.kw > 1;
}

/// One tile of `conv2d_direct_rows`: NV vectors of consecutive flat positions from f0 times OC
/// output channels, over all K taps. Tap k reads its NV input vectors at in[k] + f0 and
/// broadcasts its OC weights from w + k * ws. Stores each channel's vectors at the `spots` into
/// its plane at out + o * os (`store_flat`), finished by `fin` (channel o at its row o). A whole
/// tile (oc = OC, nv = NV) is stored by an unrolled sequence, so that its sums are stored from
/// the registers they were computed in, not spilled first for loops of run-time length.
template <class T, int NV>
void direct_rows_tile(const T* const* in, std::int64_t f0, const T* w, std::int64_t ws, std::int64_t K, std::int64_t oc, T* out,
                      std::int64_t os, const flat_spot* spots, int nv, std::int64_t pitch, std::int64_t ow, std::int64_t rows,
                      const register_epilogue<T>& fin) {
  using S = direct_rows_shape<T>;
  using V = typename S::V;
  constexpr std::int64_t W = S::W, OC = S::OC;
  V acc[OC][NV];
  for (std::int64_t o = 0; o < OC; ++o)
    for (int v = 0; v < NV; ++v) acc[o][v] = V(T(0));
  for (std::int64_t k = 0; k < K; ++k) {
    const T* src = in[k] + f0;
    V a[NV];
    for (int v = 0; v < NV; ++v) a[v] = V::load_unaligned(src + v * W);
    const T* wk = w + k * ws;
    for (std::int64_t o = 0; o < OC; ++o) {
      const V b(wk[o]);
      for (int v = 0; v < NV; ++v) acc[o][v] = xsimd::fma(a[v], b, acc[o][v]);
    }
  }
  const auto store = [&](std::int64_t o, int v) __attribute__((always_inline)) {
    store_flat(fin(acc[o][v], o), spots[v], pitch, ow, rows, out + o * os);
  };
  if (oc == OC && nv == NV) {
    [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
      (store(std::int64_t(I) / NV, int(I % NV)), ...);
    }(std::make_index_sequence<std::size_t(OC * NV)>{});
    return;
  }
  for (std::int64_t o = 0; o < oc; ++o)
    for (int v = 0; v < nv; ++v) store(o, v);
}

/// The direct convolution with the roles of `conv2d_direct_packed`'s tiles turned around, for
/// convolutions with few taps per output and wide output rows (`use_direct_rows`; ResNet's
/// first layer, 7x7 stride 2 on 3 channels; SqueezeNet's 3x3 layers on 16 channels):
/// consecutive output positions go along the vectors and OC output channels along the
/// registers, each tap's weights broadcast. A tile's results are whole vectors of each channel's
/// plane, stored as they are where they lie inside a row (the other kernel transposes its tiles
/// into the channels' rows a value at a time: 64 x 12,544 scalar stores for that layer, into 32
/// rows of 50 KB apart).
///
/// Each thread takes an even share of the output rows and copies the input rows they read into
/// zero-padded planes of its own, split by phase: for strides sh x sw, padded element (r, q) of
/// the share goes to plane (r mod sh, q mod sw) at row r / sh, column q / sw, in rows of `pitch`
/// (about ow plus the window's reach). Tap (i, j) of output (y, x) is then element
/// (y + i dh / sh) * pitch + x + j dw / sw of one plane: the outputs run through the share's
/// rows flat, `pitch` apart, and tiles of three vectors go straight across the rows' ends (a row
/// of 55 or 111 outputs fills its vectors with the next row's, not with nothing). The columns
/// between the rows are dropped as the tiles are stored (`store_flat`). The planes' padding is
/// written once for a thread and geometry (`prepared_buffer`).
///
/// An epilogue that offers a register form (a bias per channel and relu, clip or nothing)
/// finishes each vector as it is stored; any other runs over the share's outputs after it.
/// Reads the direct kernel's packed weights: channel group j of block b at tap k is the OC
/// values at (b * K + k) * OB + (j % 4) * OC. Like that kernel, it writes `out` with contiguous
/// rows (`conv2d_into` passes a separate output otherwise).
template <class T, class Apply>
void conv2d_direct_rows(const tensor& x, const T* weights, const conv2d_params& p, const conv_geometry& g, const tensor& out, const Apply& apply) {
  using S = direct_rows_shape<T>;
  constexpr std::int64_t W = S::W, OC = S::OC, NV = S::NV, OB = direct_conv_shape<T>::OB;
  const std::int64_t K = g.c * g.kh * g.kw, groups = (g.o + OC - 1) / OC;
  const std::int64_t sh = p.strides[0], sw = p.strides[1], dh = p.dilation[0], dw = p.dilation[1];
  const std::int64_t top = p.padding[0], left = p.padding[1];
  // The padded width every window of a row fits in, and the planes' rows (each a column phase).
  const std::int64_t wp = std::max(g.w + left + p.padding[3], (g.ow - 1) * sw + (g.kw - 1) * dw + 1);
  const std::int64_t pitch = (wp + sw - 1) / sw;
  const std::int64_t reach = (g.kh - 1) * dh / sh;  // rows of a plane below an output row's that its taps read
  const auto& xs = x.strides();
  const auto& os = out.strides();
  const std::int64_t parts = std::min<std::int64_t>(std::int64_t(num_threads()), g.oh);
  for (std::int64_t n = 0; n < g.n; ++n) {
    const T* xb = static_cast<const T*>(x.data()) + n * xs[0];
    T* ob = static_cast<T*>(out.data()) + n * os[0];
    std::optional<register_epilogue<T>> fused;  // else a finish that changes nothing, and `apply` after
    if constexpr (offers_image_register_form<Apply, T>) fused = apply.register_form(n);
    const register_epilogue<T> fin = fused ? *fused : register_epilogue<T>{};
    parallel_for(parts, [&](std::int64_t part) {
      const std::int64_t y0 = part * g.oh / parts, y1 = (part + 1) * g.oh / parts, rows = y1 - y0;
      // The share's outputs, flat, and the tiles' last vector: whole tiles, reading past the
      // last row into rows of zeros and the slack.
      const std::int64_t flat = rows * pitch, tiles = (flat + NV * W - 1) / (NV * W);
      const std::int64_t plane_rows = rows + reach + 1, plane = plane_rows * pitch, planes = sh * sw;
      const std::int64_t size = g.c * planes * plane + NV * W;
      // Input rows [i0, i1) are padded rows [i0 + top - y0 sh, ...) of the share.
      const std::int64_t r0 = y0 * sh - top;
      const std::int64_t i0 = std::clamp<std::int64_t>(r0, 0, g.h), i1 = std::clamp<std::int64_t>(r0 + plane_rows * sh, 0, g.h);
      thread_local prepared_buffer<T, 9> buffer;
      T* const b = buffer.get(size, {g.c, sh, sw, plane_rows, pitch, i0 - r0, i1 - i0, left, g.w},
                              [&](T* z) { std::fill_n(z, size, T(0)); });
      for (std::int64_t c = 0; c < g.c; ++c) {
        T* const cb = b + c * planes * plane;
        for (std::int64_t i = i0; i < i1; ++i) {
          const std::int64_t r = i - r0;  // padded row of the share
          T* const dst = cb + (r % sh * sw) * plane + r / sh * pitch;
          const T* src = xb + c * xs[1] + i * xs[2];
          split_row_by_phase(src, g.w, xs[3], sw, left, dst, plane);
        }
      }
      // Where tap k of flat position 0 is.
      thread_local std::vector<const T*> in;
      in.resize(std::size_t(K));
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t c = k / (g.kh * g.kw), i = k / g.kw % g.kh * dh, j = k % g.kw * dw;
        in[std::size_t(k)] = b + c * planes * plane + (i % sh * sw + j % sw) * plane + i / sh * pitch + j / sw;
      }
      T* const share = ob + y0 * os[2];
      // A chunk of tiles at a time (384 positions), every channel group over them: their input
      // rows stay in the L1 cache, and each group writes its channels' planes in runs of 1.5 KB,
      // streams the hardware prefetcher follows (in short runs to many planes, an output out of
      // cache has most of its lines fetched only when a store misses).
      constexpr std::int64_t chunk = std::max<std::int64_t>(1, 384 / (NV * W));
      std::int64_t done = 0;  // the share's rows finished
      for (std::int64_t t0 = 0; t0 < tiles; t0 += chunk) {
        const std::int64_t t1 = std::min(tiles, t0 + chunk);
        flat_spot spots[chunk][NV];
        int nv[chunk] = {};
        for (std::int64_t t = t0; t < t1; ++t)
          for (std::int64_t f = t * NV * W; f < std::min(flat, (t + 1) * NV * W); f += W) spots[t - t0][nv[t - t0]++] = {f / pitch, f % pitch};
        for (std::int64_t grp = 0; grp < groups; ++grp) {
          const std::int64_t o0 = grp * OC, oc = std::min(OC, g.o - o0);
          const T* w = weights + (o0 / OB * K) * OB + o0 % OB;
          const register_epilogue<T> fin_group = fin.from_row(o0);
          for (std::int64_t t = t0; t < t1; ++t)
            direct_rows_tile<T, NV>(in.data(), t * NV * W, w, OB, K, oc, share + o0 * os[1], os[1], spots[t - t0], nv[t - t0], pitch, g.ow,
                                    rows, fin_group);
        }
        if (!fused) {  // the rows the chunk finished: row y once flat position y pitch + ow - 1 is stored
          const std::int64_t complete = std::min(rows, (std::min(flat, t1 * NV * W) + pitch - g.ow) / pitch);
          if (complete > done) apply(n, share + done * g.ow, os[1], 1, std::int64_t(0), (y0 + done) * g.ow, g.o, (complete - done) * g.ow);
          done = std::max(done, complete);
        }
      }
    });
  }
}

/// `conv2d_direct` over weights already in the direct order (64-byte aligned, OB per block).
/// The taps are taken in chunks of KC, so that a chunk of a block's weights stays in the L1
/// cache while a group of tiles runs over it; each tile's sums wait in a buffer between chunks.
/// While they do, the group's tiles prefetch the next chunk, a share each: where the weights come
/// from memory (a network's large late layers, whose weights were last read an inference ago),
/// the first tile over a chunk would otherwise wait for all of it while the others wait for
/// nothing. ResNet-18's 512-channel 3x3 layer on Zen 5, its 9.4 MB of weights from memory:
/// 1.61 -> 1.30 ms on one thread, 0.84 -> 0.70 ms on two; the whole network 5 % faster.
/// An epilogue that offers a register form (a bias per channel and relu, clip or nothing)
/// finishes each tile in registers after its last chunk of taps (`direct_finish`); a group's
/// sums are then transposed into the channels' rows. Any other epilogue runs over each finished
/// block afterwards.
template <class T, class Apply>
void conv2d_direct_packed(const tensor& x, const T* weights, const conv2d_params& p, const conv_geometry& g, const tensor& out, const Apply& apply) {
  constexpr std::int64_t OB = direct_conv_shape<T>::OB;
  constexpr std::int64_t KC = 16384 / std::int64_t(sizeof(T)) / OB;  // 16 KB of weights per chunk
  constexpr std::int64_t GT = 8;                                      // tiles per group
  if (use_direct_rows<T>(g)) return conv2d_direct_rows<T>(x, weights, p, g, out, apply);
  const std::int64_t K = g.c * g.kh * g.kw, N = g.oh * g.ow, blocks = (g.o + OB - 1) / OB;
  const std::int64_t top = p.padding[0], left = p.padding[1];
  const std::int64_t hp = g.h + top + p.padding[2], wp = g.w + left + p.padding[3];
  // A 1x1 window reads one input element per output position and channel: the image copy then
  // holds just those, an OH x OW plane per channel (a strided 1x1 convolution, such as a ResNet
  // downsampling, reads a quarter of its input). Otherwise it is the zero-padded image.
  const bool gathered = g.kh == 1 && g.kw == 1;
  const std::int64_t plane = gathered ? g.oh * g.ow : hp * wp;
  const std::int64_t row_step = gathered ? g.ow : p.strides[0] * wp, col_step = gathered ? 1 : p.strides[1];  // of an output position
  // Where tap k starts in the image copy.
  std::vector<std::int64_t> tap(static_cast<std::size_t>(K));
  for (std::int64_t k = 0; k < K; ++k)
    tap[std::size_t(k)] = k / (g.kh * g.kw) * plane + k / g.kw % g.kh * p.dilation[0] * wp + k % g.kw * p.dilation[1];
  const auto& xs = x.strides();
  const auto& os = out.strides();
  const std::int64_t tp = direct_tile_width<T>(N);
  // The work is blocks x tiles, handed out in that order (a part covers whole blocks where there
  // are enough of them: each thread then streams only its blocks' weights).
  const std::int64_t tiles = (N + tp - 1) / tp, items = blocks * tiles;
  const std::int64_t parts = std::min<std::int64_t>(std::int64_t(num_threads()), items);
  for (std::int64_t n = 0; n < g.n; ++n) {
    const T* xb = static_cast<const T*>(x.data()) + n * xs[0];
    T* ob = static_cast<T*>(out.data()) + n * os[0];
    std::optional<register_epilogue<T>> fused;  // the epilogue as the sums are written out, where it can be
    if constexpr (offers_image_register_form<Apply, T>) fused = apply.register_form(n);
    with_tile_width<T>(tp, [&]<std::int64_t TP>() {
      parallel_for(parts, [&](std::int64_t part) {
        const std::int64_t begin = part * items / parts, end = (part + 1) * items / parts;
        // Each thread reads a zero-padded copy of its own, of the padded rows its tiles' windows
        // cover (all of them once the part spans two blocks). Made by the thread that reads it, it
        // is in that core's cache: a copy shared between threads would be read, half of it, from
        // the other core's cache at every tap (measured on Zen 5: 1.2x on two threads instead of 1.6x).
        const bool one_block = begin / tiles == (end - 1) / tiles;
        const std::int64_t q_first = one_block ? begin % tiles * TP : 0, q_last = one_block ? std::min(N, ((end - 1) % tiles + 1) * TP) - 1 : N - 1;
        std::vector<T>& image = direct_image_buffer<T>();
        grow(image, g.c * plane);  // the rows of the part's positions are written below, the only ones read
        T* const img = image.data();
        if (gathered) {
          for (std::int64_t c = 0; c < g.c; ++c)
            for (std::int64_t y = q_first / g.ow; y <= q_last / g.ow; ++y) {
              T* dst = img + c * plane + y * g.ow;
              const std::int64_t iy = y * p.strides[0] - top;
              if (iy < 0 || iy >= g.h) {
                std::fill(dst, dst + g.ow, T(0));
                continue;
              }
              gather_row(xb + c * xs[1] + iy * xs[2], g.w, xs[3], p.strides[1], left, g.ow, dst);
            }
        }
        const std::int64_t r0 = q_first / g.ow * p.strides[0], r1 = gathered ? r0 : q_last / g.ow * p.strides[0] + (g.kh - 1) * p.dilation[0] + 1;
        for (std::int64_t c = 0; c < g.c; ++c)
          for (std::int64_t r = r0; r < r1; ++r) {
            T* dst = img + c * plane + r * wp;
            const std::int64_t y = r - top;
            if (y < 0 || y >= g.h) {
              std::fill(dst, dst + wp, T(0));
              continue;
            }
            const T* src = xb + c * xs[1] + y * xs[2];
            std::fill(dst, dst + left, T(0));
            if (xs[3] == 1) std::copy(src, src + g.w, dst + left);
            else for (std::int64_t e = 0; e < g.w; ++e) dst[left + e] = src[e * xs[3]];
            std::fill(dst + left + g.w, dst + wp, T(0));
          }
        alignas(64) T sums[GT][TP][OB];
        std::int64_t corner[GT][TP];  // each position's window corner (the last repeated past the end)
        for (std::int64_t item = begin; item < end;) {
          const std::int64_t b = item / tiles, t0 = item % tiles, t1 = std::min(tiles, t0 + end - item);
          item += t1 - t0;
          const std::int64_t o0 = b * OB, m = std::min(OB, g.o - o0);
          std::optional<direct_finish<T>> finish;
          if (fused) finish.emplace(fused->from_row(o0), m);
          for (std::int64_t g0 = t0; g0 < t1; g0 += GT) {
            const std::int64_t g1 = std::min(t1, g0 + GT);
            for (std::int64_t i = g0; i < g1; ++i)
              for (std::int64_t t = 0; t < TP; ++t) {
                const std::int64_t q = std::min(i * TP + t, N - 1);
                corner[i - g0][t] = q / g.ow * row_step + q % g.ow * col_step;
              }
            for (std::int64_t k0 = 0; k0 < K; k0 += KC) {
              // The next chunk: the rest of this block's taps, else the next block's first (the
              // weights are one array, blocks in order); none past the last block.
              const std::int64_t kc = std::min(KC, K - k0), at = b * K + k0 + kc, next = std::min(KC, blocks * K - at);
              const direct_finish<T>* fin = k0 + kc == K && finish ? &*finish : nullptr;
              for (std::int64_t i = g0; i < g1; ++i) {
                const std::int64_t share0 = next * (i - g0) / (g1 - g0), share1 = next * (i - g0 + 1) / (g1 - g0);
                direct_tile<T, TP>(img, corner[i - g0], weights + (b * K + k0) * OB, tap.data() + k0, kc, &sums[i - g0][0][0], k0 == 0,
                                   weights + (at + share0) * OB, std::min(kc, share1 - share0), fin);
              }
            }
            // The finished sums transposed into the channels' rows (plain copies: a finish
            // applied here, a value at a time, took as long as the taps on SqueezeNet's 3x3
            // layers, its relu a branch on each value's sign).
            for (std::int64_t i = g0; i < g1; ++i) {
              const std::int64_t q0 = i * TP, len = std::min(TP, N - q0);
              for (std::int64_t c = 0; c < m; ++c) {
                T* row = ob + (o0 + c) * os[1] + q0;
                for (std::int64_t t = 0; t < len; ++t) row[t] = sums[i - g0][t][c];
              }
            }
          }
          const std::int64_t q_begin = t0 * TP, q_end = std::min(N, t1 * TP);
          if (!fused) apply(n, ob + o0 * os[1] + q_begin, os[1], 1, o0, q_begin, m, q_end - q_begin);
        }
      });
    });
  }
}

/// `conv2d_direct_packed` with the weights ([O, C, KH, KW], contiguous) reordered on this call.
template <class T, class Apply>
void conv2d_direct(const tensor& x, const tensor& wt, const conv2d_params& p, const conv_geometry& g, const tensor& out, const Apply& apply) {
  constexpr std::int64_t OB = direct_conv_shape<T>::OB;
  const std::int64_t K = g.c * g.kh * g.kw, blocks = (g.o + OB - 1) / OB;
  thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> packed;
  grow(packed, blocks * K * OB);
  pack_direct_weights<T>(static_cast<const T*>(wt.data()), g.o, K, OB, packed.data());
  conv2d_direct_packed<T>(x, packed.data(), p, g, out, apply);
}

}  // namespace detail

namespace detail {

/// How conv2d_into finds the weight: as given, or packed ahead of time, in which case `w` is the
/// [O, C, KH, KW] view of the packed storage (which holds at least that many elements) and the
/// kernel reads it in place: in this build's direct order (`prepack_conv_weight`), transformed
/// for Winograd's F(2x2, 3x3) or F(4x4, 3x3) (`prepack_conv_weight_winograd`), or, for a 1x1
/// convolution, as W^T's matmul panels (`prepack_conv_weight_pointwise`; `w` is [O, C, 1, 1]).
enum class conv_weight { plain, direct_packed, winograd2, winograd4, pointwise };

/// conv2d with an optional fused epilogue (null: none) over `operands`, whose strides along the
/// output's axes `check_epilogue` gave, reading its weight as `form` says.
KILN_DECL void conv2d_into(std::string_view op, const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p,
                           const fused_expr* epilogue, std::span<const tensor> operands, const std::vector<std::vector<std::int64_t>>& strides,
                           const tensor& out, conv_weight form = conv_weight::plain);

}  // namespace detail

/// out = conv2d(x, w) + bias: x is [N, C, H, W], w is [O, C / groups, KH, KW], `bias` is [O] or
/// an undefined tensor, out is [N, O, OH, OW]. float32 or float64.
KILN_DECL void conv2d(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p, const tensor& out);
KILN_DECL tensor conv2d(const tensor& x, const tensor& w, const tensor& bias = {}, const conv2d_params& p = {});

/// out = epilogue(conv2d(x, w) + bias, operands...): `epilogue` is a fused expression whose x0
/// is the convolution (with its bias) and x1... are `operands`, each broadcasting to the output
/// [N, O, OH, OW] (a per-channel scale [O, 1, 1], a residual [N, O, OH, OW], ...). It is applied
/// to each block of the output as the GEMM (or the depthwise kernel) produces it, so the fused
/// form reads and writes the output once:
///
///     kernels::conv2d_fused(x, w, bias, p, fused_expr::parse("(relu (add x0 x1))"), {residual}, out);
///
/// An operand laid out so that an output row (OH * OW) is not one stride apart, or one that
/// overlaps the output, is applied after the convolution instead, with the same result.
KILN_DECL void conv2d_fused(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p, const fused_expr& epilogue,
                            std::span<const tensor> operands, const tensor& out);
KILN_DECL void conv2d_fused(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p, const fused_expr& epilogue,
                            std::initializer_list<tensor> operands, const tensor& out);

// ---- weights packed ahead of time ------------------------------------------------------------------

/// out = conv2d(x, W) + bias (as `conv2d`, one group) for the weight W that `packed` holds in
/// `layout` (`prepack_conv_weight`). In this build's layout the direct kernel reads it in place,
/// whatever the output's size; in another (an executable compiled for another vector width) W
/// is unpacked first, with the same result.
KILN_DECL void conv2d_prepacked(const tensor& x, const tensor& packed, const packed_conv_layout& layout, const tensor& bias, const conv2d_params& p,
                                const tensor& out);

/// out = epilogue(conv2d(x, W) + bias, operands...) (as `conv2d_fused`) for the weight W that
/// `packed` holds in `layout` (as `conv2d_prepacked`).
KILN_DECL void conv2d_fused_prepacked(const tensor& x, const tensor& packed, const packed_conv_layout& layout, const tensor& bias,
                                      const conv2d_params& p, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out);
KILN_DECL void conv2d_fused_prepacked(const tensor& x, const tensor& packed, const packed_conv_layout& layout, const tensor& bias,
                                      const conv2d_params& p, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out);

// ---- 1 x 1 convolutions as X^T W^T, the weight packed ahead of time -----------------------------------

/// out = conv2d(x, W) + bias (as `conv2d`) for a 1 x 1 convolution (stride 1, no padding, one
/// group) whose [O, C, 1, 1] weight W `packed` holds transposed, as a matmul's C x O right
/// operand in `layout` (`prepack_conv_weight_pointwise`): the product X^T W^T, the output
/// channels along the GEMM's vectors, transposed into `out` (`conv2d_pointwise_packed`). For
/// few positions (`prefer_pointwise_conv`), where W X would pad them to whole vectors. In another
/// layout (an executable compiled for another vector width) W is unpacked first, with the same
/// result.
KILN_DECL void conv2d_pointwise(const tensor& x, const tensor& packed, const packed_weight_layout& layout, const tensor& bias, const conv2d_params& p,
                                const tensor& out);

/// out = epilogue(conv2d(x, W) + bias, operands...) (as `conv2d_fused`) for the weight W that
/// `packed` holds in `layout` (as `conv2d_pointwise`).
KILN_DECL void conv2d_fused_pointwise(const tensor& x, const tensor& packed, const packed_weight_layout& layout, const tensor& bias,
                                      const conv2d_params& p, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out);
KILN_DECL void conv2d_fused_pointwise(const tensor& x, const tensor& packed, const packed_weight_layout& layout, const tensor& bias,
                                      const conv2d_params& p, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out);

// ---- Winograd F(2x2, 3x3), the weight transformed ahead of time -------------------------------------

/// out = conv2d(x, W) + bias (as `conv2d`: stride 1, no dilation, one group, any padding) for the
/// 3 x 3 weight W that `packed` holds transformed in `layout` (`prepack_conv_weight_winograd`),
/// by Winograd's F(m x m, 3x3) (`winograd.hpp`).
KILN_DECL void conv2d_winograd(const tensor& x, const tensor& packed, const winograd_conv_layout& layout, const tensor& bias, const conv2d_params& p,
                               const tensor& out);

/// out = epilogue(conv2d(x, W) + bias, operands...) (as `conv2d_fused`) for the weight W that
/// `packed` holds transformed in `layout` (as `conv2d_winograd`).
KILN_DECL void conv2d_fused_winograd(const tensor& x, const tensor& packed, const winograd_conv_layout& layout, const tensor& bias,
                                     const conv2d_params& p, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out);
KILN_DECL void conv2d_fused_winograd(const tensor& x, const tensor& packed, const winograd_conv_layout& layout, const tensor& bias,
                                     const conv2d_params& p, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out);

// ---- conv2d_transpose --------------------------------------------------------------------------------------

/// The attributes of conv2d_transpose (the gradient of conv2d with respect to its input).
struct conv2d_transpose_params {
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::int64_t, 4> padding{0, 0, 0, 0};    ///< cropped from the full output: top, left, bottom, right
  std::array<std::int64_t, 2> output_padding{0, 0};   ///< added at the bottom and right
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;
};

namespace detail {

struct conv_transpose_geometry {
  std::int64_t n, c, h, w, o, kh, kw, oh, ow, cg, og;
};

}  // namespace detail

/// out = the transposed convolution of x with w: x is [N, C, H, W], w is [C, O / groups, KH, KW]
/// (IOHW, conv2d's OIHW weight read the other way), out is [N, O, OH, OW] with
/// OH = (H - 1) * stride + dilation * (KH - 1) + 1 + output_padding - top - bottom. Every input
/// element scatters its product with the window into the output; as a GEMM per image and group,
/// columns = w^T x ([O/groups * KH * KW, H * W]), then added into place (col2im), cropped by the
/// padding. float32 or float64.
KILN_DECL void conv2d_transpose(const tensor& x, const tensor& w, const conv2d_transpose_params& p, const tensor& out);
KILN_DECL tensor conv2d_transpose(const tensor& x, const tensor& w, const conv2d_transpose_params& p = {});

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/nn.ipp>
#endif
