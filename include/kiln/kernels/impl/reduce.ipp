// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/reduce.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/reduce.hpp>

namespace kiln::kernels::detail {

KILN_DECL std::vector<bool> reduced_axes(std::string_view op, std::size_t ndim, std::span<const std::int64_t> axes) {
  std::vector<bool> red(ndim, axes.empty());
  for (std::int64_t a : axes) {
    const std::size_t n = normalize_axis(op, a, ndim);
    if (red[n]) fail(op, kiln::detail::concat("axis ", a, " is given twice"));
    red[n] = true;
  }
  return red;
}

KILN_DECL shape_vector reduced_shape(const tensor& x, const std::vector<bool>& red, bool keepdims) {
  shape_vector s;
  for (std::size_t i = 0; i < x.ndim(); ++i) {
    if (!red[i]) s.push_back(x.shape(i));
    else if (keepdims) s.push_back(1);
  }
  return s;
}

KILN_DECL std::vector<bool> arg_axes(std::string_view op, const tensor& x, std::optional<std::int64_t> axis) {
  if (!axis) return std::vector<bool>(x.ndim(), true);
  return reduced_axes(op, x.ndim(), std::array{*axis});
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

#define KILN_KERNELS_DEFINE_REDUCE(op, reducer, numeric, is_mean)                                                               \
  KILN_DECL void op(const tensor& x, std::span<const std::int64_t> axes, bool keepdims, const tensor& out) {                    \
    detail::reduce<detail::reducer>(#op, x, axes, keepdims, out, numeric, is_mean);                                              \
  }                                                                                                                              \
  KILN_DECL tensor op(const tensor& x, std::span<const std::int64_t> axes, bool keepdims) {                                      \
    return detail::reduce_new<detail::reducer>(#op, x, axes, keepdims, numeric, is_mean);                                        \
  }
KILN_KERNELS_REDUCTIONS(KILN_KERNELS_DEFINE_REDUCE)
#undef KILN_KERNELS_DEFINE_REDUCE

KILN_DECL void argmax(const tensor& x, std::optional<std::int64_t> axis, bool keepdims, const tensor& out) {
  detail::arg_extreme<true>("argmax", x, axis, keepdims, out);
}

KILN_DECL void argmin(const tensor& x, std::optional<std::int64_t> axis, bool keepdims, const tensor& out) {
  detail::arg_extreme<false>("argmin", x, axis, keepdims, out);
}

KILN_DECL tensor argmax(const tensor& x, std::optional<std::int64_t> axis, bool keepdims) {
  return detail::arg_extreme_new<true>("argmax", x, axis, keepdims);
}

KILN_DECL tensor argmin(const tensor& x, std::optional<std::int64_t> axis, bool keepdims) {
  return detail::arg_extreme_new<false>("argmin", x, axis, keepdims);
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL shape_vector topk_shape(std::string_view op, const tensor& x, std::int64_t k, std::int64_t axis, std::size_t& a) {
  if (!x.defined()) fail(op, "the operand is undefined");
  if (!ops::is_numeric(x.type())) fail(op, kiln::detail::concat("does not take ", name(x.type()), " tensors"));
  if (x.ndim() == 0) fail(op, "needs a tensor of rank at least 1, got a scalar");
  a = normalize_axis(op, axis, x.ndim());
  if (k < 0 || k > x.shape(a))
    fail(op, kiln::detail::concat("k = ", k, " must be in [0, ", x.shape(a), "], the extent of axis ", a, " of ", describe_operand(x)));
  shape_vector s = x.shape();
  s[a] = k;
  return s;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void topk(const tensor& x, std::int64_t k, std::int64_t axis, bool largest, bool sorted, const tensor& values, const tensor& indices) {
  constexpr std::string_view op = "topk";
  std::size_t a = 0;
  const shape_vector s = detail::topk_shape(op, x, k, axis, a);
  check_output(op, values, x.type(), s);
  if (!indices.defined() || (indices.type() != dtype::int64 && indices.type() != dtype::int32) || indices.shape() != s)
    fail(op, kiln::detail::concat("the indices output must be int64 or int32", runtime::shape_to_string(s), ", got ",
                                  indices.defined() ? describe_operand(indices) : std::string("nothing")));
  if (overlaps(values, x) || overlaps(indices, x) || overlaps(values, indices)) fail(op, "the outputs must not overlap the input or each other");
  const tensor src = x.contiguous();
  const bool direct = values.is_contiguous() && indices.is_contiguous();
  const tensor vals = direct ? values : new_output(s, x.type()), idx = direct ? indices : new_output(s, indices.type());
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= src.shape(i);
  for (std::size_t i = a + 1; i < src.ndim(); ++i) inner *= src.shape(i);
  const std::int64_t n = src.shape(a);
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    const T* in = static_cast<const T*>(src.data());
    T* ov = static_cast<T*>(vals.data());
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    const auto nan = [](T v) {
      if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
      else return (void)v, false;
    };
    for (std::int64_t b = 0; b < outer; ++b)
      for (std::int64_t j = 0; j < inner; ++j) {
        const T* line = in + b * n * inner + j;
        const auto at = [&](std::int64_t i) { return line[i * inner]; };
        // "a before b": more extreme first, then the lower index
        const auto before = [&](std::int64_t p, std::int64_t q) {
          const T u = at(p), v = at(q);
          const bool un = nan(u), vn = nan(v);
          if (un || vn) return un != vn ? (largest ? un : vn) : p < q;
          if (u != v) return largest ? v < u : u < v;
          return p < q;
        };
        std::iota(order.begin(), order.end(), std::int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        if (!sorted) std::sort(order.begin(), order.begin() + k);
        for (std::int64_t t = 0; t < k; ++t) {
          const std::int64_t at_out = (b * k + t) * inner + j;
          ov[at_out] = at(order[std::size_t(t)]);
          if (idx.type() == dtype::int64) static_cast<std::int64_t*>(idx.data())[at_out] = order[std::size_t(t)];
          else static_cast<std::int32_t*>(idx.data())[at_out] = static_cast<std::int32_t>(order[std::size_t(t)]);
        }
      }
  });
  if (!direct) {
    detail::copy_unchecked(vals, values);
    detail::copy_unchecked(idx, indices);
  }
}

KILN_DECL std::pair<tensor, tensor> topk(const tensor& x, std::int64_t k, std::int64_t axis, bool largest, bool sorted) {
  std::size_t a = 0;
  const shape_vector s = detail::topk_shape("topk", x, k, axis, a);
  tensor values = new_output(s, x.type()), indices = new_output(s, dtype::int64);
  topk(x, k, axis, largest, sorted, values, indices);
  return {values, indices};
}

KILN_DECL void cumsum(const tensor& x, std::optional<std::int64_t> axis, bool exclusive, bool reverse, const tensor& out) {
  constexpr std::string_view op = "cumsum";
  if (!x.defined()) fail(op, "the operand is undefined");
  if (!ops::is_numeric(x.type())) fail(op, kiln::detail::concat("does not take ", name(x.type()), " tensors"));
  if (axis && x.ndim() == 0) fail(op, "cannot sum along an axis of a scalar");
  const std::size_t a = axis ? detail::normalize_axis(op, *axis, x.ndim()) : 0;
  const shape_vector shape = axis ? x.shape() : shape_vector{x.numel()};
  check_output(op, out, x.type(), shape);
  if (overlaps(out, x))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps the input; write into a separate tensor"));
  const tensor src = axis ? x.contiguous() : x.contiguous().view(shape);
  const bool direct = out.is_contiguous();
  const tensor dst = direct ? out : new_output(shape, x.type());
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= src.shape(i);
  for (std::size_t i = a + 1; i < src.ndim(); ++i) inner *= src.shape(i);
  const std::int64_t n = src.ndim() == 0 ? 1 : src.shape(a);
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    const T* in = static_cast<const T*>(src.data());
    T* o = static_cast<T*>(dst.data());
    std::vector<T> acc(static_cast<std::size_t>(inner), T(0));
    for (std::int64_t b = 0; b < outer; ++b) {
      std::fill(acc.begin(), acc.end(), T(0));
      for (std::int64_t s = 0; s < n; ++s) {
        const std::int64_t i = reverse ? n - 1 - s : s;
        const T* row = in + (b * n + i) * inner;
        T* res = o + (b * n + i) * inner;
        for (std::int64_t k = 0; k < inner; ++k) {
          const T next = ops::add{}(acc[std::size_t(k)], row[k]);
          res[k] = exclusive ? acc[std::size_t(k)] : next;
          acc[std::size_t(k)] = next;
        }
      }
    }
  });
  if (!direct) detail::copy_unchecked(dst, out);
}

KILN_DECL tensor cumsum(const tensor& x, std::optional<std::int64_t> axis, bool exclusive, bool reverse) {
  if (!x.defined()) fail("cumsum", "the operand is undefined");
  tensor out = new_output(axis ? x.shape() : shape_vector{x.numel()}, x.type());
  cumsum(x, axis, exclusive, reverse, out);
  return out;
}

KILN_DECL void softmax(const tensor& x, std::int64_t axis, const tensor& out) { detail::softmax_impl<false>("softmax", x, axis, out); }

KILN_DECL tensor softmax(const tensor& x, std::int64_t axis) {
  if (!x.defined()) fail("softmax", "the operand is undefined");
  tensor out = new_output(x.shape(), x.type());
  softmax(x, axis, out);
  return out;
}

KILN_DECL void log_softmax(const tensor& x, std::int64_t axis, const tensor& out) { detail::softmax_impl<true>("log_softmax", x, axis, out); }

KILN_DECL tensor log_softmax(const tensor& x, std::int64_t axis) {
  if (!x.defined()) fail("log_softmax", "the operand is undefined");
  tensor out = new_output(x.shape(), x.type());
  log_softmax(x, axis, out);
  return out;
}

KILN_DECL void layer_norm(const tensor& x, const tensor& gamma, const tensor& beta, std::span<const std::int64_t> axes, double epsilon,
                          const tensor& out, bool center, bool scale) {
  constexpr std::string_view op = "layer_norm";
  if (!x.defined()) fail(op, "the operand is undefined");
  if (!ops::is_floating(x.type())) fail(op, kiln::detail::concat("needs a float32 or float64 tensor, got ", describe_operand(x)));
  if (!(epsilon >= 0)) fail(op, kiln::detail::concat("epsilon must be at least 0, got ", std::to_string(epsilon)));
  if (axes.empty()) fail(op, "needs at least one axis");
  const std::vector<bool> red = detail::reduced_axes(op, x.ndim(), axes);
  std::size_t first = x.ndim();
  for (std::size_t i = 0; i < x.ndim(); ++i)
    if (red[i]) first = std::min(first, i);
  for (std::size_t i = first; i < x.ndim(); ++i)
    if (!red[i])
      fail(op, kiln::detail::concat("the normalised axes must be the trailing ones; axis ", i, " of ", describe_operand(x), " is between them"));
  const shape_vector norm_shape(x.shape().begin() + std::ptrdiff_t(first), x.shape().end());
  auto check_param = [&](const tensor& p, const char* what, bool used) {
    if (!used) return;
    if (!p.defined()) fail(op, kiln::detail::concat(what, " is undefined"));
    if (p.type() != x.type() || p.shape() != norm_shape)
      fail(op, kiln::detail::concat(what, " must be ", name(x.type()), runtime::shape_to_string(norm_shape), ", got ", describe_operand(p)));
  };
  check_param(gamma, "gamma", scale);
  check_param(beta, "beta", center);
  check_output(op, out, x.type(), x.shape());
  check_no_overlap(op, out, {&x});
  if (x.numel() == 0) return;
  // Rows of the normalised block, contiguous copies of x's and of the parameters.
  const tensor xc = x.contiguous();
  std::int64_t block = 1;
  for (auto d : norm_shape) block *= d;
  const std::int64_t rows = x.numel() / block;
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      using V = batch<T>;
      constexpr std::int64_t W = std::int64_t(V::size);
      const tensor gc = scale ? gamma.contiguous() : tensor(), bc = center ? beta.contiguous() : tensor();
      const T* g = scale ? static_cast<const T*>(gc.data()) : nullptr;
      const T* b = center ? static_cast<const T*>(bc.data()) : nullptr;
      const T* in = static_cast<const T*>(xc.data());
      std::vector<T> result(out.is_contiguous() ? 0 : std::size_t(x.numel()));
      T* dst_all = out.is_contiguous() ? static_cast<T*>(out.data()) : result.data();
      // sum over the row of f(x), in vectors of T over chunks of 16 vectors, each chunk's total
      // added in double: as precise as a sum in double for rows of any length, at vector speed.
      auto row_sum = [&](const T* p, auto f) {
        constexpr std::int64_t chunk = 16 * W;
        const std::int64_t vectors_end = block / W * W;
        double s = 0;
        std::int64_t j = 0;
        while (j < vectors_end) {
          const std::int64_t end = std::min(vectors_end, j + chunk);
          V a0(T(0)), a1(T(0));
          for (; j + 2 * W <= end; j += 2 * W) {
            a0 += f(V::load_unaligned(p + j));
            a1 += f(V::load_unaligned(p + j + W));
          }
          for (; j < end; j += W) a0 += f(V::load_unaligned(p + j));
          s += double(xsimd::hadd(a0 + a1));
        }
        for (; j < block; ++j) s += double(f(p[j]));
        return s;
      };
      auto normalise = [&](std::int64_t r) {
        const T* p = in + r * block;
        T* dst = dst_all + r * block;
        const double mean = row_sum(p, [](auto v) { return v; }) / double(block);
        const T m = T(mean);
        const double var = row_sum(p, [m](auto v) { return (v - m) * (v - m); }) / double(block);
        const T inv = T(1.0 / std::sqrt(var + epsilon));
        const V mv = V(m), iv = V(inv);
        std::int64_t j = 0;
        for (; j + W <= block; j += W) {
          V y = (V::load_unaligned(p + j) - mv) * iv;
          if (g) y *= V::load_unaligned(g + j);
          if (b) y += V::load_unaligned(b + j);
          y.store_unaligned(dst + j);
        }
        for (; j < block; ++j) {
          T y = (p[j] - m) * inv;
          if (g) y *= g[j];
          if (b) y += b[j];
          dst[j] = y;
        }
      };
      // Rows shared out among the threads in groups of at least 2^15 elements.
      const std::int64_t per_task = std::max<std::int64_t>(1, (std::int64_t(1) << 15) / block);
      parallel_for((rows + per_task - 1) / per_task, [&](std::int64_t t) {
        for (std::int64_t r = t * per_task; r < std::min(rows, (t + 1) * per_task); ++r) normalise(r);
      });
      if (!out.is_contiguous()) detail::scatter(result.data(), out);
    }
  });
}

KILN_DECL tensor layer_norm(const tensor& x, const tensor& gamma, const tensor& beta, axis_list axes, double epsilon,
                            bool center, bool scale) {
  if (!x.defined()) fail("layer_norm", "the operand is undefined");
  tensor out = new_output(x.shape(), x.type());
  layer_norm(x, gamma, beta, std::span<const std::int64_t>(axes.begin(), axes.size()), epsilon, out, center, scale);
  return out;
}

}  // namespace kiln::kernels
