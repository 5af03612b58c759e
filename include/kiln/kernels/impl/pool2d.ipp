// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/pool2d.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/pool2d.hpp>

namespace kiln::kernels::detail {

KILN_DECL pool_geometry check_pool2d(std::string_view op, const tensor& x, const pool2d_params& p, bool floating_only) {
  check_nchw(op, x, "the data");
  if (floating_only ? !ops::is_floating(x.type()) : !ops::is_numeric(x.type()))
    fail(op, kiln::detail::concat("does not take ", describe_operand(x), floating_only ? " (float32 or float64 only)" : ""));
  if (p.pool_size[0] <= 0 || p.pool_size[1] <= 0)
    fail(op, kiln::detail::concat("pool_size must be positive, got (", p.pool_size[0], ", ", p.pool_size[1], ")"));
  check_window_params(op, p.strides, p.dilation, p.padding);
  pool_geometry g{x.shape(0), x.shape(1), x.shape(2), x.shape(3), 0, 0};
  g.oh = window_count(op, "pooling", g.h, p.pool_size[0], p.strides[0], p.dilation[0], p.padding[0], p.padding[2], p.ceil_mode);
  g.ow = window_count(op, "pooling", g.w, p.pool_size[1], p.strides[1], p.dilation[1], p.padding[1], p.padding[3], p.ceil_mode);
  return g;
}

KILN_DECL std::vector<std::int64_t> tap_counts(std::int64_t out, std::int64_t k, std::int64_t stride, std::int64_t dilation, std::int64_t pad,
                                               std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> counts(std::size_t(out), 0);
  for (std::int64_t y = 0; y < out; ++y)
    for (std::int64_t i = 0; i < k; ++i) {
      const std::int64_t at = y * stride - pad + i * dilation;
      counts[std::size_t(y)] += at >= lo && at < hi;
    }
  return counts;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void max_pool2d(const tensor& x, const pool2d_params& p, const tensor& out) { detail::pool2d_op<true>("max_pool2d", x, p, out); }

KILN_DECL tensor max_pool2d(const tensor& x, const pool2d_params& p) { return detail::pool2d_new<true>("max_pool2d", x, p); }

KILN_DECL void avg_pool2d(const tensor& x, const pool2d_params& p, const tensor& out) { detail::pool2d_op<false>("avg_pool2d", x, p, out); }

KILN_DECL tensor avg_pool2d(const tensor& x, const pool2d_params& p) { return detail::pool2d_new<false>("avg_pool2d", x, p); }

KILN_DECL void adaptive_avg_pool2d(const tensor& x, const tensor& out) {
  constexpr std::string_view op = "adaptive_avg_pool2d";
  detail::check_nchw(op, x, "the data");
  detail::check_nchw(op, out, "the output");
  if (!ops::is_floating(x.type())) fail(op, kiln::detail::concat("needs float32 or float64 data, got ", describe_operand(x)));
  if (out.type() != x.type() || out.shape(0) != x.shape(0) || out.shape(1) != x.shape(1) || (out.shape(2) * out.shape(3) != 0 && x.shape(2) * x.shape(3) == 0))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " must be ", name(x.type()), "[", x.shape(0), ", ", x.shape(1),
                                  ", OH, OW] with a non-empty input plane ", describe_operand(x)));
  detail::check_disjoint(op, x, out);
  const std::int64_t h = x.shape(2), w = x.shape(3), oh = out.shape(2), ow = out.shape(3);
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      const T* xb = static_cast<const T*>(x.data());
      T* ob = static_cast<T*>(out.data());
      const auto& xs = x.strides();
      const auto& os = out.strides();
      parallel_for(x.shape(0) * x.shape(1), [&](std::int64_t t) {
        const std::int64_t n = t / x.shape(1), c = t % x.shape(1);
        const T* plane = xb + n * xs[0] + c * xs[1];
        for (std::int64_t i = 0; i < oh; ++i) {
          const std::int64_t y0 = i * h / oh, y1 = ((i + 1) * h + oh - 1) / oh;
          for (std::int64_t j = 0; j < ow; ++j) {
            const std::int64_t x0 = j * w / ow, x1 = ((j + 1) * w + ow - 1) / ow;
            T s = 0;
            for (std::int64_t y = y0; y < y1; ++y)
              for (std::int64_t q = x0; q < x1; ++q) s += plane[y * xs[2] + q * xs[3]];
            ob[n * os[0] + c * os[1] + i * os[2] + j * os[3]] = s / T((y1 - y0) * (x1 - x0));
          }
        }
      });
    }
  });
}

KILN_DECL tensor adaptive_avg_pool2d(const tensor& x, std::array<std::int64_t, 2> output_size) {
  detail::check_nchw("adaptive_avg_pool2d", x, "the data");
  if (output_size[0] < 0 || output_size[1] < 0)
    fail("adaptive_avg_pool2d", kiln::detail::concat("the output size must not be negative, got (", output_size[0], ", ", output_size[1], ")"));
  tensor out = new_output({x.shape(0), x.shape(1), output_size[0], output_size[1]}, x.type());
  adaptive_avg_pool2d(x, out);
  return out;
}

KILN_DECL void global_avg_pool2d(const tensor& x, const tensor& out) {
  detail::check_nchw("global_avg_pool2d", x, "the data");
  if (!ops::is_floating(x.type())) fail("global_avg_pool2d", kiln::detail::concat("needs float32 or float64 data, got ", describe_operand(x)));
  check_output("global_avg_pool2d", out, x.type(), std::array{x.shape(0), x.shape(1), std::int64_t(1), std::int64_t(1)});
  mean(x, std::array<std::int64_t, 2>{2, 3}, true, out);
}

KILN_DECL tensor global_avg_pool2d(const tensor& x) {
  detail::check_nchw("global_avg_pool2d", x, "the data");
  tensor out = new_output({x.shape(0), x.shape(1), 1, 1}, x.type());
  global_avg_pool2d(x, out);
  return out;
}

}  // namespace kiln::kernels
