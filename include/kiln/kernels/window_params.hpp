// SPDX-License-Identifier: Apache-2.0
/// \file
/// The attributes of the windowed kernels, convolution (`nn.hpp`) and pooling (`pool2d.hpp`), with
/// the forms the IR gives them in (`padding4`, `pair2`) and the checks both make.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/common.hpp>

#include <algorithm>
#include <array>
#include <span>
#include <string_view>

namespace kiln::kernels {

/// The attributes of conv2d.
struct conv2d_params {
  std::array<std::int64_t, 2> strides{1, 1};          ///< (height, width)
  std::array<std::int64_t, 4> padding{0, 0, 0, 0};    ///< top, left, bottom, right
  std::array<std::int64_t, 2> dilation{1, 1};         ///< (height, width)
  std::int64_t groups = 1;                            ///< C and O must be multiples of it
};

/// The attributes of max_pool2d and avg_pool2d.
struct pool2d_params {
  std::array<std::int64_t, 2> pool_size{1, 1};        ///< (height, width)
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::int64_t, 4> padding{0, 0, 0, 0};    ///< top, left, bottom, right
  std::array<std::int64_t, 2> dilation{1, 1};
  bool ceil_mode = false;                             ///< round the output size up
  bool count_include_pad = false;                     ///< avg_pool2d: count padding in the divisor
};

/// Padding given as the IR gives it: 1 value (every side), 2 (top and bottom, left and right) or
/// 4 (top, left, bottom, right).
KILN_DECL std::array<std::int64_t, 4> padding4(std::string_view op, std::span<const std::int64_t> p);
/// A (height, width) pair given as 1 value (both) or 2.
KILN_DECL std::array<std::int64_t, 2> pair2(std::string_view op, std::string_view what, std::span<const std::int64_t> p);

namespace detail {

/// Writes the contiguous row `src` (n elements) to `dst` with stride `ds`.
template <class T>
void store_row(const T* src, std::int64_t n, T* dst, std::int64_t ds) {
  if (ds == 1) std::copy_n(src, n, dst);
  else
    for (std::int64_t j = 0; j < n; ++j) dst[j * ds] = src[j];
}

/// A convolution's sizes: batch, input channels, input height and width, output channels, window,
/// output height and width, and the channels per group.
struct conv_geometry {
  std::int64_t n, c, h, w, o, kh, kw, oh, ow, cg, og;  ///< cg, og: channels per group
};

/// The number of windows along an axis of extent `in` (an error naming `what` when none fits).
KILN_DECL std::int64_t window_count(std::string_view op, std::string_view what, std::int64_t in, std::int64_t k, std::int64_t stride,
                                    std::int64_t dilation, std::int64_t pad_lo, std::int64_t pad_hi, bool ceil_mode);
/// Positive strides and dilation, padding not negative.
KILN_DECL void check_window_params(std::string_view op, std::span<const std::int64_t, 2> strides, std::span<const std::int64_t, 2> dilation,
                                   std::span<const std::int64_t, 4> padding);
/// `x` defined and of rank 4.
KILN_DECL void check_nchw(std::string_view op, const tensor& x, const char* what);

}  // namespace detail

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/window_params.ipp>
#endif
