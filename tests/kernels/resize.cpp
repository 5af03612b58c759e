// SPDX-License-Identifier: Apache-2.0
// resize against a literal transcription of ONNX's reference (onnx/backend/test/case/node/
// resize.py: the 1-D interpolation with the taps found by sorting distances over an edge-padded
// row, applied recursively from the first axis), and against values from the ONNX
// specification's examples. Tolerance 1e-12 (float64; the kernel sums taps in another order).
#include <kiln/kernels/resize.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

using namespace kiln;
using namespace kiln::kernels;

namespace {

struct reference {
  const resize_params& p;
  std::vector<double> coeffs(double ratio) const {
    switch (p.method) {
      case resize_method::nearest:
        if (ratio == 1.0) return {0, 1};
        switch (p.rounding) {
          case nearest_rounding::round_prefer_floor: return {double(ratio <= 0.5), double(ratio > 0.5)};
          case nearest_rounding::round_prefer_ceil: return {double(ratio < 0.5), double(ratio >= 0.5)};
          case nearest_rounding::floor: return {1, 0};
          case nearest_rounding::ceil: return {0, 1};
        }
        break;
      case resize_method::linear: return {1 - ratio, ratio};
      case resize_method::cubic: {
        const double A = p.cubic_alpha, r = ratio;
        return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
                ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
                ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A};
      }
    }
    return {};
  }
  // interpolate_1d_with_x
  double one(const std::vector<double>& data, double scale, double x, double roi0, double roi1) const {
    const double in = double(data.size()), out = scale * in;
    double c = 0;
    switch (p.coordinates) {
      case resize_coordinates::align_corners: c = out == 1 ? 0 : x * (in - 1) / (out - 1); break;
      case resize_coordinates::asymmetric: c = x / scale; break;
      case resize_coordinates::tf_crop_and_resize:
        c = out == 1 ? (roi1 - roi0) * (in - 1) / 2 : x * (roi1 - roi0) * (in - 1) / (out - 1);
        c += roi0 * (in - 1);
        if (c < 0 || c > in - 1) return p.extrapolation_value;
        break;
      case resize_coordinates::pytorch_half_pixel: c = out == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
      case resize_coordinates::half_pixel: c = (x + 0.5) / scale - 0.5; break;
      case resize_coordinates::tf_half_pixel_for_nn: c = (x + 0.5) / scale; break;
    }
    const double ratio = c == std::floor(c) ? 1.0 : c - std::floor(c);
    std::vector<double> k = coeffs(ratio);
    const auto n = std::int64_t(k.size());
    // get_neighbor: pad by ceil(n/2) at the edges, take the n indexes nearest to c (ties: smaller)
    const std::int64_t pad = (n + 1) / 2, len = std::int64_t(data.size()) + 2 * pad;
    std::vector<std::int64_t> all(static_cast<std::size_t>(len));
    std::iota(all.begin(), all.end(), 0);
    const double cx = c + double(pad);
    std::stable_sort(all.begin(), all.end(), [&](auto a, auto b) { return std::abs(cx - double(a)) < std::abs(cx - double(b)); });
    std::vector<std::int64_t> idx(all.begin(), all.begin() + n);
    std::sort(idx.begin(), idx.end());
    double sum = 0;
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t i = idx[std::size_t(t)] - pad;
      if (p.exclude_outside && (i < 0 || i >= std::int64_t(data.size()))) k[std::size_t(t)] = 0;
      sum += k[std::size_t(t)];
    }
    double v = 0;
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t i = std::clamp<std::int64_t>(idx[std::size_t(t)] - pad, 0, std::int64_t(data.size()) - 1);
      v += (p.exclude_outside ? k[std::size_t(t)] / sum : k[std::size_t(t)]) * data[std::size_t(i)];
    }
    return v;
  }
};

/// Resizes `x` (row-major `shape`) to `size` the reference's way: every output element by the
/// nested 1-D interpolations of interpolate_nd_with_x.
std::vector<double> reference_resize(const std::vector<double>& x, const shape_vector& shape, const shape_vector& size, const resize_params& p) {
  const reference ref{p};
  const std::size_t r = shape.size();
  std::function<double(std::size_t, std::int64_t, const shape_vector&)> nd = [&](std::size_t axis, std::int64_t offset, const shape_vector& o) {
    // the value at output coordinates o[axis..] of the sub-tensor of x at `offset` (axes < axis fixed)
    std::int64_t stride = 1;
    for (std::size_t d = axis + 1; d < r; ++d) stride *= shape[d];
    std::vector<double> line(static_cast<std::size_t>(shape[axis]));
    for (std::int64_t i = 0; i < shape[axis]; ++i)
      line[std::size_t(i)] = axis + 1 == r ? x[std::size_t(offset + i)] : nd(axis + 1, offset + i * stride, o);
    const double scale = p.scales.empty() ? double(size[axis]) / double(shape[axis]) : p.scales[axis];
    const double roi0 = p.roi.empty() ? 0 : p.roi[axis], roi1 = p.roi.empty() ? 1 : p.roi[r + axis];
    return ref.one(line, scale, double(o[axis]), roi0, roi1);
  };
  std::int64_t n = 1;
  for (auto e : size) n *= e;
  std::vector<double> out;
  shape_vector o(r, 0);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t rest = k;
    for (std::size_t d = r; d-- > 0;) o[d] = rest % size[d], rest /= size[d];
    out.push_back(nd(0, 0, o));
  }
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
}

}  // namespace

TEST_CASE("resize: the ONNX specification's examples") {
  const tensor x = tensor::from_values<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  resize_params nearest;
  nearest.scales = {1, 1, 2, 3};
  CHECK(resize(x, std::vector<std::int64_t>{1, 1, 4, 6}, nearest).to_vector<float>() ==
        std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  resize_params linear;
  linear.method = resize_method::linear;
  linear.scales = {1, 1, 2, 2};
  CHECK(resize(x, std::vector<std::int64_t>{1, 1, 4, 4}, linear).to_vector<float>() ==
        std::vector<float>{1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  // align_corners keeps the unrounded output extent 4 * 0.6 = 2.4: 1 * 3 / 1.4 -> 3.142857
  const tensor y = tensor::from_values<double>({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  resize_params corners = linear;
  corners.coordinates = resize_coordinates::align_corners;
  corners.scales = {1, 1, 0.6, 0.6};
  check_close(resize(y, std::vector<std::int64_t>{1, 1, 1, 2}, corners).to_vector<double>(), {1, 1 + 3 / 1.4}, 1e-15);
  // nearest, downsampling by 0.6 with half_pixel: [[1, 3]]
  nearest.scales = {1, 1, 0.6, 0.6};
  CHECK(resize(y, std::vector<std::int64_t>{1, 1, 1, 2}, nearest).to_vector<double>() == std::vector<double>{1, 3});
}

TEST_CASE("resize: every method and coordinate mode against ONNX's reference") {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> dist(-2, 2);
  const shape_vector shape{2, 3, 5};
  std::vector<double> values(30);
  for (auto& v : values) v = dist(gen);
  const tensor x = tensor::from_values<double>(shape, values);
  for (auto method : {resize_method::nearest, resize_method::linear, resize_method::cubic})
    for (auto coords : {resize_coordinates::half_pixel, resize_coordinates::pytorch_half_pixel, resize_coordinates::align_corners,
                        resize_coordinates::asymmetric, resize_coordinates::tf_half_pixel_for_nn, resize_coordinates::tf_crop_and_resize})
      for (const shape_vector& size : {shape_vector{2, 7, 11}, shape_vector{1, 2, 3}, shape_vector{3, 1, 8}})
        for (bool given_scales : {false, true})
          for (bool exclude : {false, true}) {
            // exclude_outside renormalises interpolation weights; nearest ignores it (the reference
            // would divide by zero where the chosen neighbour is outside)
            if (exclude && method == resize_method::nearest) continue;
            resize_params p;
            p.method = method;
            p.coordinates = coords;
            p.exclude_outside = exclude;
            p.cubic_alpha = exclude ? -0.5 : -0.75;
            p.rounding = exclude ? nearest_rounding::round_prefer_ceil : nearest_rounding::round_prefer_floor;
            p.extrapolation_value = 10;
            if (given_scales) p.scales = {double(size[0]) / 2 + 0.2, double(size[1]) / 3 + 0.1, double(size[2]) / 5 + 0.05};
            if (coords == resize_coordinates::tf_crop_and_resize) p.roi = {0, 0.2, -0.1, 1, 0.7, 1.3};
            CAPTURE(int(method));
            CAPTURE(int(coords));
            CAPTURE(given_scales);
            CAPTURE(exclude);
            check_close(resize(x, size, p).to_vector<double>(), reference_resize(values, shape, size, p));
          }
}

TEST_CASE("resize: float32, integers (nearest), strided inputs and outputs, empty outputs") {
  const tensor x = tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  resize_params p;
  p.method = resize_method::linear;
  const tensor wide = tensor::zeros({2, 8}, dtype::float32), out = wide.slice(1, 0, 8, 2);  // every other column
  resize(x.permute({1, 0}).permute({1, 0}), p, out);
  CHECK(out.contiguous().to_vector<float>() == resize(x, std::vector<std::int64_t>{2, 4}, p).to_vector<float>());
  const tensor i = tensor::from_values<std::int64_t>({1, 3}, {std::int64_t(1) << 60, 7, -5});
  p.method = resize_method::nearest;
  CHECK(resize(i, std::vector<std::int64_t>{2, 6}, p).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{std::int64_t(1) << 60, std::int64_t(1) << 60, 7, 7, -5, -5, std::int64_t(1) << 60, std::int64_t(1) << 60, 7, 7, -5, -5});
  CHECK(resize(x, std::vector<std::int64_t>{0, 3}, p).numel() == 0);
  CHECK(resize(x, std::vector<std::int64_t>{2, 3}, p).to_vector<float>() == x.to_vector<float>());  // nothing changes
}

TEST_CASE("resize: extreme scales and a NaN region map far outside the input without undefined behaviour") {
  const tensor x = tensor::from_values<double>({4}, {1, 2, 3, 4});
  resize_params p;
  p.method = resize_method::linear;
  p.coordinates = resize_coordinates::asymmetric;
  p.scales = {1e-300};  // every output position maps to +inf: the last element
  CHECK(resize(x, std::vector<std::int64_t>{3}, p).to_vector<double>() == std::vector<double>{1, 4, 4});
  p.scales = {1e300};  // everything maps to 0: the first element
  CHECK(resize(x, std::vector<std::int64_t>{2}, p).to_vector<double>() == std::vector<double>{1, 1});
  p.scales.clear();
  p.coordinates = resize_coordinates::tf_crop_and_resize;
  p.roi = {std::numeric_limits<double>::quiet_NaN(), 1};
  p.extrapolation_value = -5;
  CHECK(resize(x, std::vector<std::int64_t>{2}, p).to_vector<double>() == std::vector<double>{-5, -5});
}

TEST_CASE("resize: bad operands are errors that name them") {
  const tensor x = tensor::zeros({2, 3}, dtype::float32);
  resize_params p;
  CHECK(message_of([&] { (void)resize(x, std::vector<std::int64_t>{4}, p); }) ==
        "kiln::kernels::resize: the output size has 1 extents, but x float32[2, 3] has rank 2");
  p.method = resize_method::cubic;
  CHECK(message_of([&] { (void)resize(tensor::zeros({2, 3}, dtype::int32), std::vector<std::int64_t>{4, 6}, p); }) ==
        "kiln::kernels::resize: interpolation needs float32 or float64, not int32[2, 3]");
  p.scales = {2};
  CHECK(message_of([&] { (void)resize(x, std::vector<std::int64_t>{4, 6}, p); }) == "kiln::kernels::resize: there are 1 scales for a tensor of rank 2");
  p.scales = {2, -1};
  CHECK(message_of([&] { (void)resize(x, std::vector<std::int64_t>{4, 6}, p); }) ==
        "kiln::kernels::resize: the scales must be positive and finite, got -1");
  p.scales.clear();
  p.coordinates = resize_coordinates::tf_crop_and_resize;
  CHECK(message_of([&] { (void)resize(x, std::vector<std::int64_t>{4, 6}, p); }) ==
        "kiln::kernels::resize: tf_crop_and_resize needs a region of interest of 4 values (starts, then ends), got 0");
  p.coordinates = resize_coordinates::half_pixel;
  CHECK(message_of([&] { (void)resize(tensor::zeros({0, 3}, dtype::float32), std::vector<std::int64_t>{2, 3}, p); }) ==
        "kiln::kernels::resize: cannot resize the empty axis 0 of float32[0, 3] to 2");
  CHECK(message_of([&] { resize(x, p, tensor::zeros({4, 6}, dtype::float64)); }) ==
        "kiln::kernels::resize: the output must be float32[4, 6], got float64[4, 6]");
  CHECK(message_of([&] { parse_resize_method("resize", "area"); }) ==
        "kiln::kernels::resize: the method must be 'nearest', 'linear' or 'cubic', not 'area'");
  CHECK(message_of([&] { parse_nearest_rounding("resize", "round"); }) ==
        "kiln::kernels::resize: the nearest rounding mode must be 'round_prefer_floor', 'round_prefer_ceil', 'floor' or 'ceil', not 'round'");
}
