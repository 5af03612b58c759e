// SPDX-License-Identifier: Apache-2.0
/// \file
/// Data movement: the kernels that rearrange elements without computing on them.
///
///     tensor v = kernels::reshape(x, {2, -1});            // a view when the layout allows, else a copy
///     tensor t = kernels::permute_dims(x, {0, 2, 1});     // a contiguous copy (x.permute() is the view)
///     tensor b = kernels::broadcast_to(bias, {8, 64});
///     tensor c = kernels::concat({a, b}, /*axis=*/1);
///     auto parts = kernels::split(x, /*sections=*/3, /*axis=*/0);
///     tensor s = kernels::strided_slice(x, {1}, {-1}, {0}, {-1});   // x[:, ::-1] (axes, begin, end, strides)
///     tensor g = kernels::take(table, ids, /*axis=*/0);   // embedding lookup
///     tensor p = kernels::pad(img, {0, 0, 0, 0, 1, 1, 1, 1}, pad_mode::reflect);
///
/// Every kernel has a destination-passing form (output last) and an allocating one; those that
/// can be views (`reshape`, `broadcast_view`, `strided_slice_view`) say so in their names or
/// documentation. They work on every dtype, float16 included (elements are moved as bytes), except
/// a constant `pad`, which needs the value's type.
///
/// All of them go through one copy routine, `copy`: a loop plan over the output and the
/// (broadcast) source whose innermost runs are `memcpy`s, fills or strided loops, and which copies
/// a transposition (the source contiguous along another axis than the output) in tiles, so that
/// both sides are read and written a cache line at a time.
///
/// Argument errors (bad axes, shapes that do not fit, out-of-range indices) are found before
/// anything is written.
#pragma once

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/ops.hpp>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

namespace kiln::kernels {

// ---- copy -------------------------------------------------------------------------------------------

namespace detail {

/// Calls `f(type_tag<U>{})` with an unsigned integer type of the element size of `t`.
template <class F>
decltype(auto) visit_item(dtype t, F&& f) {
  switch (size_of(t)) {
    case 1: return f(type_tag<std::uint8_t>{});
    case 2: return f(type_tag<std::uint16_t>{});
    case 4: return f(type_tag<std::uint32_t>{});
    default: return f(type_tag<std::uint64_t>{});
  }
}

/// out[i * out_t + j] = src[i + j * src_l] for i, j < B.
template <class U, std::int64_t B>
__attribute__((always_inline)) inline void transpose_tile(U* __restrict out, std::int64_t out_t, const U* __restrict src, std::int64_t src_l) {
#if defined(__AVX2__)
  if constexpr (sizeof(U) == 4 && B % 8 == 0) {
    // In registers, 8 x 8 at a time: xsimd 8 has no transposition (its zip_lo interleaves within
    // 128-bit lanes on AVX), so this is the classic unpack / shuffle / lane-permute sequence.
    for (std::int64_t j0 = 0; j0 < B; j0 += 8)
      for (std::int64_t i0 = 0; i0 < B; i0 += 8) {
        const float* s = reinterpret_cast<const float*>(src + i0 + j0 * src_l);
        float* o = reinterpret_cast<float*>(out + i0 * out_t + j0);
        __m256 r[8], t[8];
        for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(s + k * src_l);
        for (int k = 0; k < 8; k += 2) {
          t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
          t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
        }
        for (int k = 0; k < 8; k += 4) {
          r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
          r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
          r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
          r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
        }
        for (int k = 0; k < 4; ++k) {
          _mm256_storeu_ps(o + k * out_t, _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
          _mm256_storeu_ps(o + (k + 4) * out_t, _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
        }
      }
    return;
  }
#endif
  U tile[B][B];  // read rows of the source contiguously, write rows of the output contiguously
  for (std::int64_t j = 0; j < B; ++j)
    for (std::int64_t i = 0; i < B; ++i) tile[i][j] = src[i + j * src_l];
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t j = 0; j < B; ++j) out[i * out_t + j] = tile[i][j];
}

/// The tiled transposition: the innermost dimension is contiguous in the output, dimension `t` in
/// the source. Copies square tiles of 64 bytes a side (16 x 16 floats).
template <class U>
void copy_transposed(const loop_plan<2>& p, std::size_t t) {
  constexpr std::int64_t item = sizeof(U), B = 64 / item;
  const std::size_t d = p.ndim();
  const std::int64_t nt = p.shape()[t], nl = p.shape()[d - 1];
  const std::int64_t out_t = p.strides(0)[t] / item, src_l = p.strides(1)[d - 1] / item;
  dims rest, rest_out, rest_src;  // the other dimensions, in bytes
  for (std::size_t i = 0; i + 1 < d; ++i)
    if (i != t) rest.push_back(p.shape()[i]), rest_out.push_back(p.strides(0)[i]), rest_src.push_back(p.strides(1)[i]);
  char* const out_base = p.data(0);
  const char* const src_base = p.data(1);
  for_each_offsets<2>(rest, {rest_out.data(), rest_src.data()}, [&](const std::array<std::int64_t, 2>& off) {
    U* out = reinterpret_cast<U*>(out_base + off[0]);
    const U* src = reinterpret_cast<const U*>(src_base + off[1]);
    for (std::int64_t i0 = 0; i0 < nt; i0 += B)
      for (std::int64_t j0 = 0; j0 < nl; j0 += B) {
        if (i0 + B <= nt && j0 + B <= nl) {  // a whole tile: fixed trip counts, which the compiler unrolls
          transpose_tile<U, B>(out + i0 * out_t + j0, out_t, src + i0 + j0 * src_l, src_l);
          continue;
        }
        const std::int64_t i1 = std::min(nt, i0 + B), j1 = std::min(nl, j0 + B);
        for (std::int64_t i = i0; i < i1; ++i)
          for (std::int64_t j = j0; j < j1; ++j) out[i * out_t + j] = src[i + j * src_l];
      }
  });
}

template <class U>
void copy_plan(const loop_plan<2>& p) {
  constexpr std::int64_t item = sizeof(U);
  const std::size_t d = p.ndim();
  if (d >= 2 && p.strides(0)[d - 1] == item && p.strides(1)[d - 1] != item && p.strides(1)[d - 1] != 0)
    for (std::size_t t = 0; t + 1 < d; ++t)
      if (p.strides(1)[t] == item) return copy_transposed<U>(p, t);
  p.for_each_run([](std::int64_t n, const std::array<char*, 2>& ptr, const std::array<std::int64_t, 2>& st) {
    if (st[0] == item && st[1] == item) {
      std::memcpy(ptr[0], ptr[1], std::size_t(n * item));
    } else if (st[1] == 0) {
      U v;
      std::memcpy(&v, ptr[1], sizeof(U));
      if (st[0] == item) std::fill_n(reinterpret_cast<U*>(ptr[0]), n, v);
      else
        for (std::int64_t i = 0; i < n; ++i) std::memcpy(ptr[0] + i * st[0], &v, sizeof(U));
    } else {
      for (std::int64_t i = 0; i < n; ++i) std::memcpy(ptr[0] + i * st[0], ptr[1] + i * st[1], sizeof(U));
    }
  });
}

/// Copies `src` (already checked to broadcast to `out`, same dtype, no overlap) into `out`.
inline void copy_unchecked(const tensor& src, const tensor& out) {
  if (out.numel() == 0) return;
  const loop_plan<2> plan({&out, &src});
  visit_item(out.type(), [&]<class U>(type_tag<U>) { copy_plan<U>(plan); });
}

/// Checks that `x` broadcasts to exactly `shape` (numpy rules, one way).
template <class Shape>
void check_broadcasts_to(std::string_view op, const tensor& x, const Shape& shape) {
  const std::size_t rank = std::size(shape);
  bool ok = x.ndim() <= rank;
  for (std::size_t i = 0; ok && i < x.ndim(); ++i) {
    const std::int64_t d = x.shape(i), want = shape[rank - x.ndim() + i];
    ok = d == want || d == 1;
  }
  if (!ok)
    fail(op, kiln::detail::concat("cannot broadcast ", describe_operand(x), " to shape ",
                                  runtime::shape_to_string(std::span<const std::int64_t>(std::data(shape), rank))));
}

inline void check_same_dtype(std::string_view op, const tensor& x, const tensor& out) {
  if (!x.defined() || !out.defined()) fail(op, "an operand is undefined");
  if (x.type() != out.type())
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " must have the input's dtype ", name(x.type())));
}

inline void check_disjoint(std::string_view op, const tensor& x, const tensor& out) {
  if (overlaps(out, x))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps the input ", describe_operand(x),
                                  "; write into a separate tensor"));
}

/// `copy_unchecked` after the checks, with errors naming `op`.
inline void checked_copy(std::string_view op, const tensor& x, const tensor& out) {
  check_same_dtype(op, x, out);
  check_broadcasts_to(op, x, out.shape());
  check_disjoint(op, x, out);
  copy_unchecked(x, out);
}

}  // namespace detail

/// out = x broadcast (numpy) to out's shape, in out's layout. With equal shapes, a plain copy.
/// `out` must not overlap `x`.
inline void copy(const tensor& x, const tensor& out) { detail::checked_copy("copy", x, out); }

// ---- broadcast_to -------------------------------------------------------------------------------------

/// out = x broadcast to out's shape (the IR's `broadcast_to`).
inline void broadcast_to(const tensor& x, const tensor& out) { detail::checked_copy("broadcast_to", x, out); }
/// x broadcast to `shape`, as a new contiguous tensor.
inline tensor broadcast_to(const tensor& x, std::span<const std::int64_t> shape) {
  if (!x.defined()) fail("broadcast_to", "the input is undefined");
  detail::check_broadcasts_to("broadcast_to", x, shape);
  tensor out = new_output(shape_vector(shape.begin(), shape.end()), x.type());
  detail::copy_unchecked(x, out);
  return out;
}
inline tensor broadcast_to(const tensor& x, std::initializer_list<std::int64_t> shape) {
  return broadcast_to(x, std::span<const std::int64_t>(shape.begin(), shape.size()));
}
/// x broadcast to `shape` as a view: broadcast dimensions get stride 0, so nothing is copied
/// (and writing through the view writes the shared elements).
inline tensor broadcast_view(const tensor& x, std::span<const std::int64_t> shape) {
  if (!x.defined()) fail("broadcast_to", "the input is undefined");
  detail::check_broadcasts_to("broadcast_to", x, shape);
  shape_vector strides(shape.size(), 0);
  const std::size_t shift = shape.size() - x.ndim();
  for (std::size_t i = 0; i < x.ndim(); ++i)
    if (x.shape(i) != 1) strides[shift + i] = x.strides()[i];
  return tensor::from_storage(x.data_storage(), x.byte_offset(), x.type(), shape_vector(shape.begin(), shape.end()), std::move(strides));
}

// ---- reshape ------------------------------------------------------------------------------------------

namespace detail {

/// `spec` with its one -1 replaced so that it has `numel` elements; errors name the shapes.
inline shape_vector resolve_shape(std::string_view op, const tensor& x, std::span<const std::int64_t> spec) {
  shape_vector s(spec.begin(), spec.end());
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1 && !infer) infer = i;
    else if (s[i] < 0)
      fail(op, kiln::detail::concat("bad target shape ", runtime::shape_to_string(spec), " (one -1 and no other negative dimension)"));
    else if (__builtin_mul_overflow(known, s[i], &known))
      fail(op, kiln::detail::concat("the target shape ", runtime::shape_to_string(spec), " has more than 2^63 elements"));
  }
  const std::int64_t n = x.numel();
  if (infer) {
    if (known == 0 || n % known != 0)
      fail(op, kiln::detail::concat("cannot reshape ", describe_operand(x), " to ", runtime::shape_to_string(spec),
                                    ": no size for -1 gives ", n, " elements"));
    s[*infer] = n / known;
  } else if (known != n) {
    fail(op, kiln::detail::concat("cannot reshape ", describe_operand(x), " (", n, " elements) to ", runtime::shape_to_string(spec), " (",
                                  known, " elements)"));
  }
  return s;
}

/// Strides that let `x`'s storage be read as `shape` in row-major order without a copy, if there
/// are any. Dimensions of x and of the new shape are matched in groups of equal element counts;
/// within a group, x's dimensions must be laid out as one (each stride the next one's times its
/// size).
inline std::optional<shape_vector> view_strides(const tensor& x, const shape_vector& shape) {
  dims os, ost;  // x without its size-1 dimensions
  for (std::size_t i = 0; i < x.ndim(); ++i)
    if (x.shape(i) != 1) os.push_back(x.shape(i)), ost.push_back(x.strides()[i]);
  shape_vector st(shape.size(), 0);
  if (x.numel() == 0) return runtime::contiguous_strides(shape);
  std::size_t oi = 0, ni = 0;
  while (ni < shape.size() || oi < os.size()) {
    // Skip the new shape's unit dimensions (any stride will do).
    if (ni < shape.size() && shape[ni] == 1) {
      st[ni++] = 1;
      continue;
    }
    if (oi == os.size() || ni == shape.size()) return std::nullopt;
    const std::size_t o0 = oi, n0 = ni;
    std::int64_t op = os[oi++], np = shape[ni++];
    while (op != np) {
      if (op < np) op *= os[oi++];
      else np *= shape[ni++];
    }
    for (std::size_t k = o0; k + 1 < oi; ++k)
      if (ost[k] != ost[k + 1] * os[k + 1]) return std::nullopt;
    // The group's new dimensions step through it row-major from its innermost stride.
    std::int64_t step = ost[oi - 1];
    for (std::size_t k = ni; k-- > n0;) {
      st[k] = step;
      step *= shape[k];
    }
  }
  return st;
}

}  // namespace detail

/// x with the same elements in row-major order and the shape `shape` (one dimension may be -1):
/// a view sharing x's storage whenever x's layout allows (always for a contiguous x), otherwise
/// a contiguous copy, as numpy's `reshape`.
inline tensor reshape(const tensor& x, std::span<const std::int64_t> shape) {
  constexpr std::string_view op = "reshape";
  if (!x.defined()) fail(op, "the input is undefined");
  shape_vector s = detail::resolve_shape(op, x, shape);
  if (auto st = detail::view_strides(x, s)) return tensor::from_storage(x.data_storage(), x.byte_offset(), x.type(), std::move(s), std::move(*st));
  tensor out = new_output(std::move(s), x.type());
  const tensor in = tensor::from_storage(out.data_storage(), 0, out.type(), x.shape());  // out, seen with x's shape
  detail::copy_unchecked(x, in);
  return out;
}
inline tensor reshape(const tensor& x, std::initializer_list<std::int64_t> shape) {
  return reshape(x, std::span<const std::int64_t>(shape.begin(), shape.size()));
}
/// Copies x's elements, in row-major order, into `out` (any shape with as many elements).
inline void reshape(const tensor& x, const tensor& out) {
  constexpr std::string_view op = "reshape";
  detail::check_same_dtype(op, x, out);
  if (x.numel() != out.numel())
    fail(op, kiln::detail::concat("cannot reshape ", describe_operand(x), " into ", describe_operand(out), ": the element counts differ"));
  detail::check_disjoint(op, x, out);
  if (x.shape() == out.shape()) return detail::copy_unchecked(x, out);
  // Whichever side can be viewed with the other's shape; else through a contiguous copy.
  if (auto st = detail::view_strides(out, x.shape()))
    return detail::copy_unchecked(x, tensor::from_storage(out.data_storage(), out.byte_offset(), out.type(), x.shape(), std::move(*st)));
  const tensor flat = reshape(x, out.shape());
  detail::copy_unchecked(flat, out);
}

// ---- permute_dims ---------------------------------------------------------------------------------------

namespace detail {
/// The permutation `axes` normalised (negative axes count from the end; empty: reversed).
inline shape_vector permutation(std::string_view op, const tensor& x, std::span<const std::int64_t> axes) {
  const std::size_t r = x.ndim();
  shape_vector perm(r);
  if (axes.empty()) {
    for (std::size_t i = 0; i < r; ++i) perm[i] = std::int64_t(r - 1 - i);
    return perm;
  }
  if (axes.size() != r)
    fail(op, kiln::detail::concat("axes ", runtime::shape_to_string(axes), " must list each of the ", r, " axes of ", describe_operand(x), " once"));
  std::vector<bool> seen(r, false);
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t a = normalize_axis(op, axes[i], r);
    if (seen[a]) fail(op, kiln::detail::concat("axes ", runtime::shape_to_string(axes), " name axis ", a, " twice"));
    seen[a] = true;
    perm[i] = std::int64_t(a);
  }
  return perm;
}
}  // namespace detail

/// out = x with its axes reordered: axis i of out is axis axes[i] of x (empty: reversed).
/// `x.permute(axes)` is the same as a view.
inline void permute_dims(const tensor& x, std::span<const std::int64_t> axes, const tensor& out) {
  constexpr std::string_view op = "permute_dims";
  detail::check_same_dtype(op, x, out);
  const tensor v = x.permute(detail::permutation(op, x, axes));
  check_output(op, out, x.type(), v.shape());
  detail::check_disjoint(op, x, out);
  detail::copy_unchecked(v, out);
}
inline tensor permute_dims(const tensor& x, std::span<const std::int64_t> axes = {}) {
  constexpr std::string_view op = "permute_dims";
  if (!x.defined()) fail(op, "the input is undefined");
  const tensor v = x.permute(detail::permutation(op, x, axes));
  tensor out = new_output(v.shape(), x.type());
  detail::copy_unchecked(v, out);
  return out;
}
inline void permute_dims(const tensor& x, std::initializer_list<std::int64_t> axes, const tensor& out) {
  permute_dims(x, std::span<const std::int64_t>(axes.begin(), axes.size()), out);
}
inline tensor permute_dims(const tensor& x, std::initializer_list<std::int64_t> axes) {
  return permute_dims(x, std::span<const std::int64_t>(axes.begin(), axes.size()));
}

// ---- concat and split -------------------------------------------------------------------------------------

namespace detail {
/// The shape of the concatenation of `xs` along `axis`, checked.
inline shape_vector concat_shape(std::string_view op, std::span<const tensor> xs, std::int64_t axis, std::size_t& a) {
  if (xs.empty()) fail(op, "needs at least one tensor");
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (!xs[i].defined()) fail(op, kiln::detail::concat("input ", i, " is undefined"));
  const tensor& x0 = xs[0];
  if (x0.ndim() == 0) fail(op, "cannot concatenate scalars");
  a = normalize_axis(op, axis, x0.ndim());
  shape_vector s = x0.shape();
  for (std::size_t i = 1; i < xs.size(); ++i) {
    const tensor& x = xs[i];
    bool same = x.type() == x0.type() && x.ndim() == x0.ndim();
    for (std::size_t k = 0; same && k < x.ndim(); ++k) same = k == a || x.shape(k) == x0.shape(k);
    if (!same)
      fail(op, kiln::detail::concat("input ", i, " is ", describe_operand(x), " and input 0 is ", describe_operand(x0),
                                    "; they must have the same dtype and shape except along axis ", a));
    s[a] += x.shape(a);
  }
  return s;
}
}  // namespace detail

/// out = the tensors `xs` joined along `axis` (same dtype, same shapes but along `axis`).
inline void concat(std::span<const tensor> xs, std::int64_t axis, const tensor& out) {
  constexpr std::string_view op = "concat";
  std::size_t a = 0;
  const shape_vector s = detail::concat_shape(op, xs, axis, a);
  check_output(op, out, xs[0].type(), s);
  for (const tensor& x : xs) detail::check_disjoint(op, x, out);
  std::int64_t at = 0;
  for (const tensor& x : xs) {
    detail::copy_unchecked(x, out.slice(a, at, at + x.shape(a)));
    at += x.shape(a);
  }
}
inline tensor concat(std::span<const tensor> xs, std::int64_t axis = 0) {
  std::size_t a = 0;
  shape_vector shape = detail::concat_shape("concat", xs, axis, a);  // checks xs before xs[0] is read
  tensor out = new_output(std::move(shape), xs[0].type());
  concat(xs, axis, out);
  return out;
}
inline void concat(std::initializer_list<tensor> xs, std::int64_t axis, const tensor& out) {
  concat(std::span<const tensor>(xs.begin(), xs.size()), axis, out);
}
inline tensor concat(std::initializer_list<tensor> xs, std::int64_t axis = 0) {
  return concat(std::span<const tensor>(xs.begin(), xs.size()), axis);
}

/// Splits x along `axis` into `outs`, in order: each output takes as many positions of the axis
/// as it has, and together they take all of them.
inline void split(const tensor& x, std::int64_t axis, std::span<const tensor> outs) {
  constexpr std::string_view op = "split";
  if (!x.defined()) fail(op, "the input is undefined");
  if (x.ndim() == 0) fail(op, "cannot split a scalar");
  const std::size_t a = detail::normalize_axis(op, axis, x.ndim());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const tensor& o = outs[i];
    bool ok = o.defined() && o.type() == x.type() && o.ndim() == x.ndim();
    for (std::size_t k = 0; ok && k < x.ndim(); ++k) ok = k == a || o.shape(k) == x.shape(k);
    if (!ok)
      fail(op, kiln::detail::concat("output ", i, " is ", describe_operand(o), "; it must have the dtype and shape of ", describe_operand(x),
                                    " except along axis ", a));
    detail::check_disjoint(op, x, o);
    total += o.shape(a);
  }
  if (total != x.shape(a))
    fail(op, kiln::detail::concat("the outputs take ", total, " positions of axis ", a, " but ", describe_operand(x), " has ", x.shape(a)));
  std::int64_t at = 0;
  for (const tensor& o : outs) {
    detail::copy_unchecked(x.slice(a, at, at + o.shape(a)), o);
    at += o.shape(a);
  }
}
/// x split along `axis` at the positions `indices` (non-decreasing, at most the axis' extent):
/// indices.size() + 1 new tensors.
inline std::vector<tensor> split(const tensor& x, std::span<const std::int64_t> indices, std::int64_t axis = 0) {
  constexpr std::string_view op = "split";
  if (!x.defined()) fail(op, "the input is undefined");
  if (x.ndim() == 0) fail(op, "cannot split a scalar");
  const std::size_t a = detail::normalize_axis(op, axis, x.ndim());
  std::vector<tensor> outs;
  std::int64_t prev = 0;
  for (std::size_t i = 0; i <= indices.size(); ++i) {
    const std::int64_t at = i < indices.size() ? indices[i] : x.shape(a);
    if (at < prev || at > x.shape(a))
      fail(op, kiln::detail::concat("split indices ", runtime::shape_to_string(indices), " must be non-decreasing and at most ", x.shape(a),
                                    " (axis ", a, " of ", describe_operand(x), ")"));
    shape_vector s = x.shape();
    s[a] = at - prev;
    outs.push_back(new_output(std::move(s), x.type()));
    prev = at;
  }
  split(x, axis, outs);
  return outs;
}
inline std::vector<tensor> split(const tensor& x, std::initializer_list<std::int64_t> indices, std::int64_t axis = 0) {
  return split(x, std::span<const std::int64_t>(indices.begin(), indices.size()), axis);
}
/// x split along `axis` into `sections` equal parts (the extent must divide evenly).
inline std::vector<tensor> split(const tensor& x, std::int64_t sections, std::int64_t axis = 0) {
  constexpr std::string_view op = "split";
  if (!x.defined()) fail(op, "the input is undefined");
  if (x.ndim() == 0) fail(op, "cannot split a scalar");
  const std::size_t a = detail::normalize_axis(op, axis, x.ndim());
  if (sections <= 0 || x.shape(a) % sections != 0)
    fail(op, kiln::detail::concat("cannot split axis ", a, " of ", describe_operand(x), " into ", sections, " equal sections"));
  shape_vector at;
  for (std::int64_t i = 1; i < sections; ++i) at.push_back(i * (x.shape(a) / sections));
  return split(x, std::span<const std::int64_t>(at), axis);
}

// ---- strided_slice ------------------------------------------------------------------------------------------

/// x[begin:end:stride] on each of `axes` (the IR's `strided_slice`), as a view. Python's rules:
/// negative begin and end count from the end, both are clamped to the axis, a negative stride
/// walks backwards, and an empty `strides` means 1 everywhere.
inline tensor strided_slice_view(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                                 std::span<const std::int64_t> end, std::span<const std::int64_t> strides = {}) {
  constexpr std::string_view op = "strided_slice";
  if (!x.defined()) fail(op, "the input is undefined");
  if (begin.size() != axes.size() || end.size() != axes.size() || (!strides.empty() && strides.size() != axes.size()))
    fail(op, kiln::detail::concat("axes, begin, end and strides must have the same length, got ", axes.size(), ", ", begin.size(), ", ",
                                  end.size(), " and ", strides.size()));
  shape_vector shape = x.shape(), st = x.strides();
  std::int64_t offset = 0;  // in elements
  std::vector<bool> seen(x.ndim(), false);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::size_t a = detail::normalize_axis(op, axes[i], x.ndim());
    if (seen[a]) fail(op, kiln::detail::concat("axis ", a, " is sliced twice"));
    seen[a] = true;
    const std::int64_t s = strides.empty() ? 1 : strides[i], n = x.shape(a);
    if (s == 0) fail(op, kiln::detail::concat("the stride of axis ", a, " is 0"));
    auto clamp = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
    const std::int64_t b = s > 0 ? clamp(begin[i], 0, n) : clamp(begin[i], -1, n - 1);
    const std::int64_t e = s > 0 ? clamp(end[i], 0, n) : clamp(end[i], -1, n - 1);
    const std::int64_t len = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e - s - 1) / -s : 0);
    shape[a] = len;
    if (len > 0) offset += b * x.strides()[a];
    st[a] = x.strides()[a] * s;
  }
  const auto byte_offset = std::int64_t(x.byte_offset()) + offset * std::int64_t(size_of(x.type()));
  return tensor::from_storage(x.data_storage(), std::size_t(byte_offset), x.type(), std::move(shape), std::move(st));
}
/// The slice copied into `out`.
inline void strided_slice(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                          std::span<const std::int64_t> end, std::span<const std::int64_t> strides, const tensor& out) {
  constexpr std::string_view op = "strided_slice";
  const tensor v = strided_slice_view(x, axes, begin, end, strides);
  check_output(op, out, x.type(), v.shape());
  detail::check_disjoint(op, x, out);
  detail::copy_unchecked(v, out);
}
/// The slice as a new contiguous tensor.
inline tensor strided_slice(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                            std::span<const std::int64_t> end, std::span<const std::int64_t> strides = {}) {
  return strided_slice_view(x, axes, begin, end, strides).clone();
}
inline tensor strided_slice(const tensor& x, std::initializer_list<std::int64_t> axes, std::initializer_list<std::int64_t> begin,
                            std::initializer_list<std::int64_t> end, std::initializer_list<std::int64_t> strides = {}) {
  auto sp = [](std::initializer_list<std::int64_t> l) { return std::span<const std::int64_t>(l.begin(), l.size()); };
  return strided_slice(x, sp(axes), sp(begin), sp(end), sp(strides));
}

// ---- take ---------------------------------------------------------------------------------------------------

namespace detail {

inline shape_vector take_shape(std::string_view op, const tensor& x, const tensor& indices, std::optional<std::int64_t> axis, std::size_t& a) {
  if (!x.defined() || !indices.defined()) fail(op, "an operand is undefined");
  if (indices.type() != dtype::int32 && indices.type() != dtype::int64)
    fail(op, kiln::detail::concat("the indices must be int32 or int64, got ", describe_operand(indices)));
  if (!axis) {
    a = 0;
    return indices.shape();
  }
  if (x.ndim() == 0) fail(op, "cannot take along an axis of a scalar");
  a = normalize_axis(op, *axis, x.ndim());
  shape_vector s(x.shape().begin(), x.shape().begin() + std::ptrdiff_t(a));
  s.insert(s.end(), indices.shape().begin(), indices.shape().end());
  s.insert(s.end(), x.shape().begin() + std::ptrdiff_t(a) + 1, x.shape().end());
  return s;
}

/// The indices in row-major order, negative ones wrapped, each checked against `n`.
inline std::vector<std::int64_t> checked_indices(std::string_view op, const tensor& indices, std::int64_t n, std::size_t axis) {
  std::vector<std::int64_t> out;
  out.reserve(std::size_t(indices.numel()));
  auto add = [&](std::int64_t i) {
    const std::int64_t k = i < 0 ? i + n : i;
    if (k < 0 || k >= n)
      fail(op, kiln::detail::concat("index ", i, " (element ", out.size(), " of the indices) is out of range for axis ", axis, " of extent ", n));
    out.push_back(k);
  };
  if (indices.type() == dtype::int32)
    for (auto i : indices.to_vector<std::int32_t>()) add(i);
  else
    for (auto i : indices.to_vector<std::int64_t>()) add(i);
  return out;
}

}  // namespace detail

/// out = x indexed along `axis` by `indices` (int32 or int64; negative ones count from the end):
/// out[i..., j..., k...] = x[i..., indices[j...], k...]. Without an axis, x is read flattened
/// and out has the indices' shape. An index out of range is an error, found before anything is
/// written.
inline void take(const tensor& x, const tensor& indices, std::optional<std::int64_t> axis, const tensor& out) {
  constexpr std::string_view op = "take";
  std::size_t a = 0;
  const shape_vector s = detail::take_shape(op, x, indices, axis, a);
  check_output(op, out, x.type(), s);
  detail::check_disjoint(op, x, out);
  detail::check_disjoint(op, indices, out);
  const tensor src = axis ? x.contiguous() : x.contiguous().view({x.numel()});
  const std::vector<std::int64_t> idx = detail::checked_indices(op, indices, src.shape(a), a);
  // src as [outer, extent, inner]; the result as [outer, count, inner], contiguous.
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= src.shape(i);
  for (std::size_t i = a + 1; i < src.ndim(); ++i) inner *= src.shape(i);
  const bool direct = out.is_contiguous();
  const tensor dst = direct ? out : new_output(out.shape(), out.type());
  const std::size_t block = std::size_t(inner) * size_of(x.type());
  const auto* from = static_cast<const char*>(src.data());
  auto* to = static_cast<char*>(dst.data());
  const std::int64_t extent = src.shape(a), count = std::int64_t(idx.size());
  if (block != 0)
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t j = 0; j < count; ++j)
        std::memcpy(to + std::size_t(o * count + j) * block, from + std::size_t(o * extent + idx[std::size_t(j)]) * block, block);
  if (!direct) detail::copy_unchecked(dst, out);
}
inline tensor take(const tensor& x, const tensor& indices, std::optional<std::int64_t> axis = std::nullopt) {
  std::size_t a = 0;
  shape_vector shape = detail::take_shape("take", x, indices, axis, a);  // checks x before x.type() is read
  tensor out = new_output(std::move(shape), x.type());
  take(x, indices, axis, out);
  return out;
}

namespace detail {
/// Checks gather_elements' operands; the normalized axis.
inline std::size_t gather_elements_axis(std::string_view op, const tensor& x, const tensor& indices, std::int64_t axis) {
  if (!x.defined() || !indices.defined()) fail(op, "an operand is undefined");
  if (indices.type() != dtype::int32 && indices.type() != dtype::int64)
    fail(op, kiln::detail::concat("the indices must be int32 or int64, got ", describe_operand(indices)));
  if (x.ndim() == 0) fail(op, "cannot gather along an axis of a scalar");
  if (indices.ndim() != x.ndim())
    fail(op, kiln::detail::concat("the indices ", describe_operand(indices), " must have the rank of x ", describe_operand(x)));
  const std::size_t a = normalize_axis(op, axis, x.ndim());
  for (std::size_t d = 0; d < x.ndim(); ++d)
    if (d != a && indices.shape(d) > x.shape(d))
      fail(op, kiln::detail::concat("the indices ", describe_operand(indices), " are longer than x ", describe_operand(x), " along axis ", d));
  return a;
}
}  // namespace detail

/// out[i...] = x[i...] with the index along `axis` replaced by indices[i...] (ONNX's GatherElements,
/// numpy's take_along_axis): out has the indices' shape; negative indices count from the end.
/// An index out of range is an error, found before anything is written.
inline void gather_elements(const tensor& x, const tensor& indices, std::int64_t axis, const tensor& out) {
  constexpr std::string_view op = "gather_elements";
  const std::size_t a = detail::gather_elements_axis(op, x, indices, axis);
  check_output(op, out, x.type(), indices.shape());
  detail::check_disjoint(op, x, out);
  detail::check_disjoint(op, indices, out);
  const std::vector<std::int64_t> idx = detail::checked_indices(op, indices, x.shape(a), a);  // row-major over the indices
  const std::size_t item = size_of(x.type());
  dims x_strides(x.strides().begin(), x.strides().end()), out_strides(out.strides().begin(), out.strides().end());
  const std::int64_t along = x_strides[a];
  x_strides[a] = 0;  // the index along the axis comes from `indices`
  const auto* from = static_cast<const char*>(x.data());
  auto* to = static_cast<char*>(out.data());
  std::size_t t = 0;
  for_each_offsets<2>(std::span<const std::int64_t>(indices.shape().data(), indices.ndim()), {x_strides.data(), out_strides.data()},
                      [&](const std::array<std::int64_t, 2>& off) {
                        std::memcpy(to + std::size_t(off[1]) * item, from + std::size_t(off[0] + idx[t++] * along) * item, item);
                      });
}
inline tensor gather_elements(const tensor& x, const tensor& indices, std::int64_t axis = 0) {
  detail::gather_elements_axis("gather_elements", x, indices, axis);
  tensor out = new_output(indices.shape(), x.type());
  gather_elements(x, indices, axis, out);
  return out;
}

/// How scatter_elements combines an update with the element it lands on.
enum class scatter_reduction { update, add, mul, max, min };

/// The reduction named `s` ("update", "add", "mul", "max", "min"), or an error naming `op`.
inline scatter_reduction parse_scatter_reduction(std::string_view op, std::string_view s) {
  if (s == "update") return scatter_reduction::update;
  if (s == "add") return scatter_reduction::add;
  if (s == "mul") return scatter_reduction::mul;
  if (s == "max") return scatter_reduction::max;
  if (s == "min") return scatter_reduction::min;
  fail(op, kiln::detail::concat("the reduction must be 'update', 'add', 'mul', 'max' or 'min', not '", s, "'"));
}

/// out = x with each updates[i...] combined into out[i...] with its index along `axis` replaced
/// by indices[i...] (ONNX's ScatterElements): written over it (`update`; of duplicate indices
/// the last in row-major order wins), added, multiplied, or the larger or smaller kept. Indices
/// and updates have one shape, of x's rank; negative indices count from the end. An index out
/// of range is an error, found before anything is written.
inline void scatter_elements(const tensor& x, const tensor& indices, const tensor& updates, std::int64_t axis, scatter_reduction reduction,
                             const tensor& out) {
  constexpr std::string_view op = "scatter_elements";
  const std::size_t a = detail::gather_elements_axis(op, x, indices, axis);
  if (!updates.defined()) fail(op, "an operand is undefined");
  if (updates.shape() != indices.shape() || updates.type() != x.type())
    fail(op, kiln::detail::concat("the updates must be ", name(x.type()), runtime::shape_to_string(indices.shape()),
                                  " (x's dtype, the indices' shape), got ", describe_operand(updates)));
  if (reduction != scatter_reduction::update && !ops::is_numeric(x.type()))
    fail(op, kiln::detail::concat("cannot combine ", name(x.type()), " elements; only 'update' takes them"));
  check_output(op, out, x.type(), x.shape());
  detail::check_disjoint(op, x, out);
  detail::check_disjoint(op, indices, out);
  detail::check_disjoint(op, updates, out);
  const std::vector<std::int64_t> idx = detail::checked_indices(op, indices, x.shape(a), a);
  detail::copy_unchecked(x, out);
  dims out_strides(out.strides().begin(), out.strides().end());
  const dims upd_strides(updates.strides().begin(), updates.strides().end());
  const std::int64_t along = out_strides[a];
  out_strides[a] = 0;
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    T* o = static_cast<T*>(out.data());
    const T* u = static_cast<const T*>(updates.data());
    std::size_t t = 0;
    for_each_offsets<2>(std::span<const std::int64_t>(indices.shape().data(), indices.ndim()), {out_strides.data(), upd_strides.data()},
                        [&](const std::array<std::int64_t, 2>& off) {
                          T& dst = o[off[0] + idx[t++] * along];
                          const T v = u[off[1]];
                          switch (reduction) {
                            case scatter_reduction::update: dst = v; break;
                            case scatter_reduction::add: dst = ops::add{}(dst, v); break;
                            case scatter_reduction::mul: dst = ops::multiply{}(dst, v); break;
                            case scatter_reduction::max: dst = ops::maximum{}(dst, v); break;
                            case scatter_reduction::min: dst = ops::minimum{}(dst, v); break;
                          }
                        });
  });
}
inline tensor scatter_elements(const tensor& x, const tensor& indices, const tensor& updates, std::int64_t axis = 0,
                               scatter_reduction reduction = scatter_reduction::update) {
  if (!x.defined()) fail("scatter_elements", "an operand is undefined");
  tensor out = new_output(x.shape(), x.type());
  scatter_elements(x, indices, updates, axis, reduction, out);
  return out;
}

// ---- gather_nd, scatter_nd ---------------------------------------------------------------------------------

namespace detail {

/// How gather_nd and scatter_nd see their operands: x as [batch, rows, slice] where the k index
/// axes after `batch_dims` make `rows`, the indices as [batch, count, k]; the element offsets
/// (in slices) of every index tuple, checked, in row-major order.
struct nd_plan {
  std::int64_t batch = 1, rows = 1, slice = 1, count = 1, k = 0;
  std::vector<std::int64_t> offsets;  ///< batch * count row numbers within x viewed as [batch * rows, slice]
};

inline nd_plan plan_nd(std::string_view op, const tensor& x, const tensor& indices, std::int64_t batch_dims) {
  if (!x.defined() || !indices.defined()) fail(op, "an operand is undefined");
  if (indices.type() != dtype::int32 && indices.type() != dtype::int64)
    fail(op, kiln::detail::concat("the indices must be int32 or int64, got ", describe_operand(indices)));
  if (indices.ndim() < 1) fail(op, "the indices must have rank at least 1 (the last axis holds the index tuples)");
  const auto b = static_cast<std::size_t>(batch_dims);
  if (batch_dims < 0 || b >= indices.ndim() || b > x.ndim())
    fail(op, kiln::detail::concat("batch_dims ", batch_dims, " must be in [0, ", std::min(indices.ndim() - 1, x.ndim()), "]"));
  nd_plan p;
  p.k = indices.shape(indices.ndim() - 1);
  if (p.k < 1 || std::size_t(p.k) > x.ndim() - b)
    fail(op, kiln::detail::concat("index tuples of length ", p.k, " do not fit x ", describe_operand(x), " after ", batch_dims, " batch axes"));
  for (std::size_t d = 0; d < b; ++d) {
    if (indices.shape(d) != x.shape(d))
      fail(op, kiln::detail::concat("batch axis ", d, " of the indices ", describe_operand(indices), " differs from x ", describe_operand(x)));
    p.batch *= x.shape(d);
  }
  for (std::size_t d = b; d < b + std::size_t(p.k); ++d) p.rows *= x.shape(d);
  for (std::size_t d = b + std::size_t(p.k); d < x.ndim(); ++d) p.slice *= x.shape(d);
  for (std::size_t d = b; d + 1 < indices.ndim(); ++d) p.count *= indices.shape(d);
  const std::vector<std::int64_t> raw = indices.type() == dtype::int32 ? [&] {
    const auto v = indices.to_vector<std::int32_t>();
    return std::vector<std::int64_t>(v.begin(), v.end());
  }() : indices.to_vector<std::int64_t>();
  p.offsets.reserve(std::size_t(p.batch * p.count));
  for (std::int64_t t = 0; t < p.batch * p.count; ++t) {
    std::int64_t row = 0;
    for (std::int64_t j = 0; j < p.k; ++j) {
      const std::int64_t n = x.shape(b + std::size_t(j)), i = raw[std::size_t(t * p.k + j)];
      const std::int64_t v = i < 0 ? i + n : i;
      if (v < 0 || v >= n)
        fail(op, kiln::detail::concat("index ", i, " (tuple ", t, ", position ", j, ") is out of range for axis ", b + std::size_t(j), " of extent ", n));
      row = row * n + v;
    }
    p.offsets.push_back((t / p.count) * p.rows + row);
  }
  return p;
}

inline shape_vector gather_nd_shape(const tensor& x, const tensor& indices, std::int64_t batch_dims, const nd_plan& p) {
  shape_vector s(indices.shape().begin(), indices.shape().end() - 1);
  for (std::size_t d = std::size_t(batch_dims) + std::size_t(p.k); d < x.ndim(); ++d) s.push_back(x.shape(d));
  return s;
}

}  // namespace detail

/// ONNX's GatherND: each index tuple (the last axis of `indices`, int32 or int64, negative
/// counting from the end) picks a slice of x after the first `batch_dims` axes, which indices
/// and x share. out has shape indices.shape[:-1] + x.shape[batch_dims + k:]. An index out of
/// range is an error, found before anything is written.
inline void gather_nd(const tensor& x, const tensor& indices, std::int64_t batch_dims, const tensor& out) {
  constexpr std::string_view op = "gather_nd";
  const detail::nd_plan p = detail::plan_nd(op, x, indices, batch_dims);
  check_output(op, out, x.type(), detail::gather_nd_shape(x, indices, batch_dims, p));
  detail::check_disjoint(op, x, out);
  const tensor src = x.contiguous();
  const bool direct = out.is_contiguous();
  const tensor dst = direct ? out : new_output(out.shape(), x.type());
  const std::size_t bytes = std::size_t(p.slice) * size_of(x.type());
  const auto* from = static_cast<const char*>(src.data());
  auto* to = static_cast<char*>(dst.data());
  for (std::size_t t = 0; t < p.offsets.size(); ++t) std::memcpy(to + t * bytes, from + std::size_t(p.offsets[t]) * bytes, bytes);
  if (!direct) detail::copy_unchecked(dst, out);
}
inline tensor gather_nd(const tensor& x, const tensor& indices, std::int64_t batch_dims = 0) {
  const detail::nd_plan p = detail::plan_nd("gather_nd", x, indices, batch_dims);
  tensor out = new_output(detail::gather_nd_shape(x, indices, batch_dims, p), x.type());
  gather_nd(x, indices, batch_dims, out);
  return out;
}

/// ONNX's ScatterND: out = x with the slice each index tuple names (the last axis of `indices`)
/// replaced by, or combined with, the matching slice of `updates` (shape indices.shape[:-1] +
/// x.shape[k:]); duplicates combine in row-major order (the last one wins for `update`).
inline void scatter_nd(const tensor& x, const tensor& indices, const tensor& updates, scatter_reduction reduction, const tensor& out) {
  constexpr std::string_view op = "scatter_nd";
  const detail::nd_plan p = detail::plan_nd(op, x, indices, 0);
  if (!updates.defined()) fail(op, "an operand is undefined");
  const shape_vector want = detail::gather_nd_shape(x, indices, 0, p);
  if (updates.shape() != want || updates.type() != x.type())
    fail(op, kiln::detail::concat("the updates must be ", name(x.type()), runtime::shape_to_string(want), ", got ", describe_operand(updates)));
  if (reduction != scatter_reduction::update && !ops::is_numeric(x.type()))
    fail(op, kiln::detail::concat("cannot combine ", name(x.type()), " elements; only 'update' takes them"));
  check_output(op, out, x.type(), x.shape());
  detail::check_disjoint(op, indices, out);
  detail::check_disjoint(op, updates, out);
  const bool direct = out.is_contiguous() && !overlaps(out, x);
  const tensor dst = direct ? out : new_output(x.shape(), x.type());
  detail::copy_unchecked(x, dst);
  const tensor u = updates.contiguous();
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    T* o = static_cast<T*>(dst.data());
    const T* src = static_cast<const T*>(u.data());
    for (std::size_t t = 0; t < p.offsets.size(); ++t) {
      T* row = o + p.offsets[t] * p.slice;
      const T* v = src + std::int64_t(t) * p.slice;
      for (std::int64_t e = 0; e < p.slice; ++e) switch (reduction) {
          case scatter_reduction::update: row[e] = v[e]; break;
          case scatter_reduction::add: row[e] = ops::add{}(row[e], v[e]); break;
          case scatter_reduction::mul: row[e] = ops::multiply{}(row[e], v[e]); break;
          case scatter_reduction::max: row[e] = ops::maximum{}(row[e], v[e]); break;
          case scatter_reduction::min: row[e] = ops::minimum{}(row[e], v[e]); break;
        }
    }
  });
  if (!direct) detail::copy_unchecked(dst, out);
}
inline tensor scatter_nd(const tensor& x, const tensor& indices, const tensor& updates, scatter_reduction reduction = scatter_reduction::update) {
  if (!x.defined()) fail("scatter_nd", "an operand is undefined");
  tensor out = new_output(x.shape(), x.type());
  scatter_nd(x, indices, updates, reduction, out);
  return out;
}

// ---- pad --------------------------------------------------------------------------------------------------

/// How `pad` fills the border: with a value; with the nearest edge element; or with the mirror
/// image of the elements next to the edge, the edge itself not repeated (numpy's "reflect":
/// [1 2 3] padded by 2 is [3 2 1 2 3 2 1]).
enum class pad_mode { constant, edge, reflect };

/// "constant", "edge" or "reflect" as a `pad_mode`; another name is an error.
inline pad_mode parse_pad_mode(std::string_view s) {
  if (s == "constant") return pad_mode::constant;
  if (s == "edge") return pad_mode::edge;
  if (s == "reflect") return pad_mode::reflect;
  fail("pad", kiln::detail::concat("unknown pad mode \"", s, "\" (constant, edge or reflect)"));
}

namespace detail {

inline shape_vector pad_shape(std::string_view op, const tensor& x, std::span<const std::int64_t> widths, pad_mode mode) {
  if (!x.defined()) fail(op, "the input is undefined");
  if (widths.size() != 2 * x.ndim())
    fail(op, kiln::detail::concat("pad_width must have 2 values (before, after) per axis of ", describe_operand(x), ", got ", widths.size()));
  shape_vector s = x.shape();
  for (std::size_t i = 0; i < x.ndim(); ++i) {
    const std::int64_t lo = widths[2 * i], hi = widths[2 * i + 1], n = x.shape(i);
    if (lo < 0 || hi < 0) fail(op, kiln::detail::concat("pad_width of axis ", i, " is negative (", lo, ", ", hi, ")"));
    if (mode == pad_mode::reflect && (lo >= n || hi >= n) && (lo || hi))
      fail(op, kiln::detail::concat("reflect padding (", lo, ", ", hi, ") of axis ", i, " must be smaller than its extent ", n));
    if (mode == pad_mode::edge && n == 0 && (lo || hi)) fail(op, kiln::detail::concat("edge padding of axis ", i, " needs a non-empty axis"));
    s[i] = n + lo + hi;
  }
  return s;
}

/// `t` with every element set to `v` (a value of `t`'s dtype, checked by the caller).
template <class T>
void fill(const tensor& t, T v) {
  if (t.numel() == 0) return;
  loop_plan<1>({&t}).for_each_run([&](std::int64_t n, const std::array<char*, 1>& p, const std::array<std::int64_t, 1>& st) {
    for (std::int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * st[0], &v, sizeof(T));
  });
}

}  // namespace detail

/// out = x padded by pad_width[2i] elements before and pad_width[2i + 1] after on each axis i.
/// `value` is the constant (converted to x's dtype; for an integer dtype it must be an integer
/// in range). Reflect padding must be smaller than the axis; edge padding needs a non-empty axis.
inline void pad(const tensor& x, std::span<const std::int64_t> pad_width, pad_mode mode, double value, const tensor& out) {
  constexpr std::string_view op = "pad";
  const shape_vector s = detail::pad_shape(op, x, pad_width, mode);
  check_output(op, out, x.type(), s);
  detail::check_disjoint(op, x, out);
  // Converted and checked before anything is written.
  std::function<void(const tensor&)> fill_value;
  if (mode == pad_mode::constant)
    visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
      T v;
      if (x.type() == dtype::bool_) v = value != 0;
      else if constexpr (std::is_integral_v<T>) {
        if (!(value >= double(std::numeric_limits<T>::min()) && value <= double(std::numeric_limits<T>::max()) && value == std::trunc(value)))
          fail(op, kiln::detail::concat("the pad value ", value, " is not a ", name(x.type())));
        v = T(value);
      } else {
        v = T(value);
      }
      fill_value = [v](const tensor& t) { detail::fill<T>(t, v); };
    });
  // The interior, then each axis' borders in turn: after axis a, axes 0..a are complete and the
  // later axes are filled on their interior extent only, which is all the next axes copy from.
  const std::size_t r = x.ndim();
  tensor part = out;
  for (std::size_t i = 0; i < r; ++i) part = part.slice(i, pad_width[2 * i], pad_width[2 * i] + x.shape(i));
  detail::copy_unchecked(x, part);
  for (std::size_t a = 0; a < r; ++a) {
    const std::int64_t lo = pad_width[2 * a], n = x.shape(a), total = s[a];
    // `band`: axes < a full, axis a full, axes > a interior.
    tensor band = out;
    for (std::size_t i = a + 1; i < r; ++i) band = band.slice(i, pad_width[2 * i], pad_width[2 * i] + x.shape(i));
    if (mode == pad_mode::constant) {
      fill_value(band.slice(a, 0, lo));
      fill_value(band.slice(a, lo + n, total));
      continue;
    }
    for (std::int64_t p = 0; p < total; ++p) {
      if (p >= lo && p < lo + n) continue;
      const tensor dst = band.slice(a, p, p + 1);
      std::int64_t q = p - lo;  // the source position on axis a
      if (mode == pad_mode::edge) q = std::clamp<std::int64_t>(q, 0, n - 1);
      else q = q < 0 ? -q : 2 * (n - 1) - q;
      detail::copy_unchecked(band.slice(a, lo + q, lo + q + 1), dst);
    }
  }
}
inline tensor pad(const tensor& x, std::span<const std::int64_t> pad_width, pad_mode mode = pad_mode::constant, double value = 0) {
  shape_vector shape = detail::pad_shape("pad", x, pad_width, mode);  // checks x before x.type() is read
  tensor out = new_output(std::move(shape), x.type());
  pad(x, pad_width, mode, value, out);
  return out;
}
inline tensor pad(const tensor& x, std::initializer_list<std::int64_t> pad_width, pad_mode mode = pad_mode::constant, double value = 0) {
  return pad(x, std::span<const std::int64_t>(pad_width.begin(), pad_width.size()), mode, value);
}

}  // namespace kiln::kernels
