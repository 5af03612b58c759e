// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/resize.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/resize.hpp>

namespace kiln::kernels {

KILN_DECL resize_method parse_resize_method(std::string_view op, std::string_view s) {
  if (s == "nearest") return resize_method::nearest;
  if (s == "linear") return resize_method::linear;
  if (s == "cubic") return resize_method::cubic;
  fail(op, kiln::detail::concat("the method must be 'nearest', 'linear' or 'cubic', not '", s, "'"));
}

KILN_DECL resize_coordinates parse_resize_coordinates(std::string_view op, std::string_view s) {
  if (s == "half_pixel") return resize_coordinates::half_pixel;
  if (s == "pytorch_half_pixel") return resize_coordinates::pytorch_half_pixel;
  if (s == "align_corners") return resize_coordinates::align_corners;
  if (s == "asymmetric") return resize_coordinates::asymmetric;
  if (s == "tf_half_pixel_for_nn") return resize_coordinates::tf_half_pixel_for_nn;
  if (s == "tf_crop_and_resize") return resize_coordinates::tf_crop_and_resize;
  fail(op, kiln::detail::concat("the coordinate transformation mode must be 'half_pixel', 'pytorch_half_pixel', 'align_corners', "
                                "'asymmetric', 'tf_half_pixel_for_nn' or 'tf_crop_and_resize', not '",
                                s, "'"));
}

KILN_DECL nearest_rounding parse_nearest_rounding(std::string_view op, std::string_view s) {
  if (s == "round_prefer_floor") return nearest_rounding::round_prefer_floor;
  if (s == "round_prefer_ceil") return nearest_rounding::round_prefer_ceil;
  if (s == "floor") return nearest_rounding::floor;
  if (s == "ceil") return nearest_rounding::ceil;
  fail(op, kiln::detail::concat("the nearest rounding mode must be 'round_prefer_floor', 'round_prefer_ceil', 'floor' or 'ceil', not '", s,
                                "'"));
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL resize_axis plan_resize_axis(const resize_params& p, std::int64_t in, std::int64_t out, double scale, double roi_start,
                                       double roi_end) {
  resize_axis ax;
  ax.in = in;
  ax.out = out;
  ax.taps = p.method == resize_method::cubic ? 4 : p.method == resize_method::linear ? 2 : 1;
  const auto n = std::size_t(out * ax.taps);
  ax.index.resize(n);
  ax.weight.resize(n);
  ax.outside.assign(std::size_t(out), 0);
  const double out_extent = static_cast<double>(in) * scale;  // unrounded, as ONNX's reference
  const double last = static_cast<double>(in - 1);
  for (std::int64_t o = 0; o < out; ++o) {
    const double x = static_cast<double>(o);
    double c = 0;
    switch (p.coordinates) {
      case resize_coordinates::half_pixel: c = (x + 0.5) / scale - 0.5; break;
      case resize_coordinates::pytorch_half_pixel: c = out_extent == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
      case resize_coordinates::align_corners: c = out_extent == 1 ? 0.0 : x * last / (out_extent - 1); break;
      case resize_coordinates::asymmetric: c = x / scale; break;
      case resize_coordinates::tf_half_pixel_for_nn: c = (x + 0.5) / scale; break;
      case resize_coordinates::tf_crop_and_resize:
        c = (out_extent == 1 ? (roi_end - roi_start) * last / 2 : x * (roi_end - roi_start) * last / (out_extent - 1)) + roi_start * last;
        if (!(c >= 0 && c <= last)) ax.outside[std::size_t(o)] = 1;  // NaN too
        break;
    }
    // Far outside the input every tap reads the edge (or is excluded) whatever the fraction; the
    // bound keeps the index arithmetic in range for extreme scales and turns NaN into a number.
    if (!(c >= -8)) c = -8;
    if (!(c <= last + 8)) c = last + 8;
    // the lower tap: floor(c), or c - 1 when c is whole (the fraction is then 1)
    const double fl = std::floor(c);
    const bool whole = fl == c;
    const double ratio = whole ? 1.0 : c - fl;
    const std::int64_t lower = static_cast<std::int64_t>(whole ? fl - 1 : fl);
    std::int64_t* idx = ax.index.data() + o * ax.taps;
    double* w = ax.weight.data() + o * ax.taps;
    const auto clamp = [&](std::int64_t i) { return std::clamp<std::int64_t>(i, 0, in - 1); };
    if (p.method == resize_method::nearest) {
      bool upper = true;
      if (!whole) switch (p.rounding) {
          case nearest_rounding::round_prefer_floor: upper = ratio > 0.5; break;
          case nearest_rounding::round_prefer_ceil: upper = ratio >= 0.5; break;
          case nearest_rounding::floor: upper = false; break;
          case nearest_rounding::ceil: upper = true; break;
        }
      idx[0] = clamp(lower + (upper ? 1 : 0));
      w[0] = 1;
      continue;
    }
    double coeff[4];
    std::int64_t first = lower;
    if (p.method == resize_method::linear) {
      coeff[0] = 1 - ratio;
      coeff[1] = ratio;
    } else {
      const double a = p.cubic_alpha, r = ratio, s = 1 - ratio;
      coeff[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
      coeff[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
      coeff[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
      coeff[3] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
      first = lower - 1;
    }
    if (p.exclude_outside) {  // ONNX's reference would give 0 / 0 where every tap is outside; this gives 0
      double sum = 0;
      for (std::int64_t t = 0; t < ax.taps; ++t) {
        const std::int64_t i = first + t;
        if (i < 0 || i >= in) coeff[t] = 0;
        sum += coeff[t];
      }
      if (sum != 0)
        for (std::int64_t t = 0; t < ax.taps; ++t) coeff[t] /= sum;
    }
    for (std::int64_t t = 0; t < ax.taps; ++t) {
      idx[t] = clamp(first + t);
      w[t] = coeff[t];
    }
  }
  return ax;
}

KILN_DECL void check_resize(std::string_view op, const tensor& x, std::span<const std::int64_t> size, const resize_params& p) {
  if (!x.defined()) fail(op, "the operand is undefined");
  if (size.size() != x.ndim())
    fail(op, kiln::detail::concat("the output size has ", size.size(), " extents, but x ", describe_operand(x), " has rank ", x.ndim()));
  if (p.method == resize_method::nearest ? x.type() == dtype::float16 || !is_known(x.type())
                                         : x.type() != dtype::float32 && x.type() != dtype::float64)
    fail(op, kiln::detail::concat(p.method == resize_method::nearest ? "nearest resizing does not take " : "interpolation needs float32 or float64, not ",
                                  describe_operand(x)));
  if (!p.scales.empty() && p.scales.size() != x.ndim())
    fail(op, kiln::detail::concat("there are ", p.scales.size(), " scales for a tensor of rank ", x.ndim()));
  for (double s : p.scales)
    if (!(s > 0) || !std::isfinite(s)) fail(op, kiln::detail::concat("the scales must be positive and finite, got ", s));
  if (p.coordinates == resize_coordinates::tf_crop_and_resize && p.roi.size() != 2 * x.ndim())
    fail(op, kiln::detail::concat("tf_crop_and_resize needs a region of interest of ", 2 * x.ndim(), " values (starts, then ends), got ",
                                  p.roi.size()));
  for (std::size_t d = 0; d < x.ndim(); ++d) {
    if (size[d] < 0) fail(op, kiln::detail::concat("the output size along axis ", d, " is negative (", size[d], ")"));
    if (size[d] > 0 && x.shape(d) == 0) fail(op, kiln::detail::concat("cannot resize the empty axis ", d, " of ", describe_operand(x), " to ", size[d]));
  }
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void resize(const tensor& x, const resize_params& p, const tensor& out) {
  constexpr std::string_view op = "resize";
  if (!out.defined()) fail(op, "the output is undefined");
  detail::check_resize(op, x, out.shape(), p);
  check_output(op, out, x.type(), out.shape());
  if (overlaps(out, x)) fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps the input; write into a separate tensor"));
  if (out.numel() == 0) return;
  const std::size_t r = x.ndim();
  std::vector<detail::resize_axis> axes;
  std::vector<std::size_t> order;  // the axes that change, last first
  for (std::size_t d = r; d-- > 0;) {
    const std::int64_t in = x.shape(d), o = out.shape(d);
    const double scale = p.scales.empty() ? static_cast<double>(o) / static_cast<double>(in) : p.scales[d];
    const bool crop = p.coordinates == resize_coordinates::tf_crop_and_resize;
    detail::resize_axis ax = detail::plan_resize_axis(p, in, o, scale, crop ? p.roi[d] : 0.0, crop ? p.roi[r + d] : 1.0);
    if (ax.identity()) continue;
    axes.push_back(std::move(ax));
    order.push_back(d);
  }
  const bool nearest = p.method == resize_method::nearest;
  const tensor src = x.contiguous();
  if (axes.empty()) {
    detail::copy_unchecked(src, out);
    return;
  }
  const bool direct = out.is_contiguous();
  const tensor dst = direct ? out : new_output(out.shape(), x.type());
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    // nearest moves elements of T; interpolation goes through double and rounds once, at the end
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    dims shape(src.shape().begin(), src.shape().end());
    std::vector<Acc> a, b;
    const T* in = static_cast<const T*>(src.data());
    const Acc* from = nullptr;
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const std::size_t d = order[k];
      dims next = shape;
      next[d] = axes[k].out;
      std::int64_t n = 1;
      for (auto e : next) n *= e;
      const bool final = k + 1 == axes.size();
      if (final) {
        T* res = static_cast<T*>(dst.data());
        if (from) detail::resize_along(from, res, shape, d, axes[k], p.extrapolation_value, nearest);
        else detail::resize_along(in, res, shape, d, axes[k], p.extrapolation_value, nearest);
      } else {
        std::vector<Acc>& buf = from == a.data() && !a.empty() ? b : a;
        buf.assign(std::size_t(n), Acc(0));
        if (from) detail::resize_along(from, buf.data(), shape, d, axes[k], p.extrapolation_value, nearest);
        else detail::resize_along(in, buf.data(), shape, d, axes[k], p.extrapolation_value, nearest);
        from = buf.data();
      }
      shape = next;
    }
  });
  if (!direct) detail::copy_unchecked(dst, out);
}

KILN_DECL tensor resize(const tensor& x, std::span<const std::int64_t> size, const resize_params& p) {
  detail::check_resize("resize", x, size, p);
  tensor out = new_output(shape_vector(size.begin(), size.end()), x.type());
  resize(x, p, out);
  return out;
}

}  // namespace kiln::kernels
