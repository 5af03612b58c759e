// SPDX-License-Identifier: Apache-2.0
/// \file
/// Building blocks for operator type-inference rules: broadcasting, axes, dtype agreement.
#pragma once

#include <kiln/ir/op_registry.hpp>

namespace kiln::ir::detail {

/// Rank and (optional) dimensions of a tensor result.
struct shape_info {
  int ndim = -1;
  std::optional<std::vector<prim_expr>> dims;
  type as_tensor(dtype d) const {
    if (dims) return tensor_type(*dims, d);
    return tensor_type_of_rank(d, ndim);
  }
};

inline std::string dims_to_string(const std::vector<prim_expr>& d) { return to_string(d); }

/// Numpy broadcasting of the tensor arguments `which`. Statically different dimensions (neither 1)
/// are an error naming both arguments; symbolic ones that cannot be proven equal make the result
/// shape unknown (its rank stays known).
inline shape_info broadcast(const call_context& ctx, std::initializer_list<std::size_t> which) {
  shape_info out;
  bool all_shapes = true;
  for (auto i : which) {
    auto& t = ctx.tensor(i);
    if (t.ndim < 0) return out;  // unknown rank
    out.ndim = std::max(out.ndim, t.ndim);
    all_shapes &= t.shape.has_value();
  }
  if (!all_shapes) return out;
  std::vector<prim_expr> dims(static_cast<std::size_t>(out.ndim));
  bool known = true;
  for (int k = 1; k <= out.ndim; ++k) {
    prim_expr chosen;
    std::size_t chosen_arg = 0;
    bool unknown = false;
    for (auto i : which) {
      auto& t = ctx.tensor(i);
      if (t.ndim < k) continue;
      const prim_expr& d = (*t.shape)[static_cast<std::size_t>(t.ndim - k)];
      if (as_int(d) == 1) continue;
      if (!chosen) {
        chosen = d, chosen_arg = i;
        continue;
      }
      if (prove_equal(chosen, d)) continue;
      if (as_int(chosen) && as_int(d))
        ctx.fail("cannot broadcast " + dims_to_string(*ctx.tensor(chosen_arg).shape) + " (argument " + ctx.arg_label(chosen_arg) +
                 ") with " + dims_to_string(*t.shape) + " (argument " + ctx.arg_label(i) + "): dimension " +
                 to_string(chosen) + " vs " + to_string(d));
      unknown = true;
    }
    if (unknown) known = false;
    dims[static_cast<std::size_t>(out.ndim - k)] = chosen ? chosen : make_int(1);
  }
  if (known) out.dims = std::move(dims);
  return out;
}

/// The common dtype of the tensor arguments `which`; an error if two known dtypes differ.
inline dtype common_dtype(const call_context& ctx, std::initializer_list<std::size_t> which) {
  dtype d = dtype::void_;
  std::size_t first = 0;
  for (auto i : which) {
    dtype di = ctx.tensor(i).dt;
    if (!is_known(di)) continue;
    if (is_known(d) && d != di)
      ctx.fail("dtype mismatch: argument " + ctx.arg_label(first) + " is " + std::string(name(d)) + " but argument " +
               ctx.arg_label(i) + " is " + std::string(name(di)));
    if (!is_known(d)) d = di, first = i;
  }
  return d;
}

/// Requires argument `i` to be a floating-point tensor (unknown dtype passes).
inline void require_float(const call_context& ctx, std::size_t i) {
  dtype d = ctx.tensor(i).dt;
  if (is_known(d) && !is_float(d)) ctx.fail_arg(i, "must be a floating-point tensor, but its dtype is " + std::string(name(d)));
}

/// `axis` in [-ndim, ndim) mapped to [0, ndim); an error naming the attribute otherwise.
inline int normalize_axis(const call_context& ctx, std::int64_t axis, int ndim, const char* attr_name = "axis") {
  if (axis < -ndim || axis >= ndim)
    ctx.fail("attribute '" + std::string(attr_name) + "' has axis " + std::to_string(axis) +
             ", which is out of range for a tensor of rank " + std::to_string(ndim));
  return static_cast<int>(axis < 0 ? axis + ndim : axis);
}

/// Normalised, duplicate-free axes.
inline std::vector<int> normalize_axes(const call_context& ctx, const int_array& axes, int ndim, const char* attr_name = "axis") {
  std::vector<int> out;
  for (auto a : axes) {
    int n = normalize_axis(ctx, a, ndim, attr_name);
    if (std::find(out.begin(), out.end(), n) != out.end())
      ctx.fail("attribute '" + std::string(attr_name) + "' names axis " + std::to_string(n) + " twice");
    out.push_back(n);
  }
  return out;
}

/// A list-of-int attribute of length 1 or `n` expanded to length `n` (e.g. strides).
inline int_array expand_to(const call_context& ctx, const char* attr_name, std::size_t n) {
  const int_array& v = ctx.attr<int_array>(attr_name);
  if (v.size() == n) return v;
  if (v.size() == 1) return int_array(n, v[0]);
  ctx.fail("attribute '" + std::string(attr_name) + "' must have 1 or " + std::to_string(n) + " values, but has " +
           std::to_string(v.size()));
}

/// Product of dimensions (constant-folded where possible).
inline prim_expr product(const std::vector<prim_expr>& dims) {
  prim_expr p = make_int(1);
  for (auto& d : dims) p = p * d;
  return p;
}

/// `(in + pad_total - dilation * (k - 1) - 1) / stride + 1`, with floor or ceil division.
inline prim_expr window_output(const prim_expr& in, std::int64_t pad_total, std::int64_t k, std::int64_t stride,
                               std::int64_t dilation, bool ceil_mode) {
  prim_expr span = in + make_int(pad_total - dilation * (k - 1) - 1);
  prim_expr num = ceil_mode ? span + make_int(stride - 1) : span;
  return floordiv(num, make_int(stride)) + make_int(1);
}

}  // namespace kiln::ir::detail
