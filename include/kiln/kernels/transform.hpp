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

#include <kiln/support/config.hpp>

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
KILN_DECL void copy_unchecked(const tensor& src, const tensor& out);

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

KILN_DECL void check_disjoint(std::string_view op, const tensor& x, const tensor& out);

}  // namespace detail

/// out = x broadcast (numpy) to out's shape, in out's layout. With equal shapes, a plain copy.
/// `out` must not overlap `x`.
KILN_DECL void copy(const tensor& x, const tensor& out);

// ---- broadcast_to -------------------------------------------------------------------------------------

/// out = x broadcast to out's shape (the IR's `broadcast_to`).
KILN_DECL void broadcast_to(const tensor& x, const tensor& out);
/// x broadcast to `shape`, as a new contiguous tensor.
KILN_DECL tensor broadcast_to(const tensor& x, std::span<const std::int64_t> shape);
KILN_DECL tensor broadcast_to(const tensor& x, std::initializer_list<std::int64_t> shape);
/// x broadcast to `shape` as a view: broadcast dimensions get stride 0, so nothing is copied
/// (and writing through the view writes the shared elements).
KILN_DECL tensor broadcast_view(const tensor& x, std::span<const std::int64_t> shape);

// ---- reshape ------------------------------------------------------------------------------------------

/// x with the same elements in row-major order and the shape `shape` (one dimension may be -1):
/// a view sharing x's storage whenever x's layout allows (always for a contiguous x), otherwise
/// a contiguous copy, as numpy's `reshape`.
KILN_DECL tensor reshape(const tensor& x, std::span<const std::int64_t> shape);
KILN_DECL tensor reshape(const tensor& x, std::initializer_list<std::int64_t> shape);
/// Copies x's elements, in row-major order, into `out` (any shape with as many elements).
KILN_DECL void reshape(const tensor& x, const tensor& out);

// ---- permute_dims ---------------------------------------------------------------------------------------

namespace detail {
/// The permutation `axes` normalised (negative axes count from the end; empty: reversed).
KILN_DECL shape_vector permutation(std::string_view op, const tensor& x, std::span<const std::int64_t> axes);
}  // namespace detail

/// out = x with its axes reordered: axis i of out is axis axes[i] of x (empty: reversed).
/// `x.permute(axes)` is the same as a view.
KILN_DECL void permute_dims(const tensor& x, std::span<const std::int64_t> axes, const tensor& out);
KILN_DECL tensor permute_dims(const tensor& x, std::span<const std::int64_t> axes = {});
KILN_DECL void permute_dims(const tensor& x, std::initializer_list<std::int64_t> axes, const tensor& out);
KILN_DECL tensor permute_dims(const tensor& x, std::initializer_list<std::int64_t> axes);

// ---- concat and split -------------------------------------------------------------------------------------

/// out = the tensors `xs` joined along `axis` (same dtype, same shapes but along `axis`).
KILN_DECL void concat(std::span<const tensor> xs, std::int64_t axis, const tensor& out);
KILN_DECL tensor concat(std::span<const tensor> xs, std::int64_t axis = 0);
KILN_DECL void concat(std::initializer_list<tensor> xs, std::int64_t axis, const tensor& out);
KILN_DECL tensor concat(std::initializer_list<tensor> xs, std::int64_t axis = 0);

/// Splits x along `axis` into `outs`, in order: each output takes as many positions of the axis
/// as it has, and together they take all of them.
KILN_DECL void split(const tensor& x, std::int64_t axis, std::span<const tensor> outs);
/// x split along `axis` at the positions `indices` (non-decreasing, at most the axis' extent):
/// indices.size() + 1 new tensors.
KILN_DECL std::vector<tensor> split(const tensor& x, std::span<const std::int64_t> indices, std::int64_t axis = 0);
KILN_DECL std::vector<tensor> split(const tensor& x, std::initializer_list<std::int64_t> indices, std::int64_t axis = 0);
/// x split along `axis` into `sections` equal parts (the extent must divide evenly).
KILN_DECL std::vector<tensor> split(const tensor& x, std::int64_t sections, std::int64_t axis = 0);

// ---- strided_slice ------------------------------------------------------------------------------------------

/// x[begin:end:stride] on each of `axes` (the IR's `strided_slice`), as a view. Python's rules:
/// negative begin and end count from the end, both are clamped to the axis, a negative stride
/// walks backwards, and an empty `strides` means 1 everywhere.
KILN_DECL tensor strided_slice_view(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                                    std::span<const std::int64_t> end, std::span<const std::int64_t> strides = {});
/// The slice copied into `out`.
KILN_DECL void strided_slice(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                             std::span<const std::int64_t> end, std::span<const std::int64_t> strides, const tensor& out);
/// The slice as a new contiguous tensor.
KILN_DECL tensor strided_slice(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                               std::span<const std::int64_t> end, std::span<const std::int64_t> strides = {});
KILN_DECL tensor strided_slice(const tensor& x, std::initializer_list<std::int64_t> axes, std::initializer_list<std::int64_t> begin,
                               std::initializer_list<std::int64_t> end, std::initializer_list<std::int64_t> strides = {});

// ---- take ---------------------------------------------------------------------------------------------------

/// out = x indexed along `axis` by `indices` (int32 or int64; negative ones count from the end):
/// out[i..., j..., k...] = x[i..., indices[j...], k...]. Without an axis, x is read flattened
/// and out has the indices' shape. An index out of range is an error, found before anything is
/// written.
KILN_DECL void take(const tensor& x, const tensor& indices, std::optional<std::int64_t> axis, const tensor& out);
KILN_DECL tensor take(const tensor& x, const tensor& indices, std::optional<std::int64_t> axis = std::nullopt);

/// out[i...] = x[i...] with the index along `axis` replaced by indices[i...] (ONNX's GatherElements,
/// numpy's take_along_axis): out has the indices' shape; negative indices count from the end.
/// An index out of range is an error, found before anything is written.
KILN_DECL void gather_elements(const tensor& x, const tensor& indices, std::int64_t axis, const tensor& out);
KILN_DECL tensor gather_elements(const tensor& x, const tensor& indices, std::int64_t axis = 0);

/// How scatter_elements combines an update with the element it lands on.
enum class scatter_reduction { update, add, mul, max, min };

/// The reduction named `s` ("update", "add", "mul", "max", "min"), or an error naming `op`.
KILN_DECL scatter_reduction parse_scatter_reduction(std::string_view op, std::string_view s);

/// out = x with each updates[i...] combined into out[i...] with its index along `axis` replaced
/// by indices[i...] (ONNX's ScatterElements): written over it (`update`; of duplicate indices
/// the last in row-major order wins), added, multiplied, or the larger or smaller kept. Indices
/// and updates have one shape, of x's rank; negative indices count from the end. An index out
/// of range is an error, found before anything is written.
KILN_DECL void scatter_elements(const tensor& x, const tensor& indices, const tensor& updates, std::int64_t axis, scatter_reduction reduction,
                                const tensor& out);
KILN_DECL tensor scatter_elements(const tensor& x, const tensor& indices, const tensor& updates, std::int64_t axis = 0,
                                  scatter_reduction reduction = scatter_reduction::update);

// ---- gather_nd, scatter_nd ---------------------------------------------------------------------------------

namespace detail {

/// How gather_nd and scatter_nd see their operands: x as [batch, rows, slice] where the k index
/// axes after `batch_dims` make `rows`, the indices as [batch, count, k]; the element offsets
/// (in slices) of every index tuple, checked, in row-major order.
struct nd_plan {
  std::int64_t batch = 1, rows = 1, slice = 1, count = 1, k = 0;
  std::vector<std::int64_t> offsets;  ///< batch * count row numbers within x viewed as [batch * rows, slice]
};

}  // namespace detail

/// ONNX's GatherND: each index tuple (the last axis of `indices`, int32 or int64, negative
/// counting from the end) picks a slice of x after the first `batch_dims` axes, which indices
/// and x share. out has shape indices.shape[:-1] + x.shape[batch_dims + k:]. An index out of
/// range is an error, found before anything is written.
KILN_DECL void gather_nd(const tensor& x, const tensor& indices, std::int64_t batch_dims, const tensor& out);
KILN_DECL tensor gather_nd(const tensor& x, const tensor& indices, std::int64_t batch_dims = 0);

/// ONNX's ScatterND: out = x with the slice each index tuple names (the last axis of `indices`)
/// replaced by, or combined with, the matching slice of `updates` (shape indices.shape[:-1] +
/// x.shape[k:]); duplicates combine in row-major order (the last one wins for `update`).
KILN_DECL void scatter_nd(const tensor& x, const tensor& indices, const tensor& updates, scatter_reduction reduction, const tensor& out);
KILN_DECL tensor scatter_nd(const tensor& x, const tensor& indices, const tensor& updates, scatter_reduction reduction = scatter_reduction::update);

// ---- pad --------------------------------------------------------------------------------------------------

/// How `pad` fills the border: with a value; with the nearest edge element; or with the mirror
/// image of the elements next to the edge, the edge itself not repeated (numpy's "reflect":
/// [1 2 3] padded by 2 is [3 2 1 2 3 2 1]).
enum class pad_mode { constant, edge, reflect };

/// "constant", "edge" or "reflect" as a `pad_mode`; another name is an error.
KILN_DECL pad_mode parse_pad_mode(std::string_view s);

namespace detail {

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
KILN_DECL void pad(const tensor& x, std::span<const std::int64_t> pad_width, pad_mode mode, double value, const tensor& out);
KILN_DECL tensor pad(const tensor& x, std::span<const std::int64_t> pad_width, pad_mode mode = pad_mode::constant, double value = 0);
KILN_DECL tensor pad(const tensor& x, std::initializer_list<std::int64_t> pad_width, pad_mode mode = pad_mode::constant, double value = 0);

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/transform.ipp>
#endif
