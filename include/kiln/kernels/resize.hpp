// SPDX-License-Identifier: Apache-2.0
/// \file
/// Resizing a tensor along any of its axes by nearest-neighbour, linear or cubic interpolation
/// (the IR's `image.resize`, ONNX's Resize and Upsample).
///
///     resize_params p;  p.method = resize_method::linear;
///     tensor y = kernels::resize(x, {1, 3, 448, 448}, p);   // x [1, 3, 224, 224]
///
/// Every output coordinate `o` along an axis maps to a coordinate `c` of the input by the
/// coordinate mode, with the axis' scale `s` (out / in unless given: ONNX keeps the scale it was
/// given, so 0.6 on 4 elements maps with 0.6, not 2 / 4):
///
///     half_pixel          c = (o + 0.5) / s - 0.5
///     pytorch_half_pixel  the same, but c = -0.5 when the output has one element
///     align_corners       c = o * (in - 1) / (in * s - 1)      (0 when in * s == 1)
///     asymmetric          c = o / s
///     tf_half_pixel_for_nn c = (o + 0.5) / s
///     tf_crop_and_resize  c = start * (in - 1) + o * (end - start) * (in - 1) / (in * s - 1),
///                         and outside [0, in - 1] the output is `extrapolation_value`
///
/// The taps are the 2 (nearest, linear) or 4 (cubic) input positions around `c`, the lower one
/// preferred when `c` is a whole number (ONNX's reference: the fraction is then 1, not 0);
/// positions outside the input read its edge, or with `exclude_outside` (linear and cubic) get
/// weight 0 and the others are renormalised. Nearest picks one of the two by the rounding mode; linear weighs
/// them 1 - f and f; cubic uses Keys' kernel with coefficient `cubic_alpha` (-0.75 as ONNX and
/// PyTorch, -0.5 as TensorFlow).
///
/// The axes are resized one after another, the last first, each a 1-D interpolation of the
/// previous result: the order of operations of ONNX's reference, and the cost of a separable
/// filter (taps per axis, not their product). Floating-point tensors interpolate in double
/// precision and round once at the end; nearest copies elements and takes any dtype.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/transform.hpp>

#include <cmath>
#include <string_view>
#include <vector>

namespace kiln::kernels {

enum class resize_method { nearest, linear, cubic };
enum class resize_coordinates { half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize };
enum class nearest_rounding { round_prefer_floor, round_prefer_ceil, floor, ceil };

/// The attributes of resize.
struct resize_params {
  resize_method method = resize_method::nearest;
  resize_coordinates coordinates = resize_coordinates::half_pixel;
  nearest_rounding rounding = nearest_rounding::round_prefer_floor;  ///< nearest only
  double cubic_alpha = -0.75;                                        ///< cubic only
  bool exclude_outside = false;                                      ///< taps outside the input get weight 0
  double extrapolation_value = 0.0;                                  ///< tf_crop_and_resize, outside the region
  std::vector<double> scales;  ///< per axis; empty: output extent / input extent
  std::vector<double> roi;     ///< tf_crop_and_resize: every axis' start, then every axis' end (fractions of the extent)
};

KILN_DECL resize_method parse_resize_method(std::string_view op, std::string_view s);
KILN_DECL resize_coordinates parse_resize_coordinates(std::string_view op, std::string_view s);
KILN_DECL nearest_rounding parse_nearest_rounding(std::string_view op, std::string_view s);

namespace detail {

/// One axis' interpolation: output position o reads `taps` inputs at index[o * taps + t] with
/// weight[o * taps + t]; `outside[o]` marks positions that take the extrapolation value.
struct resize_axis {
  std::int64_t in = 0, out = 0, taps = 1;
  std::vector<std::int64_t> index;
  std::vector<double> weight;
  std::vector<char> outside;
  bool identity() const {
    if (in != out || taps != 1) return false;
    for (std::int64_t o = 0; o < out; ++o)
      if (index[std::size_t(o)] != o || outside[std::size_t(o)]) return false;
    return true;
  }
};

/// Resizes axis `a` of the row-major `src` (shape `shape`) into `dst`: nearest copies the chosen
/// element, the others sum their taps in double and convert once.
template <class In, class Out>
void resize_along(const In* src, Out* dst, const dims& shape, std::size_t a, const resize_axis& ax, double extrapolation, bool nearest) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= shape[i];
  for (std::size_t i = a + 1; i < shape.size(); ++i) inner *= shape[i];
  for (std::int64_t b = 0; b < outer; ++b) {
    const In* plane = src + b * ax.in * inner;
    Out* res = dst + b * ax.out * inner;
    for (std::int64_t o = 0; o < ax.out; ++o, res += inner) {
      if (ax.outside[std::size_t(o)]) {
        for (std::int64_t k = 0; k < inner; ++k) res[k] = static_cast<Out>(extrapolation);
        continue;
      }
      const std::int64_t* idx = ax.index.data() + o * ax.taps;
      const double* w = ax.weight.data() + o * ax.taps;
      if (nearest) {
        const In* row = plane + idx[0] * inner;
        for (std::int64_t k = 0; k < inner; ++k) res[k] = static_cast<Out>(row[k]);
        continue;
      }
      for (std::int64_t k = 0; k < inner; ++k) {
        double acc = 0;
        for (std::int64_t t = 0; t < ax.taps; ++t) acc += w[t] * static_cast<double>(plane[idx[t] * inner + k]);
        res[k] = static_cast<Out>(acc);
      }
    }
  }
}

}  // namespace detail

/// out = x resized to out's shape (see the file comment).
KILN_DECL void resize(const tensor& x, const resize_params& p, const tensor& out);
KILN_DECL tensor resize(const tensor& x, std::span<const std::int64_t> size, const resize_params& p);

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/resize.ipp>
#endif
