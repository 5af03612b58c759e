// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/window_params.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/window_params.hpp>

namespace kiln::kernels {

KILN_DECL std::array<std::int64_t, 4> padding4(std::string_view op, std::span<const std::int64_t> p) {
  if (p.size() == 1) return {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) return {p[0], p[1], p[0], p[1]};
  if (p.size() == 4) return {p[0], p[1], p[2], p[3]};
  fail(op, kiln::detail::concat("padding must have 1, 2 or 4 values, got ", p.size()));
}

KILN_DECL std::array<std::int64_t, 2> pair2(std::string_view op, std::string_view what, std::span<const std::int64_t> p) {
  if (p.size() == 1) return {p[0], p[0]};
  if (p.size() == 2) return {p[0], p[1]};
  fail(op, kiln::detail::concat(what, " must have 1 or 2 values, got ", p.size()));
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL std::int64_t window_count(std::string_view op, std::string_view what, std::int64_t in, std::int64_t k, std::int64_t stride,
                                    std::int64_t dilation, std::int64_t pad_lo, std::int64_t pad_hi, bool ceil_mode) {
  const std::int64_t span = dilation * (k - 1) + 1, room = in + pad_lo + pad_hi - span;
  if (room < 0)
    fail(op, kiln::detail::concat("the ", what, " window (size ", k, ", dilation ", dilation, ") does not fit the input extent ", in,
                                  " with padding ", pad_lo, " + ", pad_hi));
  std::int64_t out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_lo) --out;  // the last window must start inside
  return out;
}

KILN_DECL void check_window_params(std::string_view op, std::span<const std::int64_t, 2> strides, std::span<const std::int64_t, 2> dilation,
                                   std::span<const std::int64_t, 4> padding) {
  for (std::size_t i = 0; i < 2; ++i) {
    if (strides[i] <= 0) fail(op, kiln::detail::concat("strides must be positive, got (", strides[0], ", ", strides[1], ")"));
    if (dilation[i] <= 0) fail(op, kiln::detail::concat("dilation must be positive, got (", dilation[0], ", ", dilation[1], ")"));
  }
  for (auto v : padding)
    if (v < 0)
      fail(op, kiln::detail::concat("padding must not be negative, got (", padding[0], ", ", padding[1], ", ", padding[2], ", ", padding[3], ")"));
}

KILN_DECL void check_nchw(std::string_view op, const tensor& x, const char* what) {
  if (!x.defined()) fail(op, kiln::detail::concat(what, " is undefined"));
  if (x.ndim() != 4) fail(op, kiln::detail::concat(what, " must be NCHW (rank 4), got ", describe_operand(x)));
}

}  // namespace kiln::kernels::detail
