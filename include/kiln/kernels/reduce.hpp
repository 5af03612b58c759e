// SPDX-License-Identifier: Apache-2.0
/// \file
/// Reductions over any set of axes (sum, mean, max, min, prod; argmax, argmin), numerically stable
/// softmax and log_softmax along an axis, and layer_norm, with the IR's attributes:
///
///     kernels::sum(x, {0, 2}, /*keepdims=*/true)       // axes may be negative; {} reduces all
///     kernels::softmax(x, -1)                          // max-subtracted: no overflow
///     kernels::layer_norm(x, gamma, beta, {-1}, 1e-5)  // over the trailing axis
///
/// A reduction sees its input as kept dimensions times reduced dimensions (each list merged where
/// strides allow) and takes one of three loops: the reduced block's innermost run is contiguous
/// (vector accumulators, one horizontal step per output element); the kept innermost run is
/// contiguous (whole output rows accumulated with vectors); or neither (scalar). Floating-point
/// sums therefore associate differently from a sequential loop; tests state the tolerance.
/// max and min propagate NaN; argmax and argmin return the first extreme index (the first NaN if
/// any), counted over the reduced axes in row-major order, as int64.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/elementwise.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/transform.hpp>

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::kernels {

namespace detail {

/// Which axes of a rank-`ndim` tensor `axes` names (negative counts from the end; empty: all).
KILN_DECL std::vector<bool> reduced_axes(std::string_view op, std::size_t ndim, std::span<const std::int64_t> axes);

/// The output shape of a reduction.
KILN_DECL shape_vector reduced_shape(const tensor& x, const std::vector<bool>& red, bool keepdims);

/// Dimensions (sizes and strides in elements) with size-1 ones dropped and mergeable neighbours
/// merged; outermost first.
struct dim_list {
  dims shape, stride;
  void add(std::int64_t size, std::int64_t st) {
    if (size == 1) return;
    if (!shape.empty() && stride.back() == st * size) {
      shape.back() *= size;
      stride.back() = st;
      return;
    }
    shape.push_back(size);
    stride.push_back(st);
  }
  std::int64_t count() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  /// Calls f(offset) for every index, row-major, skipping the last `skip_inner` dimensions.
  template <class F>
  void for_each(std::size_t skip_inner, F&& f) const {
    const std::size_t d = shape.size() - std::min(skip_inner, shape.size());
    for_each_offsets<1>(std::span<const std::int64_t>(shape.data(), d), {stride.data()},
                        [&](const std::array<std::int64_t, 1>& off) { f(off[0]); });
  }
};

/// A batch's lanes combined with Reducer R, starting from its identity.
template <class R, class T>
T fold_lanes(const batch<T>& v) {
  alignas(64) T lanes[batch<T>::size];
  v.store_aligned(lanes);
  T r = R::identity();
  for (T x : lanes) r = R::combine(r, x);
  return r;
}

/// The reducers: an identity, a combining step for scalars and batches, a horizontal step.
template <class T>
struct sum_reducer {
  static T identity() { return T(0); }
  template <class V>
  static V combine(const V& a, const V& b) { return ops::add{}(a, b); }
  static T horizontal(const batch<T>& v) { return xsimd::hadd(v); }
};
template <class T>
struct prod_reducer {
  static T identity() { return T(1); }
  template <class V>
  static V combine(const V& a, const V& b) { return ops::multiply{}(a, b); }
  static T horizontal(const batch<T>& v) { return fold_lanes<prod_reducer>(v); }
};
template <class T>
struct max_reducer {
  static T identity() { return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest(); }
  template <class V>
  static V combine(const V& a, const V& b) { return ops::maximum{}(a, b); }
  static T horizontal(const batch<T>& v) { return fold_lanes<max_reducer>(v); }
};
template <class T>
struct min_reducer {
  static T identity() { return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max(); }
  template <class V>
  static V combine(const V& a, const V& b) { return ops::minimum{}(a, b); }
  static T horizontal(const batch<T>& v) { return fold_lanes<min_reducer>(v); }
};

/// Reduces `x` (element type T) over the axes `red` into the contiguous buffer `out` (one
/// element per kept index, row-major).
template <class T, template <class> class Reducer>
void reduce_into(const tensor& x, const std::vector<bool>& red, T* out) {
  using R = Reducer<T>;
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  constexpr bool vec = ops::is_simd_type<T>;
  dim_list kept, reduced;
  for (std::size_t i = 0; i < x.ndim(); ++i) (red[i] ? reduced : kept).add(x.shape(i), x.strides()[i]);
  const T* in = static_cast<const T*>(x.data());
  const std::int64_t K = kept.count();
  if (reduced.shape.empty()) {  // nothing to reduce (all reduced axes have size 1): a copy
    std::int64_t k = 0;
    kept.for_each(0, [&](std::int64_t off) { out[k++] = in[off]; });
    return;
  }
  const std::int64_t inner_red = reduced.shape.back(), inner_red_stride = reduced.stride.back();
  const bool kept_inner_contiguous = !kept.shape.empty() && kept.stride.back() == 1;
  if constexpr (vec) {
    if (inner_red_stride == 1 && !kept_inner_contiguous) {
      // Each output element reduces contiguous runs: vector accumulators. Four of them:
      // independent chains hide the combine's latency.
      struct accumulators {
        V a0 = V(R::identity()), a1 = V(R::identity()), a2 = V(R::identity()), a3 = V(R::identity());
        T tail = R::identity();
        // (Locals in the loop: the compiler cannot tell that `p` does not alias the members, and
        // would keep them in memory.)
        __attribute__((always_inline)) void add(const T* p, std::int64_t n) {
          V b0 = a0, b1 = a1, b2 = a2, b3 = a3;
          T t = tail;
          std::int64_t j = 0;
          for (; j + 4 * W <= n; j += 4 * W) {
            b0 = R::combine(b0, V::load_unaligned(p + j));
            b1 = R::combine(b1, V::load_unaligned(p + j + W));
            b2 = R::combine(b2, V::load_unaligned(p + j + 2 * W));
            b3 = R::combine(b3, V::load_unaligned(p + j + 3 * W));
          }
          for (; j + W <= n; j += W) b0 = R::combine(b0, V::load_unaligned(p + j));
          for (; j < n; ++j) t = R::combine(t, p[j]);
          a0 = b0, a1 = b1, a2 = b2, a3 = b3, tail = t;
        }
        T result() const { return R::combine(R::horizontal(R::combine(R::combine(a0, a1), R::combine(a2, a3))), tail); }
      };
      if (reduced.shape.size() == 1 && kept.shape.size() <= 1) {
        // One run per output element, the runs evenly apart (a global average pool's planes): a
        // plain loop over them. The general walk below costs more per run than a 7 x 7 plane's
        // three vectors.
        // The kernels' threads share the runs out from 2^18 elements on (a sum reads about twice
        // as fast as a binary operator runs: see `min_parallel_elements`).
        const std::int64_t apart = kept.shape.empty() ? 0 : kept.stride[0];
        parallel_ranges(K, 16, (std::int64_t(1) << 18) / std::max<std::int64_t>(inner_red, 1), [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t k = begin; k < end; ++k) {
            accumulators acc;
            acc.add(in + k * apart, inner_red);
            out[k] = acc.result();
          }
        });
        return;
      }
      std::int64_t k = 0;
      kept.for_each(0, [&](std::int64_t base) {
        accumulators acc;
        reduced.for_each(1, [&](std::int64_t off) { acc.add(in + base + off, inner_red); });
        out[k++] = acc.result();
      });
      return;
    }
    if (kept_inner_contiguous) {
      // Whole output rows accumulate with vectors.
      const std::int64_t row = kept.shape.back();
      std::fill_n(out, K, R::identity());
      std::int64_t r = 0;
      kept.for_each(1, [&](std::int64_t base) {
        T* o = out + r * row;
        reduced.for_each(0, [&](std::int64_t off) {
          const T* p = in + base + off;
          std::int64_t j = 0;
          for (; j + W <= row; j += W) R::combine(V::load_unaligned(o + j), V::load_unaligned(p + j)).store_unaligned(o + j);
          for (; j < row; ++j) o[j] = R::combine(o[j], p[j]);
        });
        ++r;
      });
      return;
    }
  }
  std::int64_t k = 0;
  kept.for_each(0, [&](std::int64_t base) {
    T acc = R::identity();
    reduced.for_each(0, [&](std::int64_t off) { acc = R::combine(acc, in[base + off]); });
    out[k++] = acc;
  });
}

/// Writes the contiguous buffer `values` (row-major) into `out` (any layout).
template <class T>
void scatter(const T* values, const tensor& out) {
  if (out.numel() == 0) return;
  if (out.is_contiguous()) {
    std::memcpy(out.data(), values, std::size_t(out.numel()) * sizeof(T));
    return;
  }
  T* o = static_cast<T*>(out.data());
  std::int64_t k = 0;
  runtime::for_each_offset(out.shape(), out.strides(), [&](std::int64_t off) { o[off] = values[k++]; });
}

template <template <class> class Reducer>
void reduce(std::string_view op, const tensor& x, std::span<const std::int64_t> axes, bool keepdims, const tensor& out, bool numeric_only,
            bool mean = false) {
  if (!x.defined()) fail(op, "the operand is undefined");
  if (numeric_only ? !ops::is_numeric(x.type()) : false) fail(op, kiln::detail::concat("does not take ", name(x.type()), " tensors"));
  if (mean && !ops::is_floating(x.type())) fail(op, kiln::detail::concat("needs a float32 or float64 tensor, got ", describe_operand(x)));
  const std::vector<bool> red = reduced_axes(op, x.ndim(), axes);
  const shape_vector shape = reduced_shape(x, red, keepdims);
  check_output(op, out, x.type(), shape);
  std::int64_t count = 1;
  for (std::size_t i = 0; i < x.ndim(); ++i)
    if (red[i]) count *= x.shape(i);
  if (count == 0 && !std::is_same_v<Reducer<float>, sum_reducer<float>> && !std::is_same_v<Reducer<float>, prod_reducer<float>>)
    fail(op, kiln::detail::concat("cannot reduce an empty axis of ", describe_operand(x), " (it has no identity)"));
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    std::vector<T> buf(std::size_t(out.numel()));
    if (!buf.empty()) reduce_into<T, Reducer>(x, red, buf.data());
    if constexpr (std::is_floating_point_v<T>)
      if (mean) {
        const T scale = count ? T(1) / T(count) : std::numeric_limits<T>::quiet_NaN();
        for (T& v : buf) v *= scale;
      }
    scatter(buf.data(), out);
  });
}

template <template <class> class Reducer>
tensor reduce_new(std::string_view op, const tensor& x, std::span<const std::int64_t> axes, bool keepdims, bool numeric_only, bool mean = false) {
  if (!x.defined()) fail(op, "the operand is undefined");
  tensor out = new_output(reduced_shape(x, reduced_axes(op, x.ndim(), axes), keepdims), x.type());
  reduce<Reducer>(op, x, axes, keepdims, out, numeric_only, mean);
  return out;
}

}  // namespace detail

using axis_list = std::initializer_list<std::int64_t>;

/// The reductions: (name, reducer, numeric dtypes only, mean).
#define KILN_KERNELS_REDUCTIONS(X)         \
  X(sum, sum_reducer, true, false)         \
  X(mean, sum_reducer, true, true)         \
  X(prod, prod_reducer, true, false)       \
  X(max, max_reducer, false, false)        \
  X(min, min_reducer, false, false)
// Each reduction's forms: into `out`, into a new tensor, and with the axes as a braced list.
#define KILN_KERNELS_REDUCE(op, reducer, numeric, is_mean)                                                                       \
  KILN_DECL void op(const tensor& x, std::span<const std::int64_t> axes, bool keepdims, const tensor& out);                      \
  KILN_DECL tensor op(const tensor& x, std::span<const std::int64_t> axes = {}, bool keepdims = false);                          \
  inline tensor op(const tensor& x, axis_list axes, bool keepdims = false) {                                                     \
    return op(x, std::span<const std::int64_t>(axes.begin(), axes.size()), keepdims);                                            \
  }
KILN_KERNELS_REDUCTIONS(KILN_KERNELS_REDUCE)
#undef KILN_KERNELS_REDUCE

// ---- argmax / argmin --------------------------------------------------------------------------------

namespace detail {
/// The axes argmax/argmin reduce: `axis`, or all of them (the flattened tensor).
KILN_DECL std::vector<bool> arg_axes(std::string_view op, const tensor& x, std::optional<std::int64_t> axis);

template <bool Max>
void arg_extreme(std::string_view op, const tensor& x, std::optional<std::int64_t> axis, bool keepdims, const tensor& out) {
  if (!x.defined()) fail(op, "the operand is undefined");
  const std::vector<bool> red = arg_axes(op, x, axis);
  check_output(op, out, dtype::int64, reduced_shape(x, red, keepdims));
  std::int64_t count = 1;
  for (std::size_t i = 0; i < x.ndim(); ++i)
    if (red[i]) count *= x.shape(i);
  if (count == 0) fail(op, kiln::detail::concat("cannot take the ", Max ? "argmax" : "argmin", " of an empty axis of ", describe_operand(x)));
  // Reduced offsets in row-major order of the reduced axes (not merged: the index counts them).
  dim_list kept, reduced;
  for (std::size_t i = 0; i < x.ndim(); ++i) {
    if (red[i]) {
      reduced.shape.push_back(x.shape(i));
      reduced.stride.push_back(x.strides()[i]);
    } else {
      kept.add(x.shape(i), x.strides()[i]);
    }
  }
  std::vector<std::int64_t> result(std::size_t(out.numel()));
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    const T* in = static_cast<const T*>(x.data());
    std::size_t k = 0;
    kept.for_each(0, [&](std::int64_t base) {
      std::int64_t best = 0, i = 0;
      T best_v{};
      bool found_nan = false;
      reduced.for_each(0, [&](std::int64_t off) {
        const T v = in[base + off];
        if (!found_nan) {
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v)) {
              found_nan = true;
              best = i;
            }
          }
          if (!found_nan && (i == 0 || (Max ? best_v < v : v < best_v))) {
            best = i;
            best_v = v;
          }
        }
        ++i;
      });
      result[k++] = best;
    });
  });
  scatter(result.data(), out);
}
}  // namespace detail

/// Index of the largest element along `axis` (over the flattened tensor when none), int64.
KILN_DECL void argmax(const tensor& x, std::optional<std::int64_t> axis, bool keepdims, const tensor& out);
KILN_DECL void argmin(const tensor& x, std::optional<std::int64_t> axis, bool keepdims, const tensor& out);
namespace detail {
template <bool Max>
tensor arg_extreme_new(std::string_view op, const tensor& x, std::optional<std::int64_t> axis, bool keepdims) {
  if (!x.defined()) fail(op, "the operand is undefined");
  tensor out = new_output(reduced_shape(x, arg_axes(op, x, axis), keepdims), dtype::int64);
  arg_extreme<Max>(op, x, axis, keepdims, out);
  return out;
}
}  // namespace detail
KILN_DECL tensor argmax(const tensor& x, std::optional<std::int64_t> axis = std::nullopt, bool keepdims = false);
KILN_DECL tensor argmin(const tensor& x, std::optional<std::int64_t> axis = std::nullopt, bool keepdims = false);

// ---- topk ----------------------------------------------------------------------------------------------

/// The k largest (or smallest) elements along `axis` and their indices (int32 or int64): sorted
/// from the most extreme, equal elements by index (ONNX's TopK); without `sorted` the same
/// elements, in index order. NaN counts as larger than every number.
KILN_DECL void topk(const tensor& x, std::int64_t k, std::int64_t axis, bool largest, bool sorted, const tensor& values, const tensor& indices);
/// {values, indices (int64)}.
KILN_DECL std::pair<tensor, tensor> topk(const tensor& x, std::int64_t k, std::int64_t axis = -1, bool largest = true, bool sorted = true);

// ---- cumsum ------------------------------------------------------------------------------------------

/// Running sums of `x` along `axis` (over the flattened tensor when none: `out` is then 1-D):
/// out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...]; `exclusive` leaves x[..., i, ...] out
/// of its own sum (the first is 0), `reverse` sums from the end. Numeric dtypes, summed in the
/// dtype (integers wrap), in order along the axis.
KILN_DECL void cumsum(const tensor& x, std::optional<std::int64_t> axis, bool exclusive, bool reverse, const tensor& out);
KILN_DECL tensor cumsum(const tensor& x, std::optional<std::int64_t> axis = std::nullopt, bool exclusive = false, bool reverse = false);

// ---- softmax, log_softmax ---------------------------------------------------------------------------

namespace detail {

/// Runs `row(src, dst, n, next_src, next_dst)` on every row of `x` along `axis` (`src` contiguous
/// input, `dst` contiguous output, possibly the same), writing the results to the same row of
/// `out`. `next_src` and `next_dst` are the row that comes next, or null: a hint to prefetch.
/// Contiguous rows are read and written in place (one row behind, so that the next is known);
/// others go through a buffer.
template <class T, class Row>
void for_each_row(const tensor& x, std::size_t axis, const tensor& out, Row&& row) {
  const std::int64_t n = x.shape(axis);
  const std::int64_t xs = x.strides()[axis], os = out.strides()[axis];
  // The other axes of x and out together (same shapes).
  shape_vector other_shape;
  dims x_str, o_str;
  for (std::size_t i = 0; i < x.ndim(); ++i) {
    if (i == axis) continue;
    other_shape.push_back(x.shape(i));
    x_str.push_back(x.strides()[i]);
    o_str.push_back(out.strides()[i]);
  }
  const T* in = static_cast<const T*>(x.data());
  T* o = static_cast<T*>(out.data());
  if (xs == 1 && os == 1) {
    const T* pending_src = nullptr;
    T* pending_dst = nullptr;
    for_each_offsets<2>(other_shape, {x_str.data(), o_str.data()}, [&](const std::array<std::int64_t, 2>& off) {
      if (pending_src) row(pending_src, pending_dst, n, in + off[0], o + off[1]);
      pending_src = in + off[0];
      pending_dst = o + off[1];
    });
    if (pending_src) row(pending_src, pending_dst, n, static_cast<const T*>(nullptr), static_cast<T*>(nullptr));
    return;
  }
  std::vector<T, xsimd::aligned_allocator<T, 64>> buf(static_cast<std::size_t>(n));
  for_each_offsets<2>(other_shape, {x_str.data(), o_str.data()}, [&](const std::array<std::int64_t, 2>& off) {
    const T* src = in + off[0];
    T* dst = o + off[1];
    for (std::int64_t j = 0; j < n; ++j) buf[std::size_t(j)] = src[j * xs];
    row(buf.data(), buf.data(), n, static_cast<const T*>(nullptr), static_cast<T*>(nullptr));
    for (std::int64_t j = 0; j < n; ++j) dst[j * os] = buf[std::size_t(j)];
  });
}

/// The largest lane of `v` by `>`, which ignores NaN (softmax finds NaN through its sum).
template <class T>
T max_lane(const batch<T>& v) {
  constexpr std::size_t W = batch<T>::size;
  alignas(64) T lanes[W];
  v.store_aligned(lanes);
  for (std::size_t w = W / 2; w > 0; w /= 2)  // a tree: depth log2(W), not a chain of W
    for (std::size_t i = 0; i < w; ++i) lanes[i] = lanes[i + w] > lanes[i] ? lanes[i + w] : lanes[i];
  return lanes[0];
}

/// exp(d) for the arguments softmax exponentiates, d = x - max(x): at most 0, or NaN (kept).
/// For float this is leaner than `xsimd::exp`, which must also handle overflow: about 15 vector
/// operations instead of 21 (the exp pass is softmax's bottleneck). A degree-6 polynomial on
/// [-ln2/2, ln2/2] (fitted with mpmath's chebyfit; 2e-8 relative error with the coefficients
/// rounded to float) times 2^n built in the exponent bits: within 1 ulp of the correctly rounded
/// exp over a sweep of 8.7 million points of [-87, 0], with FMA (AVX2, AVX-512) or without
/// (SSE2). Results below float's smallest normal number (d < -87.3) may flush to zero, which
/// keeps denormal arithmetic (slow on x86) out of masked rows of -1e9 or -inf.
template <class T>
batch<T> exp_nonpositive(const batch<T>& d) {
  using V = batch<T>;
  if constexpr (!std::is_same_v<T, float>) {
    return ops::safe::exp(d);  // a mask of -inf: no undefined behaviour in xsimd's double exp
  } else {
    using I = xsimd::batch<std::int32_t, simd_arch>;
    // Below -88, n = -127 and the 2^n built below is +0. xsimd::max(lo, NaN) is NaN (x86's max
    // returns its second operand when either is NaN), so NaN flows through to the row's sum.
    const V c = xsimd::max(V(-88.0f), d);
    const V n = xsimd::nearbyint(c * V(1.44269504088896341f));  // round(d / ln 2)
    V r = xsimd::fma(n, V(-0.693359375f), c);                    // Cody-Waite: ln 2 in two parts,
    r = xsimd::fma(n, V(2.12194440e-4f), r);                     // the first exact in n * hi
    V p(1.39411085e-3f);
    p = xsimd::fma(p, r, V(8.37512594e-3f));
    p = xsimd::fma(p, r, V(4.16663513e-2f));
    p = xsimd::fma(p, r, V(1.66664153e-1f));
    p = xsimd::fma(p, r, V(0.5f));
    p = xsimd::fma(p, r, V(1.0f));
    p = xsimd::fma(p, r, V(1.0f));
    const I e = (xsimd::to_int(n) + I(127)) << 23;  // 2^n as a float's bits; n = -127 gives +0
    return p * xsimd::bitwise_cast<V>(e);
  }
}

/// softmax (or log_softmax) of the contiguous row `p[0..n)` into `q` (which may be `p`),
/// max-subtracted. Three passes: max; exp, stored, and summed; scale (or shift). `next_p` and
/// `next_q` are the next row to be processed (or null), fetched into cache during the exp pass:
/// that pass is compute-bound, so the next row's misses overlap it instead of stalling the next
/// max pass and this pass's stores.
///
/// The max ignores NaN; a NaN anywhere in the row makes the sum NaN, and with it every output,
/// as numpy gives.
template <class T, bool Log>
void softmax_row(const T* p, T* q, std::int64_t n, const T* next_p, T* next_q) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  constexpr std::int64_t line = 64 / std::int64_t(sizeof(T));  // elements per cache line
  V vm0(max_reducer<T>::identity()), vm1 = vm0;
  T m = max_reducer<T>::identity();
  std::int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) {
    vm0 = xsimd::max(vm0, V::load_unaligned(p + j));
    vm1 = xsimd::max(vm1, V::load_unaligned(p + j + W));
  }
  for (; j + W <= n; j += W) vm0 = xsimd::max(vm0, V::load_unaligned(p + j));
  for (; j < n; ++j) m = p[j] > m ? p[j] : m;
  m = std::max(m, max_lane<T>(xsimd::max(vm0, vm1)));
  if (std::isinf(m) && m < 0) m = 0;  // a row of -inf: exp(-inf - 0) = 0, and 0/0 gives NaN as numpy
  const V mv(m);
  V vs0(T(0)), vs1(T(0));
  T s = 0;
  auto prefetch_next = [&](std::int64_t from, std::int64_t to) {  // elements [from, to) of the next row
    if (!next_p) return;
    for (std::int64_t k = from; k < to; k += line) {
      __builtin_prefetch(next_p + k, 0, 3);
      if constexpr (!Log) __builtin_prefetch(next_q + k, 1, 3);
    }
  };
  j = 0;
  for (; j + 2 * W <= n; j += 2 * W) {
    prefetch_next(j, j + 2 * W);
    const V e0 = exp_nonpositive<T>(V::load_unaligned(p + j) - mv), e1 = exp_nonpositive<T>(V::load_unaligned(p + j + W) - mv);
    if constexpr (!Log) {
      e0.store_unaligned(q + j);
      e1.store_unaligned(q + j + W);
    }
    vs0 += e0;
    vs1 += e1;
  }
  prefetch_next(j, n);
  for (; j < n; j += W) {  // the rest through a padded batch: the same exp as the body
    alignas(64) T lanes[W];
    const std::int64_t left = std::min(W, n - j);
    for (std::int64_t k = 0; k < W; ++k) lanes[k] = k < left ? p[j + k] : m;
    const V e = exp_nonpositive<T>(V::load_aligned(lanes) - mv);
    e.store_aligned(lanes);
    for (std::int64_t k = 0; k < left; ++k) {
      s += lanes[k];
      if constexpr (!Log) q[j + k] = lanes[k];
    }
  }
  s += xsimd::hadd(vs0 + vs1);
  if constexpr (Log) {
    const T shift = m + std::log(s);
    const V sv(shift);
    j = 0;
    for (; j + W <= n; j += W) (V::load_unaligned(p + j) - sv).store_unaligned(q + j);
    for (; j < n; ++j) q[j] = p[j] - shift;
  } else {
    const T inv = T(1) / s;
    const V iv(inv);
    j = 0;
    for (; j + W <= n; j += W) (V::load_unaligned(q + j) * iv).store_unaligned(q + j);
    for (; j < n; ++j) q[j] = q[j] * inv;
  }
}

template <bool Log>
void softmax_impl(std::string_view op, const tensor& x, std::int64_t axis, const tensor& out) {
  if (!x.defined()) fail(op, "the operand is undefined");
  if (!ops::is_floating(x.type())) fail(op, kiln::detail::concat("needs a float32 or float64 tensor, got ", describe_operand(x)));
  if (x.ndim() == 0) fail(op, "needs a tensor of rank at least 1, got a scalar");
  const std::size_t ax = normalize_axis(op, axis, x.ndim());
  check_output(op, out, x.type(), x.shape());
  check_no_overlap(op, out, {&x});
  if (x.numel() == 0) return;
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) for_each_row<T>(x, ax, out, [](const T* p, T* q, std::int64_t n, const T* next_p, T* next_q) { softmax_row<T, Log>(p, q, n, next_p, next_q); });
  });
}

}  // namespace detail

/// exp(x - max) / sum(exp(x - max)) along `axis`.
KILN_DECL void softmax(const tensor& x, std::int64_t axis, const tensor& out);
KILN_DECL tensor softmax(const tensor& x, std::int64_t axis = -1);
/// x - max - log(sum(exp(x - max))) along `axis`.
KILN_DECL void log_softmax(const tensor& x, std::int64_t axis, const tensor& out);
KILN_DECL tensor log_softmax(const tensor& x, std::int64_t axis = -1);

// ---- layer_norm -------------------------------------------------------------------------------------

/// (x - mean) / sqrt(var + epsilon) * gamma + beta over `axes`, which must be the trailing axes
/// (in any order of naming); gamma and beta have the shape of those axes. `center = false` skips
/// beta, `scale = false` gamma (either may then be an undefined tensor). Mean and variance are
/// computed in two passes over each normalised block, in vectors over chunks of 16 vectors whose
/// totals are added in double (as precise as summing in double); rows go to `parallel_for` in
/// groups of at least 2^15 elements.
KILN_DECL void layer_norm(const tensor& x, const tensor& gamma, const tensor& beta, std::span<const std::int64_t> axes, double epsilon,
                          const tensor& out, bool center = true, bool scale = true);
KILN_DECL tensor layer_norm(const tensor& x, const tensor& gamma, const tensor& beta, axis_list axes = {-1}, double epsilon = 1e-5,
                            bool center = true, bool scale = true);

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/reduce.ipp>
#endif
