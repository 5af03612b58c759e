// SPDX-License-Identifier: Apache-2.0
/// \file
/// Data-movement operators: reshape, permute_dims, broadcast_to, concat, split, strided_slice,
/// take.
#pragma once

#include <kiln/ir/op/infer.hpp>

#include <limits>
#include <optional>

namespace kiln::ir::detail {

/// The shape given as argument `i` (a shape expression or a value of shape type).
inline const shape_type_node& shape_arg(const call_context& ctx, std::size_t i) {
  auto* s = dyn_cast<shape_type_node>(ctx.arg_type(i));
  if (!s) ctx.fail_arg(i, "must be a shape (e.g. R.shape([n, 4])), but has type " + to_string(ctx.arg_type(i)));
  return *s;
}

/// product(num) / product(den) when the symbolic factors of `den` all occur among those of `num`
/// (provably equal) and its constant factor divides theirs: [7, batch, 2, 24] / [7, batch] is 48,
/// [seq, batch * 4, 16] / [seq, 16] is batch * 4. Nothing when that cannot be shown.
inline std::optional<prim_expr> quotient_of_products(const std::vector<prim_expr>& num, const std::vector<prim_expr>& den) {
  std::int64_t cn = 1, cd = 1;
  std::vector<prim_expr> symbolic;
  for (auto& d : num) {
    if (auto c = as_int(d)) {
      if (__builtin_mul_overflow(cn, *c, &cn)) return std::nullopt;
    } else {
      symbolic.push_back(d);
    }
  }
  for (auto& d : den) {
    if (auto c = as_int(d)) {
      if (__builtin_mul_overflow(cd, *c, &cd)) return std::nullopt;
      continue;
    }
    auto it = std::find_if(symbolic.begin(), symbolic.end(), [&](const prim_expr& s) { return prove_equal(s, d); });
    if (it == symbolic.end()) return std::nullopt;
    symbolic.erase(it);
  }
  if (cd <= 0 || cn % cd != 0) return std::nullopt;
  if (symbolic.empty()) return make_int(cn / cd);
  prim_expr q = symbolic[0];
  for (std::size_t i = 1; i < symbolic.size(); ++i) q = q * symbolic[i];
  return cn / cd == 1 ? q : q * make_int(cn / cd);
}

inline type infer_reshape(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& s = shape_arg(ctx, 1);
  if (!s.values) return tensor_type_of_rank(x.dt, s.ndim);
  std::vector<prim_expr> dims = *s.values;
  int infer_at = -1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    auto c = as_int(dims[i]);
    if (c == -1) {
      if (infer_at >= 0) ctx.fail_arg(1, "may contain -1 only once, but has " + dims_to_string(dims));
      infer_at = static_cast<int>(i);
    } else if (c && *c < -1) {
      ctx.fail_arg(1, "has negative dimension " + std::to_string(*c) + " in " + dims_to_string(dims));
    }
  }
  if (!x.shape) {
    if (infer_at >= 0) return tensor_type_of_rank(x.dt, static_cast<int>(dims.size()));
    return tensor_type(std::move(dims), x.dt);
  }
  prim_expr total = product(*x.shape);
  if (infer_at >= 0) {
    std::vector<prim_expr> rest;
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (static_cast<int>(i) != infer_at) rest.push_back(dims[i]);
    prim_expr known = product(rest);
    auto t = as_int(total), k = as_int(known);
    if (t && k) {
      if (*k == 0 || *t % *k != 0)
        ctx.fail("cannot reshape " + dims_to_string(*x.shape) + " to " + dims_to_string(dims) + ": " + std::to_string(*t) +
                 " elements do not divide into rows of " + std::to_string(*k));
      dims[static_cast<std::size_t>(infer_at)] = make_int(*t / *k);
    } else {
      dims[static_cast<std::size_t>(infer_at)] = quotient_of_products(*x.shape, rest).value_or(floordiv(total, known));
    }
    return tensor_type(std::move(dims), x.dt);
  }
  if (prove_not_equal(total, product(dims)))
    ctx.fail("cannot reshape " + dims_to_string(*x.shape) + " (" + to_string(total) + " elements) to " + dims_to_string(dims) +
             " (" + to_string(product(dims)) + " elements)");
  return tensor_type(std::move(dims), x.dt);
}

inline type infer_permute_dims(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  const int_array* axes = ctx.attrs().find("axes")->get_if<int_array>();
  if (x.ndim < 0) return tensor_type_of_rank(x.dt, axes ? static_cast<int>(axes->size()) : -1);
  std::vector<int> perm;
  if (axes) {
    if (static_cast<int>(axes->size()) != x.ndim)
      ctx.fail("attribute 'axes' has " + std::to_string(axes->size()) + " entries, but the tensor has rank " + std::to_string(x.ndim));
    perm = normalize_axes(ctx, *axes, x.ndim, "axes");
  } else {
    for (int i = x.ndim - 1; i >= 0; --i) perm.push_back(i);
  }
  if (!x.shape) return tensor_type_of_rank(x.dt, x.ndim);
  std::vector<prim_expr> out;
  for (int p : perm) out.push_back((*x.shape)[static_cast<std::size_t>(p)]);
  return tensor_type(std::move(out), x.dt);
}

inline type infer_broadcast_to(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& s = shape_arg(ctx, 1);
  if (!s.values) return tensor_type_of_rank(x.dt, s.ndim);
  const auto& target = *s.values;
  if (x.ndim > static_cast<int>(target.size()))
    ctx.fail("cannot broadcast a tensor of rank " + std::to_string(x.ndim) + " to the lower rank " + std::to_string(target.size()));
  if (x.shape)
    for (std::size_t k = 1; k <= x.shape->size(); ++k) {
      const prim_expr& d = (*x.shape)[x.shape->size() - k];
      const prim_expr& t = target[target.size() - k];
      if (as_int(d) != 1 && prove_not_equal(d, t))
        ctx.fail("cannot broadcast " + dims_to_string(*x.shape) + " to " + dims_to_string(target) + ": dimension " + to_string(d) +
                 " vs " + to_string(t));
    }
  return tensor_type(target, x.dt);
}

inline type infer_concat(const call_context& ctx) {
  auto* tt = dyn_cast<tuple_type_node>(ctx.arg_type(0));
  if (!tt) ctx.fail_arg(0, "must be a tuple of tensors, but has type " + to_string(ctx.arg_type(0)));
  if (tt->fields.empty()) ctx.fail_arg(0, "must hold at least one tensor");
  dtype d = dtype::void_;
  int ndim = -1;
  for (std::size_t i = 0; i < tt->fields.size(); ++i) {
    auto* t = dyn_cast<tensor_type_node>(tt->fields[i]);
    if (!t) ctx.fail("tuple field " + std::to_string(i) + " must be a tensor, but has type " + to_string(tt->fields[i]));
    if (is_known(t->dt)) {
      if (is_known(d) && d != t->dt)
        ctx.fail("tuple field " + std::to_string(i) + " has dtype " + std::string(name(t->dt)) + " but field 0 has " + std::string(name(d)));
      d = t->dt;
    }
    if (t->ndim >= 0) {
      if (ndim >= 0 && ndim != t->ndim)
        ctx.fail("tuple field " + std::to_string(i) + " has rank " + std::to_string(t->ndim) + " but earlier fields have rank " + std::to_string(ndim));
      ndim = t->ndim;
    }
  }
  if (ndim < 0) return tensor_type_of_rank(d, -1);
  if (ndim == 0) ctx.fail("cannot concatenate scalars");
  const int axis = normalize_axis(ctx, ctx.attr<std::int64_t>("axis"), ndim);
  std::vector<prim_expr> out;
  for (std::size_t i = 0; i < tt->fields.size(); ++i) {
    auto& t = static_cast<const tensor_type_node&>(*tt->fields[i]);
    if (!t.shape) return tensor_type_of_rank(d, ndim);
    if (i == 0) {
      out = *t.shape;
      continue;
    }
    for (int k = 0; k < ndim; ++k) {
      const auto uk = static_cast<std::size_t>(k);
      if (k == axis) out[uk] = out[uk] + (*t.shape)[uk];
      else if (prove_not_equal(out[uk], (*t.shape)[uk]))
        ctx.fail("tuple field " + std::to_string(i) + " has shape " + dims_to_string(*t.shape) + ", which differs from field 0 in dimension " +
                 std::to_string(k) + " (only the concatenation axis " + std::to_string(axis) + " may differ)");
    }
  }
  return tensor_type(std::move(out), d);
}

inline type infer_split(const call_context& ctx) {
  auto& x = ctx.ranked_tensor(0);
  const auto* sections = ctx.attrs().find("sections")->get_if<std::int64_t>();
  const auto* indices = ctx.attrs().find("indices")->get_if<int_array>();
  if ((sections == nullptr) == (indices == nullptr)) ctx.fail("exactly one of the attributes 'sections' and 'indices' must be given");
  const int axis = normalize_axis(ctx, ctx.attr<std::int64_t>("axis"), x.ndim);
  const auto ua = static_cast<std::size_t>(axis);
  std::vector<type> parts;
  auto part = [&](prim_expr len) {
    if (!x.shape) return tensor_type_of_rank(x.dt, x.ndim);
    auto dims = *x.shape;
    dims[ua] = std::move(len);
    return tensor_type(std::move(dims), x.dt);
  };
  if (sections) {
    if (*sections <= 0) ctx.fail("attribute 'sections' must be positive, but is " + std::to_string(*sections));
    std::optional<std::int64_t> dim = x.static_dim(axis);
    if (dim && *dim % *sections != 0)
      ctx.fail("cannot split dimension " + std::to_string(*dim) + " (axis " + std::to_string(axis) + ") into " + std::to_string(*sections) +
               " equal sections");
    for (std::int64_t i = 0; i < *sections; ++i) parts.push_back(part(x.shape ? floordiv((*x.shape)[ua], make_int(*sections)) : make_int(0)));
    return tuple_type(std::move(parts));
  }
  std::int64_t prev = 0;
  for (auto idx : *indices) {
    if (idx < prev) ctx.fail("attribute 'indices' must be non-decreasing, but has " + std::to_string(idx) + " after " + std::to_string(prev));
    parts.push_back(part(make_int(idx - prev)));
    prev = idx;
  }
  std::optional<std::int64_t> dim = x.static_dim(axis);
  if (dim && prev > *dim)
    ctx.fail("split index " + std::to_string(prev) + " is beyond dimension " + std::to_string(*dim) + " of axis " + std::to_string(axis));
  parts.push_back(part(x.shape ? (*x.shape)[ua] - make_int(prev) : make_int(0)));
  return tuple_type(std::move(parts));
}

inline type infer_strided_slice(const call_context& ctx) {
  auto& x = ctx.ranked_tensor(0);
  const int_array& axes = ctx.attr<int_array>("axes");
  const int_array& begin = ctx.attr<int_array>("begin");
  const int_array& end = ctx.attr<int_array>("end");
  const int_array* strides = ctx.attrs().find("strides")->get_if<int_array>();
  if (begin.size() != axes.size() || end.size() != axes.size() || (strides && strides->size() != axes.size()))
    ctx.fail("attributes 'axes', 'begin', 'end' (and 'strides' when given) must have the same length, but have " +
             std::to_string(axes.size()) + ", " + std::to_string(begin.size()) + ", " + std::to_string(end.size()) +
             (strides ? ", " + std::to_string(strides->size()) : std::string()));
  std::vector<int> ax = normalize_axes(ctx, axes, x.ndim, "axes");
  if (!x.shape) return tensor_type_of_rank(x.dt, x.ndim);
  std::vector<prim_expr> out = *x.shape;
  constexpr std::int64_t to_end = std::int64_t{1} << 62;  // "until the end" on symbolic dimensions
  for (std::size_t i = 0; i < ax.size(); ++i) {
    const std::int64_t s = strides ? (*strides)[i] : 1;
    if (s == 0) ctx.fail("attribute 'strides' has a zero stride for axis " + std::to_string(ax[i]));
    auto& d = out[static_cast<std::size_t>(ax[i])];
    if (auto n = as_int(d)) {
      auto clamp = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
        if (v < 0) v += *n;
        return std::clamp(v, lo, hi);
      };
      std::int64_t b = s > 0 ? clamp(begin[i], 0, *n) : clamp(begin[i], -1, *n - 1);
      std::int64_t e = s > 0 ? clamp(end[i], 0, *n) : clamp(end[i], -1, *n - 1);
      std::int64_t len = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e + (-s) - 1) / (-s) : 0);
      d = make_int(len);
    } else if (s > 0 && begin[i] >= 0 && end[i] >= to_end) {
      d = floordiv(d - make_int(begin[i]) + make_int(s - 1), make_int(s));
    } else {
      return tensor_type_of_rank(x.dt, x.ndim);
    }
  }
  return tensor_type(std::move(out), x.dt);
}

inline type infer_take(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& idx = ctx.tensor(1);
  if (is_known(idx.dt) && !is_int(idx.dt)) ctx.fail_arg(1, "must be an integer tensor, but its dtype is " + std::string(name(idx.dt)));
  const auto* axis = ctx.attrs().find("axis")->get_if<std::int64_t>();
  if (x.ndim < 0 || idx.ndim < 0) return tensor_type_of_rank(x.dt, -1);
  if (!axis) {  // indices into the flattened tensor
    if (!idx.shape) return tensor_type_of_rank(x.dt, idx.ndim);
    return tensor_type(*idx.shape, x.dt);
  }
  if (x.ndim == 0) ctx.fail_arg(0, "must have rank at least 1 to take along an axis");
  const int a = normalize_axis(ctx, *axis, x.ndim);
  const int out_ndim = x.ndim - 1 + idx.ndim;
  if (!x.shape || !idx.shape) return tensor_type_of_rank(x.dt, out_ndim);
  std::vector<prim_expr> out(x.shape->begin(), x.shape->begin() + a);
  out.insert(out.end(), idx.shape->begin(), idx.shape->end());
  out.insert(out.end(), x.shape->begin() + a + 1, x.shape->end());
  return tensor_type(std::move(out), x.dt);
}

inline type infer_gather_elements(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& idx = ctx.tensor(1);
  if (is_known(idx.dt) && !is_int(idx.dt)) ctx.fail_arg(1, "must be an integer tensor, but its dtype is " + std::string(name(idx.dt)));
  if (x.ndim >= 0 && idx.ndim >= 0 && x.ndim != idx.ndim)
    ctx.fail_arg(1, "must have the rank of x (" + std::to_string(x.ndim) + "), but has rank " + std::to_string(idx.ndim));
  if (x.ndim == 0) ctx.fail_arg(0, "must have rank at least 1 to gather along an axis");
  if (x.ndim > 0) normalize_axis(ctx, ctx.attr<std::int64_t>("axis"), x.ndim);
  if (!idx.shape) return tensor_type_of_rank(x.dt, idx.ndim >= 0 ? idx.ndim : x.ndim);
  return tensor_type(*idx.shape, x.dt);
}

inline type infer_scatter_elements(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& idx = ctx.tensor(1);
  auto& upd = ctx.tensor(2);
  if (is_known(idx.dt) && !is_int(idx.dt)) ctx.fail_arg(1, "must be an integer tensor, but its dtype is " + std::string(name(idx.dt)));
  if (is_known(upd.dt) && is_known(x.dt) && upd.dt != x.dt)
    ctx.fail_arg(2, "must have the dtype of x (" + std::string(name(x.dt)) + "), but has " + std::string(name(upd.dt)));
  if (x.ndim >= 0 && idx.ndim >= 0 && x.ndim != idx.ndim)
    ctx.fail_arg(1, "must have the rank of x (" + std::to_string(x.ndim) + "), but has rank " + std::to_string(idx.ndim));
  if (idx.ndim >= 0 && upd.ndim >= 0 && idx.ndim != upd.ndim)
    ctx.fail_arg(2, "must have the rank of the indices (" + std::to_string(idx.ndim) + "), but has rank " + std::to_string(upd.ndim));
  if (x.ndim == 0) ctx.fail_arg(0, "must have rank at least 1 to scatter along an axis");
  if (x.ndim > 0) normalize_axis(ctx, ctx.attr<std::int64_t>("axis"), x.ndim);
  const std::string& red = ctx.attr<std::string>("reduction");
  if (red != "update" && red != "add" && red != "mul" && red != "max" && red != "min")
    ctx.fail("attribute 'reduction' must be 'update', 'add', 'mul', 'max' or 'min', not '" + red + "'");
  return ctx.arg_type(0);
}

/// gather_nd and scatter_nd: checks the indices against x; the length k of the index tuples, or
/// nothing when a shape is unknown.
inline std::optional<std::int64_t> check_nd(const call_context& ctx, std::int64_t batch_dims) {
  auto& x = ctx.tensor(0);
  auto& idx = ctx.tensor(1);
  if (is_known(idx.dt) && !is_int(idx.dt)) ctx.fail_arg(1, "must be an integer tensor, but its dtype is " + std::string(name(idx.dt)));
  if (idx.ndim == 0) ctx.fail_arg(1, "must have rank at least 1 (its last axis holds the index tuples)");
  if (batch_dims < 0 || (idx.ndim > 0 && batch_dims >= idx.ndim) || (x.ndim >= 0 && batch_dims > x.ndim))
    ctx.fail("attribute 'batch_dims' (" + std::to_string(batch_dims) + ") must leave the indices an axis and not exceed the rank of x");
  if (!x.shape || !idx.shape) return std::nullopt;
  const auto k = as_int(idx.shape->back());
  if (!k) return std::nullopt;
  if (*k < 1 || *k > x.ndim - batch_dims)
    ctx.fail("index tuples of length " + std::to_string(*k) + " do not fit x " + dims_to_string(*x.shape) + " after " + std::to_string(batch_dims) +
             " batch axes");
  for (std::int64_t d = 0; d < batch_dims; ++d)
    if (prove_not_equal((*idx.shape)[std::size_t(d)], (*x.shape)[std::size_t(d)]))
      ctx.fail("batch axis " + std::to_string(d) + " differs: indices " + dims_to_string(*idx.shape) + ", x " + dims_to_string(*x.shape));
  return k;
}

inline type infer_gather_nd(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& idx = ctx.tensor(1);
  const std::int64_t b = ctx.attr<std::int64_t>("batch_dims");
  const auto k = check_nd(ctx, b);
  if (!k) return tensor_type_of_rank(x.dt);  // the rank depends on the tuples' length
  std::vector<prim_expr> out(idx.shape->begin(), idx.shape->end() - 1);
  for (std::size_t d = std::size_t(b + *k); d < x.shape->size(); ++d) out.push_back((*x.shape)[d]);
  return tensor_type(std::move(out), x.dt);
}

inline type infer_scatter_nd(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& idx = ctx.tensor(1);
  auto& upd = ctx.tensor(2);
  if (is_known(upd.dt) && is_known(x.dt) && upd.dt != x.dt)
    ctx.fail_arg(2, "must have the dtype of x (" + std::string(name(x.dt)) + "), but has " + std::string(name(upd.dt)));
  const std::string& red = ctx.attr<std::string>("reduction");
  if (red != "update" && red != "add" && red != "mul" && red != "max" && red != "min")
    ctx.fail("attribute 'reduction' must be 'update', 'add', 'mul', 'max' or 'min', not '" + red + "'");
  if (const auto k = check_nd(ctx, 0); k && upd.shape) {
    std::vector<prim_expr> want(idx.shape->begin(), idx.shape->end() - 1);
    for (std::size_t d = std::size_t(*k); d < x.shape->size(); ++d) want.push_back((*x.shape)[d]);
    bool differs = want.size() != upd.shape->size();
    for (std::size_t d = 0; !differs && d < want.size(); ++d) differs = prove_not_equal(want[d], (*upd.shape)[d]);
    if (differs) ctx.fail_arg(2, "must have shape " + dims_to_string(want) + " (the indices' leading axes, then x's after k), but has " + dims_to_string(*upd.shape));
  }
  return ctx.arg_type(0);
}

inline void register_manipulate_ops(op_registry& r) {
  r.add({"reshape", {"x", "shape"}, {}, infer_reshape, op_pattern::injective, "same elements, new shape (one -1 is inferred)"});
  r.add({"permute_dims", {"x"}, {{"axes", attr_kind::ints, {}, false, true}}, infer_permute_dims, op_pattern::injective,
         "transposes the axes (reverses them when None)"});
  r.add({"broadcast_to", {"x", "shape"}, {}, infer_broadcast_to, op_pattern::broadcast, "numpy broadcast to a shape"});
  r.add({"concat", {"tensors"}, {{"axis", attr_kind::integer, std::int64_t{0}}}, infer_concat, op_pattern::injective,
         "joins a tuple of tensors along an axis"});
  r.add({"split",
         {"x"},
         {{"sections", attr_kind::integer, {}, false, true}, {"indices", attr_kind::ints, {}, false, true},
          {"axis", attr_kind::integer, std::int64_t{0}}},
         infer_split, op_pattern::injective, "splits into equal sections or at indices along an axis; returns a tuple"});
  r.add({"strided_slice",
         {"x"},
         {{"axes", attr_kind::ints, {}, true}, {"begin", attr_kind::ints, {}, true}, {"end", attr_kind::ints, {}, true},
          {"strides", attr_kind::ints, {}, false, true}},
         infer_strided_slice, op_pattern::injective, "numpy-style slicing x[begin:end:stride] on the given axes"});
  r.add({"take", {"x", "indices"}, {{"axis", attr_kind::integer, {}, false, true}}, infer_take, op_pattern::injective,
         "gathers slices along an axis at the given indices (from the flattened tensor when None)"});
  r.add({"scatter_elements",
         {"x", "indices", "updates"},
         {{"axis", attr_kind::integer, std::int64_t{0}}, {"reduction", attr_kind::string, "update"}},
         infer_scatter_elements,
         op_pattern::opaque,
         "x with updates[i...] written (or added, multiplied, ...) at i... with its index along the axis replaced by indices[i...]"});
  r.add({"gather_nd", {"x", "indices"}, {{"batch_dims", attr_kind::integer, std::int64_t{0}}}, infer_gather_nd, op_pattern::opaque,
         "the slices of x that the index tuples (the last axis of indices) name, after batch_dims shared axes (ONNX GatherND)"});
  r.add({"scatter_nd", {"x", "indices", "updates"}, {{"reduction", attr_kind::string, "update"}}, infer_scatter_nd, op_pattern::opaque,
         "x with the slices the index tuples name replaced by (or combined with) the updates (ONNX ScatterND)"});
  r.add({"gather_elements", {"x", "indices"}, {{"axis", attr_kind::integer, std::int64_t{0}}}, infer_gather_elements, op_pattern::injective,
         "out[i...] = x[i...] with its index along the axis replaced by indices[i...] (numpy take_along_axis)"});
}

}  // namespace kiln::ir::detail
