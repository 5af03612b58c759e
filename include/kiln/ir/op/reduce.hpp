// SPDX-License-Identifier: Apache-2.0
/// \file
/// Reductions (sum, mean, max, min, prod, argmax, argmin), running sums (cumsum) and the
/// normalisations built on reductions (softmax, log_softmax, layer_norm).
#pragma once

#include <kiln/ir/op/infer.hpp>

namespace kiln::ir::detail {

/// The result of reducing `axes` (all axes when null) of argument 0.
inline type reduce_type(const call_context& ctx, const int_array* axes, bool keepdims, dtype d) {
  auto& t = ctx.tensor(0);
  if (t.ndim < 0) return tensor_type_of_rank(d, axes || keepdims ? -1 : 0);
  std::vector<int> ax;
  if (axes) ax = normalize_axes(ctx, *axes, t.ndim);
  else
    for (int i = 0; i < t.ndim; ++i) ax.push_back(i);
  const int out_ndim = keepdims ? t.ndim : t.ndim - static_cast<int>(ax.size());
  if (!t.shape) return tensor_type_of_rank(d, out_ndim);
  std::vector<prim_expr> out;
  for (int i = 0; i < t.ndim; ++i) {
    bool reduced = std::find(ax.begin(), ax.end(), i) != ax.end();
    if (!reduced) out.push_back((*t.shape)[static_cast<std::size_t>(i)]);
    else if (keepdims) out.push_back(make_int(1));
  }
  return tensor_type(std::move(out), d);
}

inline void register_reduce_ops(op_registry& r) {
  for (const char* n : {"sum", "mean", "max", "min", "prod"})
    r.add({n,
           {"x"},
           {{"axis", attr_kind::ints, {}, false, true}, {"keepdims", attr_kind::boolean, false}},
           [](const call_context& ctx) {
             if (ctx.op().name() == "mean") require_float(ctx, 0);
             const int_array* axes = ctx.attrs().find("axis")->get_if<int_array>();
             return reduce_type(ctx, axes, ctx.attr<bool>("keepdims"), ctx.tensor(0).dt);
           },
           op_pattern::reduction,
           std::string("reduces the given axes (all when None) by ") + n});
  for (const char* n : {"argmax", "argmin"})
    r.add({n,
           {"x"},
           {{"axis", attr_kind::integer, {}, false, true}, {"keepdims", attr_kind::boolean, false}},
           [](const call_context& ctx) {
             const auto* axis = ctx.attrs().find("axis")->get_if<std::int64_t>();
             int_array one;
             if (axis) one.push_back(*axis);
             return reduce_type(ctx, axis ? &one : nullptr, ctx.attr<bool>("keepdims"), dtype::int64);
           },
           op_pattern::reduction,
           "index of the extreme element along an axis (over the flattened tensor when None), int64"});
  r.add({"topk",
         {"data"},
         {{"k", attr_kind::integer, {}, true},
          {"axis", attr_kind::integer, std::int64_t{-1}},
          {"largest", attr_kind::boolean, true},
          {"sorted", attr_kind::boolean, true},
          {"dtype", attr_kind::data_type, dtype::int64}},
         [](const call_context& ctx) {
           auto& t = ctx.tensor(0);
           if (is_known(t.dt) && (t.dt == dtype::bool_ || t.dt == dtype::float16))
             ctx.fail_arg(0, "must be a numeric tensor, but its dtype is " + std::string(name(t.dt)));
           const dtype idx = ctx.attr<dtype>("dtype");
           if (idx != dtype::int64 && idx != dtype::int32) ctx.fail("attribute 'dtype' (of the indices) must be int64 or int32, not " + std::string(name(idx)));
           const std::int64_t k = ctx.attr<std::int64_t>("k");
           if (k < 0) ctx.fail("attribute 'k' must not be negative, but is " + std::to_string(k));
           if (t.ndim == 0) ctx.fail_arg(0, "must have rank at least 1");
           if (!t.shape) return tuple_type({tensor_type_of_rank(t.dt, t.ndim), tensor_type_of_rank(idx, t.ndim)});
           const std::size_t a = std::size_t(normalize_axis(ctx, ctx.attr<std::int64_t>("axis"), t.ndim));
           std::vector<prim_expr> s = *t.shape;
           if (auto n = as_int(s[a]); n && k > *n)
             ctx.fail("attribute 'k' (" + std::to_string(k) + ") is larger than axis " + std::to_string(a) + "'s extent " + std::to_string(*n));
           s[a] = make_int(k);
           return tuple_type({tensor_type(s, t.dt), tensor_type(s, idx)});
         },
         op_pattern::opaque,
         "the k largest (or smallest) elements along an axis and their indices, most extreme first (equal ones by index); a tuple"});
  r.add({"cumsum",
         {"x"},
         {{"axis", attr_kind::integer, {}, false, true}, {"exclusive", attr_kind::boolean, false}, {"reverse", attr_kind::boolean, false}},
         [](const call_context& ctx) {
           auto& t = ctx.tensor(0);
           if (is_known(t.dt) && (t.dt == dtype::bool_ || t.dt == dtype::float16))
             ctx.fail_arg(0, "must be a numeric tensor, but its dtype is " + std::string(name(t.dt)));
           const auto* axis = ctx.attrs().find("axis")->get_if<std::int64_t>();
           if (!axis) {  // over the flattened tensor
             if (!t.shape) return tensor_type_of_rank(t.dt, 1);
             prim_expr n = make_int(1);
             for (auto& d : *t.shape) n = n * d;
             return tensor_type({n}, t.dt);
           }
           if (t.ndim == 0) ctx.fail_arg(0, "must have rank at least 1 to sum along an axis");
           if (t.ndim > 0) normalize_axis(ctx, *axis, t.ndim);
           return ctx.arg_type(0);
         },
         op_pattern::opaque,
         "running sums along an axis (the flattened tensor when None); exclusive leaves out each element, reverse runs from the end"});
  for (const char* n : {"nn.softmax", "nn.log_softmax"})
    r.add({n,
           {"x"},
           {{"axis", attr_kind::integer, std::int64_t{-1}}},
           [](const call_context& ctx) {
             auto& t = ctx.tensor(0);
             require_float(ctx, 0);
             if (t.ndim == 0) ctx.fail_arg(0, "must have rank at least 1, but is a scalar");
             if (t.ndim > 0) normalize_axis(ctx, ctx.attr<std::int64_t>("axis"), t.ndim);
             return ctx.arg_type(0);
           },
           op_pattern::opaque,
           "numerically stable (log-)softmax along an axis"});
  r.add({"nn.layer_norm",
         {"x", "gamma", "beta"},
         {{"axes", attr_kind::ints, int_array{-1}},
          {"epsilon", attr_kind::floating, 1e-5},
          {"center", attr_kind::boolean, true},
          {"scale", attr_kind::boolean, true}},
         [](const call_context& ctx) {
           auto& x = ctx.ranked_tensor(0);
           require_float(ctx, 0);
           std::vector<int> axes = normalize_axes(ctx, ctx.attr<int_array>("axes"), x.ndim, "axes");
           if (ctx.attr<double>("epsilon") < 0) ctx.fail("attribute 'epsilon' must not be negative");
           for (std::size_t i : {1u, 2u}) {
             auto& p = ctx.tensor(i);
             if (is_known(p.dt) && is_known(x.dt) && p.dt != x.dt)
               ctx.fail_arg(i, "has dtype " + std::string(name(p.dt)) + " but x is " + std::string(name(x.dt)));
             if (p.ndim >= 0 && p.ndim != static_cast<int>(axes.size()))
               ctx.fail_arg(i, "must have rank " + std::to_string(axes.size()) + " (one dimension per normalised axis), but has rank " +
                                   std::to_string(p.ndim));
             if (p.shape && x.shape)
               for (std::size_t k = 0; k < axes.size(); ++k)
                 if (prove_not_equal((*p.shape)[k], (*x.shape)[static_cast<std::size_t>(axes[k])]))
                   ctx.fail_arg(i, "has shape " + dims_to_string(*p.shape) + ", which does not match x's normalised dimensions (x has shape " +
                                       dims_to_string(*x.shape) + ")");
           }
           return ctx.arg_type(0);
         },
         op_pattern::opaque,
         "layer normalisation over the given axes with learned scale (gamma) and shift (beta)"});
}

}  // namespace kiln::ir::detail
