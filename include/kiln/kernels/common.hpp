// SPDX-License-Identifier: Apache-2.0
/// \file
/// What every kernel shares: the error type, the SIMD batch type, dtype dispatch, numpy
/// broadcasting, and `loop_plan`, which turns a loop over tensors of any shapes and layouts into
/// the fewest nested loops whose innermost one is as long as possible.
///
/// A plan covers one output and its inputs. Each input is broadcast to the output's shape (a
/// broadcast dimension gets stride 0), then adjacent dimensions are merged wherever every operand
/// steps through them as through one (so contiguous tensors of any rank become one flat loop),
/// and dimensions of size 1 are dropped. `for_each_run` then calls the kernel once per innermost
/// run with each operand's address and stride: the kernel vectorises what is contiguous (stride
/// of one element) or broadcast (stride 0) and falls back to a scalar loop otherwise.
#pragma once

#include <kiln/runtime/tensor.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>

#include <boost/container/small_vector.hpp>

// GCC 12's AVX-512 intrinsics headers trip its own -Wuninitialized (`_mm512_undefined_ps` and
// friends, GCC bug 105593) wherever they are inlined; the warnings point into those headers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <xsimd/xsimd.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::kernels {

using runtime::shape_vector;
using runtime::tensor;

/// Bad operands of a kernel: wrong dtypes, shapes that do not broadcast, an output of the wrong
/// shape. The message names the operator and the operands.
class kernel_error : public usage_error {
public:
  using usage_error::usage_error;
};

/// Throws `kernel_error("kiln::kernels::<op>: <what>")`.
[[noreturn]] __attribute__((noinline, cold)) inline void fail(std::string_view op, const std::string& what) {
  throw kernel_error(kiln::detail::concat("kiln::kernels::", op, ": ", what));
}

/// "float32[2, 3]": how messages name an operand.
inline std::string describe_operand(const tensor& t) { return describe(t); }  // found by ADL

/// The SIMD architecture of the kernels: the best one the translation unit is compiled for
/// (`-march`): SSE2 by default on x86-64, AVX2 or AVX-512 with `-march=native` where the machine
/// has them. One exception: xsimd 8.1's AVX-512BW kernels do not compile with GCC without
/// optimisation (GCC then defines the intrinsics as casting macros), so such builds use AVX2.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__) && XSIMD_WITH_AVX512BW && XSIMD_WITH_FMA3_AVX2
using simd_arch = xsimd::fma3<xsimd::avx2>;
#else
using simd_arch = xsimd::default_arch;
#endif

template <class T>
using batch = xsimd::batch<T, simd_arch>;

/// Element types the kernels work on. Bool tensors are read as bytes (any nonzero byte is true)
/// and written as 0 or 1, so that no byte pattern in a tensor is undefined behaviour.
template <class T>
struct type_tag {
  using type = T;
};

/// Calls `f(type_tag<T>{})` with the C++ element type of `t`; float16 and void are errors.
template <class F>
decltype(auto) visit_dtype(std::string_view op, dtype t, F&& f) {
  switch (t) {
    case dtype::bool_: return f(type_tag<std::uint8_t>{});
    case dtype::uint8: return f(type_tag<std::uint8_t>{});
    case dtype::int8: return f(type_tag<std::int8_t>{});
    case dtype::int32: return f(type_tag<std::int32_t>{});
    case dtype::int64: return f(type_tag<std::int64_t>{});
    case dtype::float32: return f(type_tag<float>{});
    case dtype::float64: return f(type_tag<double>{});
    case dtype::float16:
    case dtype::void_: break;
  }
  fail(op, kiln::detail::concat("dtype ", name(t), " is not supported by the CPU kernels"));
}

// ---- shapes ---------------------------------------------------------------------------------------

using dims = boost::container::small_vector<std::int64_t, 6>;

namespace detail {
template <class Range, class Get>
dims broadcast(std::string_view op, const Range& operands, Get get) {
  std::size_t rank = 0;
  for (const auto& o : operands) rank = std::max(rank, get(o).ndim());
  dims out(rank, 1);
  for (const auto& o : operands) {
    const tensor& t = get(o);
    const std::size_t shift = rank - t.ndim();
    for (std::size_t i = 0; i < t.ndim(); ++i) {
      const std::int64_t d = t.shape(i);
      std::int64_t& r = out[shift + i];
      if (d == r || d == 1) continue;
      if (r == 1) {
        r = d;
        continue;
      }
      std::string shapes;
      for (const auto& u : operands) shapes.append(shapes.empty() ? "" : " and ").append(runtime::shape_to_string(get(u).shape()));
      fail(op, "operands of shapes " + shapes + " do not broadcast (dimension " + std::to_string(shift + i) +
                   " is " + std::to_string(r) + " in one and " + std::to_string(d) + " in another)");
    }
  }
  return out;
}
}  // namespace detail

/// The numpy broadcast of the operands' shapes (aligned at the right; a dimension of 1
/// stretches), or a `kernel_error` naming the operands that do not broadcast. Allocates nothing
/// up to rank 6.
inline dims broadcast_dims(std::string_view op, std::initializer_list<const tensor*> operands) {
  return detail::broadcast(op, operands, [](const tensor* t) -> const tensor& { return *t; });
}
inline dims broadcast_dims(std::string_view op, std::span<const tensor> operands) {
  return detail::broadcast(op, operands, [](const tensor& t) -> const tensor& { return t; });
}
/// `broadcast_dims` as a shape_vector (for allocating an output).
inline shape_vector broadcast_shapes(std::string_view op, std::initializer_list<const tensor*> operands) {
  const dims d = broadcast_dims(op, operands);
  return shape_vector(d.begin(), d.end());
}

namespace detail {
/// Axis `a` of a rank-`ndim` tensor (negative counts from the end), or an error naming it.
inline std::size_t normalize_axis(std::string_view op, std::int64_t a, std::size_t ndim) {
  const std::int64_t n = a < 0 ? a + std::int64_t(ndim) : a;
  if (n < 0 || n >= std::int64_t(ndim)) fail(op, kiln::detail::concat("axis ", a, " is out of range for a ", ndim, "-d tensor"));
  return std::size_t(n);
}

/// Makes `v` hold at least `n` elements, for the per-thread buffers kernels reuse across calls
/// and overwrite before they read: they only ever grow, since a vector resized up within its
/// capacity zeroes what it adds (up to a megabyte a call between ResNet-18's layers).
template <class Vec>
void grow(Vec& v, std::int64_t n) {
  if (v.size() < std::size_t(n)) v.resize(std::size_t(n));
}

/// A per-thread buffer part of which never changes while the geometry of the calls stays the
/// same (rows of padding around a plane, a column per position): `get` prepares it again only when
/// the geometry `key` differs from the last call's or the storage moved, and the kernel
/// overwrites only the rest.
///
///     thread_local prepared_buffer<T, 2> cols;
///     const T* c = cols.get(positions, {positions, w}, [&](T* b) { flat_columns(b, positions, w); });
template <class T, std::size_t N>
class prepared_buffer {
public:
  /// The buffer, at least `size` elements (64-byte aligned); `prepare(data)` runs first if `key`
  /// or the storage is not what it was when it last ran.
  template <class Prepare>
  T* get(std::int64_t size, const std::array<std::int64_t, N>& key, Prepare&& prepare) {
    grow(data_, size);
    if (key != key_ || data_.data() != prepared_at_) {
      prepare(data_.data());
      key_ = key;
      prepared_at_ = data_.data();
    }
    return data_.data();
  }

private:
  std::vector<T, xsimd::aligned_allocator<T, 64>> data_;
  std::array<std::int64_t, N> key_{};
  const T* prepared_at_ = nullptr;
};

/// Stores lanes [first, last) of `v` at dst[0, last - first): a masked store at AVX-512 and AVX2
/// (float and double), element by element from a buffer else.
template <class T>
__attribute__((always_inline)) inline void store_lanes(const batch<T>& v, std::int64_t first, std::int64_t last, T* dst) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
#if defined(__AVX512F__)
  if constexpr (W == 16 && std::is_same_v<T, float>) {
    // (The lanes' base address, dst - first, may lie before the output: formed as an integer.)
    T* const base = reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(dst) - std::uintptr_t(first) * sizeof(T));
    _mm512_mask_storeu_ps(base, __mmask16((0xffffu << first) & (0xffffu >> (16 - last))), v);
    return;
  } else if constexpr (W == 8 && std::is_same_v<T, double>) {
    T* const base = reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(dst) - std::uintptr_t(first) * sizeof(T));
    _mm512_mask_storeu_pd(base, __mmask8((0xffu << first) & (0xffu >> (8 - last))), v);
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (W == 8 && std::is_same_v<T, float>) {
    T* const base = reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(dst) - std::uintptr_t(first) * sizeof(T));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(int(first) - 1)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(int(last)), lane));
    _mm256_maskstore_ps(base, mask, v);
    return;
  } else if constexpr (W == 4 && std::is_same_v<T, double>) {
    T* const base = reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(dst) - std::uintptr_t(first) * sizeof(T));
    const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
    const __m256i mask = _mm256_and_si256(_mm256_cmpgt_epi64(lane, _mm256_set1_epi64x(first - 1)),
                                          _mm256_cmpgt_epi64(_mm256_set1_epi64x(last), lane));
    _mm256_maskstore_pd(base, mask, v);
    return;
  }
#endif
  alignas(64) T tmp[W];
  v.store_aligned(tmp);
  for (std::int64_t l = first; l < last; ++l) dst[l - first] = tmp[l];
}

/// The even and the odd lanes of the 2 W elements a, b (a's first): even[t] = (a, b)[2 t],
/// odd[t] = (a, b)[2 t + 1]. Two two-source permutes for float at AVX-512, two shuffles and two
/// lane permutes at AVX2, two shuffles at SSE (xsimd 8 has no deinterleave); through a buffer else.
template <class T>
__attribute__((always_inline)) inline void deinterleave(const batch<T>& a, const batch<T>& b, batch<T>& even, batch<T>& odd) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && W == 16) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    even = _mm512_permutex2var_ps(a, ie, b);
    odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(ie, _mm512_set1_epi32(1)), b);
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float> && W == 8) {
    // [a0 a2 b0 b2 | a4 a6 b4 b6], then the 64-bit lanes in the order 0, 2, 1, 3.
    const auto lanes = [](__m256 v) { return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), _MM_SHUFFLE(3, 1, 2, 0))); };
    even = lanes(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    odd = lanes(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float> && W == 4) {
    even = _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    odd = _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    return;
  }
#endif
  alignas(64) T in[2 * W], e[W], o[W];
  a.store_aligned(in);
  b.store_aligned(in + W);
  for (std::int64_t t = 0; t < W; ++t) {
    e[t] = in[2 * t];
    o[t] = in[2 * t + 1];
  }
  even = batch<T>::load_aligned(e);
  odd = batch<T>::load_aligned(o);
}

/// The W elements one lane along the 2 W elements a, b (a's first): a[1], ..., a[W - 1], b[0].
/// One `valignd` at AVX-512, a lane permute and a byte align at AVX2, two shuffles at SSE (float);
/// through a buffer else.
template <class T>
__attribute__((always_inline)) inline batch<T> shift_one(const batch<T>& a, const batch<T>& b) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && W == 16) return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(b), _mm512_castps_si512(a), 1));
#endif
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float> && W == 8) {
    const __m256 mid = _mm256_permute2f128_ps(a, b, 0x21);  // a's upper half, b's lower half
    return _mm256_castsi256_ps(_mm256_alignr_epi8(_mm256_castps_si256(mid), _mm256_castps_si256(a), 4));
  }
#endif
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float> && W == 4) {
    const __m128 t = _mm_shuffle_ps(a, b, _MM_SHUFFLE(0, 0, 3, 3));  // a3 a3 b0 b0
    return _mm_shuffle_ps(a, t, _MM_SHUFFLE(2, 0, 2, 1));            // a1 a2 a3 b0
  }
#endif
  alignas(64) T buf[2 * W];
  a.store_aligned(buf);
  b.store_aligned(buf + W);
  return batch<T>::load_unaligned(buf + 1);
}

/// Where a vector of flat positions starts: flat position f = row * pitch + col.
struct flat_spot {
  std::int64_t row, col;
};

/// Stores vector v of flat positions from `spot` (rows `pitch` apart, the first `ow` of each an
/// output, the rest padding) into `rows` rows of `ow` contiguous values at out, dropping the
/// padding's lanes and any past the last row: one store where the vector lies inside a row's
/// outputs, else each row's lanes apart.
template <class T>
__attribute__((always_inline)) inline void store_flat(const batch<T>& v, flat_spot spot, std::int64_t pitch, std::int64_t ow,
                                                      std::int64_t rows, T* out) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size);
  if (spot.col + W <= ow) {
    v.store_unaligned(out + spot.row * ow + spot.col);
    return;
  }
  for (std::int64_t l = 0, row = spot.row, col = spot.col; l < W && row < rows; l += pitch - col, col = 0, ++row)
    if (col < ow) store_lanes(v, l, std::min(W, l + ow - col), out + row * ow + col);
}

/// The column of each position of a w-wide plane stored flat: c[q] = q mod w for q < n (what the
/// flat kernels compare with to mask the taps that cross a row's end).
template <class T>
void flat_columns(T* c, std::int64_t n, std::int64_t w) {
  for (std::int64_t q = 0, x = 0; q < n; ++q, x = x + 1 == w ? 0 : x + 1) c[q] = T(x);
}
}  // namespace detail

/// Checks that `out` has dtype `type` and shape `shape`.
template <class Shape>
void check_output(std::string_view op, const tensor& out, dtype type, const Shape& shape) {
  if (!out.defined()) fail(op, "the output tensor is undefined");
  if (out.type() != type || !std::equal(out.shape().begin(), out.shape().end(), shape.begin(), shape.end()))
    fail(op, kiln::detail::concat("the output must be ", name(type), runtime::shape_to_string(std::span<const std::int64_t>(shape.data(), shape.size())),
                                  ", got ", describe_operand(out)));
}

/// A new contiguous tensor of `shape` and `type` (the allocating forms' output).
inline tensor new_output(shape_vector shape, dtype type) { return tensor::empty(std::move(shape), type); }

/// The bytes a tensor's elements span: [first, last) over its storage, whatever its strides.
inline std::pair<const char*, const char*> byte_extent(const tensor& t) {
  std::int64_t lo = 0, hi = 0;
  for (std::size_t i = 0; i < t.ndim(); ++i) {
    const std::int64_t reach = t.strides()[i] * (t.shape(i) - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  const auto item = std::int64_t(size_of(t.type()));
  const auto base = static_cast<const char*>(t.data());
  return {base + lo * item, base + (hi + 1) * item};
}

/// Whether the bytes of `x` and `y` overlap at all.
inline bool overlaps(const tensor& x, const tensor& y) {
  if (x.data_storage().get() != y.data_storage().get() || x.numel() == 0 || y.numel() == 0) return false;
  const auto [a0, a1] = byte_extent(x);
  const auto [b0, b1] = byte_extent(y);
  return a0 < b1 && b0 < a1;
}

/// Whether the bytes `out` may write overlap the bytes of `in` without being exactly the same
/// elements in the same order (which an elementwise kernel handles: each element is read before
/// it is written).
inline bool overlaps_differently(const tensor& out, const tensor& in) {
  if (out.data() == in.data() && out.strides() == in.strides() && out.shape() == in.shape() && out.type() == in.type())
    return false;
  return overlaps(out, in);
}

/// Rejects an output that overlaps one of `inputs` other than element for element.
inline void check_no_overlap(std::string_view op, const tensor& out, std::initializer_list<const tensor*> inputs) {
  std::size_t i = 0;
  for (const tensor* in : inputs) {
    if (overlaps_differently(out, *in))
      fail(op, "the output " + describe_operand(out) + " overlaps input " + std::to_string(i) +
                   " in another layout; write into a separate tensor");
    ++i;
  }
}

// ---- loop plans -----------------------------------------------------------------------------------

/// Calls `f(offsets)` for every index of `shape` in row-major order, where offsets[k] is the sum
/// over axes of index times `strides[k][axis]`: N offset streams (elements or bytes) stepped
/// together, as an odometer.
template <std::size_t N, class F>
void for_each_offsets(std::span<const std::int64_t> shape, const std::array<const std::int64_t*, N>& strides, F&& f) {
  std::int64_t total = 1;
  for (auto d : shape) total *= d;
  if (total == 0) return;
  const std::size_t rank = shape.size();
  dims idx(rank, 0);
  std::array<std::int64_t, N> off{};
  for (std::int64_t t = 0; t < total; ++t) {
    f(off);
    for (std::size_t a = rank; a-- > 0;) {
      for (std::size_t k = 0; k < N; ++k) off[k] += strides[k][a];
      if (++idx[a] < shape[a]) break;
      for (std::size_t k = 0; k < N; ++k) off[k] -= strides[k][a] * shape[a];
      idx[a] = 0;
    }
  }
}

/// The loop nest of an elementwise kernel over `N` operands (operand 0 the output). Strides are
/// in bytes.
template <std::size_t N>
class loop_plan {
public:
  /// Operand 0 defines the shape; the others broadcast to it (the caller has checked that they do).
  explicit loop_plan(const std::array<const tensor*, N>& operands) {
    const tensor& out = *operands[0];
    const std::size_t rank = out.ndim();
    numel_ = out.numel();
    for (std::size_t k = 0; k < N; ++k) base_[k] = static_cast<char*>(operands[k]->data());
    // Outermost first; drop size-1 dimensions, merge a dimension into the next one when every
    // operand's stride allows.
    for (std::size_t i = 0; i < rank; ++i) {
      const std::int64_t size = out.shape(i);
      if (size == 1) continue;
      std::array<std::int64_t, N> st;
      for (std::size_t k = 0; k < N; ++k) {
        const tensor& t = *operands[k];
        const std::size_t shift = rank - t.ndim();
        st[k] = i < shift || t.shape(i - shift) == 1 ? 0 : t.strides()[i - shift] * std::int64_t(size_of(t.type()));
      }
      if (!shape_.empty()) {
        bool merge = true;
        for (std::size_t k = 0; k < N && merge; ++k) merge = strides_[k].back() == st[k] * size;
        if (merge) {
          shape_.back() *= size;
          for (std::size_t k = 0; k < N; ++k) strides_[k].back() = st[k];
          continue;
        }
      }
      shape_.push_back(size);
      for (std::size_t k = 0; k < N; ++k) strides_[k].push_back(st[k]);
    }
  }

  std::int64_t numel() const noexcept { return numel_; }
  /// Dimensions left after merging (0 for a single element).
  std::size_t ndim() const noexcept { return shape_.size(); }
  const dims& shape() const noexcept { return shape_; }
  const dims& strides(std::size_t operand) const noexcept { return strides_[operand]; }
  /// Operand k's first element.
  char* data(std::size_t operand) const noexcept { return base_[operand]; }
  /// Whether operand k's elements are all at different addresses (no zero stride, no dimension
  /// stepping inside another's span): then the loop writing it may be shared out among threads.
  bool distinct_elements(std::size_t operand) const {
    boost::container::small_vector<std::pair<std::int64_t, std::int64_t>, 6> d;  // (|stride|, size), innermost first once sorted
    for (std::size_t a = 0; a < shape_.size(); ++a) d.emplace_back(strides_[operand][a] < 0 ? -strides_[operand][a] : strides_[operand][a], shape_[a]);
    std::sort(d.begin(), d.end());
    std::int64_t reach = 0;  // bytes from the first element to the last of the dimensions so far
    for (const auto& [stride, size] : d) {
      if (stride <= reach) return false;
      reach += stride * (size - 1);
    }
    return true;
  }

  /// Calls `f(n, ptrs, strides)` for every innermost run: `n` elements, operand k at `ptrs[k]`
  /// stepping by `strides[k]` bytes.
  template <class F>
  void for_each_run(F&& f) const {
    for_each_run_between(0, numel_, std::forward<F>(f));
  }

  /// As `for_each_run`, for the elements [begin, end) of the loop in row-major order only: the
  /// runs they cover, the first and last of them cut where the range starts and ends. Ranges that
  /// partition [0, numel()) call `f` once for every element, so threads may share the loop out.
  template <class F>
  void for_each_run_between(std::int64_t begin, std::int64_t end, F&& f) const {
    begin = std::max<std::int64_t>(begin, 0), end = std::min(end, numel_);
    if (begin >= end) return;
    std::array<std::int64_t, N> inner{};
    if (shape_.empty()) {
      f(std::int64_t(1), base_, inner);
      return;
    }
    const std::size_t d = shape_.size();
    for (std::size_t k = 0; k < N; ++k) inner[k] = strides_[k][d - 1];
    const std::int64_t n = shape_[d - 1];
    // The outer index of the first run, begin / n, as an odometer over the outer dimensions.
    dims idx(d - 1, 0);
    std::array<std::int64_t, N> off{};
    std::int64_t r = begin / n;
    for (std::size_t a = d - 1; a-- > 0;) {
      idx[a] = r % shape_[a];
      r /= shape_[a];
      for (std::size_t k = 0; k < N; ++k) off[k] += idx[a] * strides_[k][a];
    }
    // Only the first run may start inside a row; every later one starts at its row's beginning.
    std::int64_t j = begin % n;
    for (std::int64_t at = begin; at < end; j = 0) {
      const std::int64_t len = std::min(n - j, end - at);
      std::array<char*, N> ptrs;
      for (std::size_t k = 0; k < N; ++k) ptrs[k] = base_[k] + off[k] + j * inner[k];
      f(len, ptrs, inner);
      at += len;
      for (std::size_t a = d - 1; a-- > 0;) {  // the next run
        for (std::size_t k = 0; k < N; ++k) off[k] += strides_[k][a];
        if (++idx[a] < shape_[a]) break;
        for (std::size_t k = 0; k < N; ++k) off[k] -= strides_[k][a] * shape_[a];
        idx[a] = 0;
      }
    }
  }

private:
  dims shape_;
  std::array<dims, N> strides_;
  std::array<char*, N> base_{};
  std::int64_t numel_ = 0;
};

}  // namespace kiln::kernels
