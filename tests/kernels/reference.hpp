// SPDX-License-Identifier: Apache-2.0
// Scalar references for the kernel tests: random tensors, numpy broadcasting by index arithmetic,
// and element comparison with a stated tolerance.
#pragma once

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/isa.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace kiln_test {

using kiln::dtype;
using kiln::runtime::shape_vector;
using kiln::runtime::tensor;

/// A contiguous tensor of `shape` with values uniform in [lo, hi) (integers: rounded).
template <class T>
tensor random_tensor(shape_vector shape, double lo, double hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  tensor t = tensor::empty(std::move(shape), kiln::runtime::dtype_of<T>);
  T* p = t.data<T>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = T(std::is_integral_v<T> ? std::round(dist(gen)) : dist(gen));
  return t;
}

/// Row-major multi-indices of `shape`, in order.
// GCC 12 at -O3 warns falsely that the index vector's delete has a nonzero offset
// (-Wfree-nonheap-object) where it inlines this into reference_binary.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#endif
inline void for_each_index(const shape_vector& shape, const std::function<void(const shape_vector&)>& f) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  shape_vector idx(shape.size(), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    f(idx);
    for (std::size_t a = shape.size(); a-- > 0;) {
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// The element of `t` (any layout) that broadcasts to output index `idx`.
template <class T>
T broadcast_at(const tensor& t, const shape_vector& idx) {
  const std::size_t shift = idx.size() - t.ndim();
  std::int64_t off = 0;
  for (std::size_t i = 0; i < t.ndim(); ++i) off += (t.shape(i) == 1 ? 0 : idx[shift + i]) * t.strides()[i];
  return static_cast<const T*>(t.data())[off];
}

/// numpy broadcast of two shapes (the tests only use shapes that broadcast).
inline shape_vector broadcast(const shape_vector& a, const shape_vector& b) {
  const std::size_t r = std::max(a.size(), b.size());
  shape_vector out(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t x = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const std::int64_t y = i + b.size() >= r ? b[i + b.size() - r] : 1;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

/// `f(a[i], b[i])` over the broadcast shape, row-major.
template <class R, class T, class F>
std::vector<R> reference_binary(const tensor& a, const tensor& b, F f) {
  std::vector<R> out;
  for_each_index(broadcast(a.shape(), b.shape()),
                 [&](const shape_vector& idx) { out.push_back(R(f(broadcast_at<T>(a, idx), broadcast_at<T>(b, idx)))); });
  return out;
}
template <class R, class T, class F>
std::vector<R> reference_unary(const tensor& x, F f) {
  std::vector<R> out;
  for_each_index(x.shape(), [&](const shape_vector& idx) { out.push_back(R(f(broadcast_at<T>(x, idx)))); });
  return out;
}

/// The elements of a bool tensor as bytes (0 or 1), whatever the layout.
inline std::vector<std::uint8_t> bools(const tensor& t) {
  std::vector<std::uint8_t> out;
  for_each_index(t.shape(), [&](const shape_vector& idx) { out.push_back(broadcast_at<std::uint8_t>(t, idx)); });
  return out;
}

/// Same dtype, shape and element bytes (the runtime's `equal`, found here by ADL only: in the
/// tests' scope it is ambiguous with the kernel `kernels::equal`).
inline bool same_tensor(const tensor& a, const tensor& b) { return equal(a, b); }

/// The relative error allowed where a test compares kernel code it compiled itself (templates from
/// the headers, for the test's own -march) with the kernels that run (`kernels::isa()`, chosen at
/// run time by kiln's dispatched library): none at the same level; a rounding or two of T between
/// levels, whose vector widths and FMA contraction differ.
template <class T>
double across_levels() {
  if (kiln::kernels::isa() == kiln::kernels::compiled_isa()) return 0;
  return std::is_same_v<T, float> ? 1e-6 : 1e-14;
}

/// Whether `got` equals `want` within `rel` relative and `abs_tol` absolute error; NaN matches
/// NaN and infinities must match exactly.
template <class T>
bool close(T got, T want, double rel, double abs_tol) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want) || std::isinf(got)) return got == want;
    return std::abs(double(got) - double(want)) <= abs_tol + rel * std::abs(double(want));
  } else {
    return got == want;
  }
}

/// Checks every element, reporting the first mismatch.
template <class T>
void check_all_close(const std::vector<T>& got, const std::vector<T>& want, double rel = 0, double abs_tol = 0) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!close(got[i], want[i], rel, abs_tol)) {
      FAIL_CHECK("element " << i << ": got " << double(got[i]) << ", want " << double(want[i]));
      return;
    }
  }
}

}  // namespace kiln_test
