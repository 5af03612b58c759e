// SPDX-License-Identifier: Apache-2.0
/// \file
/// `compare_close`: how close one tensor is to another, elementwise, by numpy's rule
/// `|got - want| <= atol + rtol * |want|` (numpy.allclose, TVM's testing.assert_allclose; NaN
/// matches NaN, an infinity only the same infinity) — for checking a model's output against a reference:
///
///     const runtime::closeness c = runtime::compare_close(out, pytorch_out, 1e-4, 1e-4);
///     if (!c.ok()) std::cerr << c.describe() << '\n';
#pragma once

#include <kiln/runtime/tensor.hpp>
#include <kiln/support/dtype.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kiln::runtime {

/// What `compare_close` found.
struct closeness {
  std::string mismatch;             ///< why the tensors cannot be compared (dtype, shape); empty if they can
  std::int64_t elements = 0;        ///< elements compared
  std::int64_t outside = 0;         ///< elements outside the tolerance
  std::int64_t first_outside = -1;  ///< the first of them (row-major index), or -1
  double first_got = 0, first_want = 0;
  double max_abs_diff = 0;  ///< the largest |got - want| over the elements (NaN differences left out)
  double rtol = 0, atol = 0;

  bool ok() const noexcept { return mismatch.empty() && outside == 0; }
  /// Empty when ok(); else, for example, "3 of 1280 elements outside rtol 0.0001, atol 0.0001 (the
  /// first: element 17 is 0.25, expected 0.2491; largest difference 0.0012)".
  std::string describe() const {
    if (!mismatch.empty()) return mismatch;
    if (outside == 0) return {};
    return std::to_string(outside) + " of " + std::to_string(elements) + " elements outside rtol " + number(rtol) + ", atol " + number(atol) +
           " (the first: element " + std::to_string(first_outside) + " is " + number(first_got) + ", expected " + number(first_want) +
           "; largest difference " + number(max_abs_diff) + ")";
  }

private:
  static std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
  }
};

/// Compares `got` with `want` (same dtype and shape; any strides): every element within
/// `atol + rtol * |want|`. Every dtype but void; integers and bool compare as doubles.
inline closeness compare_close(const tensor& got, const tensor& want, double rtol, double atol) {
  closeness c;
  c.rtol = rtol, c.atol = atol;
  if (got.type() != want.type()) {
    c.mismatch = "dtype " + std::string(name(got.type())) + ", expected " + std::string(name(want.type()));
    return c;
  }
  if (got.shape() != want.shape()) {
    c.mismatch = "shape " + shape_to_string(got.shape()) + ", expected " + shape_to_string(want.shape());
    return c;
  }
  const tensor g = got.contiguous(), w = want.contiguous();
  auto element = [t = g.type()](const void* data, std::size_t i) -> double {
    switch (t) {
      case dtype::float32: return static_cast<const float*>(data)[i];
      case dtype::float64: return static_cast<const double*>(data)[i];
      case dtype::float16: return half_to_float(static_cast<const std::uint16_t*>(data)[i]);
      case dtype::int64: return double(static_cast<const std::int64_t*>(data)[i]);
      case dtype::int32: return static_cast<const std::int32_t*>(data)[i];
      case dtype::int8: return static_cast<const std::int8_t*>(data)[i];
      case dtype::uint8: return static_cast<const std::uint8_t*>(data)[i];
      case dtype::bool_: return static_cast<const bool*>(data)[i] ? 1 : 0;
      case dtype::void_: break;
    }
    return 0;
  };
  c.elements = g.numel();
  for (std::size_t i = 0; i < std::size_t(c.elements); ++i) {
    const double a = element(g.data(), i), b = element(w.data(), i);
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    const double d = std::abs(a - b);
    if (d > c.max_abs_diff) c.max_abs_diff = d;
    // An infinity matches only itself (numpy.isclose), not whatever atol + rtol * inf allows.
    if (std::isinf(a) || std::isinf(b) || !(d <= atol + rtol * std::abs(b))) {
      if (c.outside++ == 0) c.first_outside = std::int64_t(i), c.first_got = a, c.first_want = b;
    }
  }
  return c;
}

}  // namespace kiln::runtime
