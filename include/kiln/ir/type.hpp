// SPDX-License-Identifier: Apache-2.0
/// \file
/// Types of IR values (Relax's StructInfo): object, primitive, shape, tensor, tuple and function.
///
/// Types carry shape information: a tensor type knows its dtype, its rank and, when known, each
/// dimension as a `prim_expr` (a constant or a symbolic `size_var`). Any part may be unknown:
/// dtype `void`, rank -1, or no shape. `is_base_of` orders types from general to specific, and
/// `join` finds the most specific type that covers two (used for the branches of `if`).
#pragma once

#include <kiln/ir/prim_expr.hpp>
#include <kiln/support/dtype.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kiln::ir {

class type_node : public node {
public:
  static bool classof(const node& n) noexcept {
    return n.kind >= node_kind::object_type && n.kind <= node_kind::func_type;
  }

protected:
  using node::node;
};
using type = ref<type_node>;

/// Any value at all (the top of the type lattice), e.g. an opaque runtime object.
class object_type_node final : public type_node {
public:
  object_type_node() noexcept : type_node(node_kind::object_type) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::object_type; }
};

/// A primitive scalar value (an integer, float or bool held outside a tensor).
class prim_type_node final : public type_node {
public:
  const dtype dt;
  explicit prim_type_node(dtype d) noexcept : type_node(node_kind::prim_type), dt(d) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::prim_type; }
};

/// A shape value (a tuple of integers), with its rank (-1 if unknown) and, if known, its values.
class shape_type_node final : public type_node {
public:
  const int ndim;
  const std::optional<std::vector<prim_expr>> values;
  shape_type_node(int n, std::optional<std::vector<prim_expr>> v)
      : type_node(node_kind::shape_type), ndim(n), values(std::move(v)) {
    if (values) nest(*values);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::shape_type; }
};

/// A tensor with element type `dt` (void if unknown), rank `ndim` (-1 if unknown) and, if known,
/// its shape (one `prim_expr` per dimension).
class tensor_type_node final : public type_node {
public:
  const dtype dt;
  const int ndim;
  const std::optional<std::vector<prim_expr>> shape;
  tensor_type_node(dtype d, int n, std::optional<std::vector<prim_expr>> s)
      : type_node(node_kind::tensor_type), dt(d), ndim(n), shape(std::move(s)) {
    if (shape) nest(*shape);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::tensor_type; }
  /// The static size of dimension `i`, if the shape is known and that dimension is constant.
  std::optional<std::int64_t> static_dim(int i) const noexcept {
    if (!shape) return std::nullopt;
    return as_int((*shape)[static_cast<std::size_t>(i)]);
  }
};

/// A tuple of values of the given types.
class tuple_type_node final : public type_node {
public:
  const std::vector<type> fields;
  explicit tuple_type_node(std::vector<type> f) : type_node(node_kind::tuple_type), fields(std::move(f)) { nest(fields); }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::tuple_type; }
};

/// A callable value: parameter types and return type.
class func_type_node final : public type_node {
public:
  const std::vector<type> params;
  const type ret;
  func_type_node(std::vector<type> p, type r)
      : type_node(node_kind::func_type), params(std::move(p)), ret(std::move(r)) {
    nest(params);
    nest(ret);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::func_type; }
};

// ---- construction -------------------------------------------------------------------------------

inline type object_type() { return make_ref<object_type_node>(); }
inline type prim_type(dtype d) { return make_ref<prim_type_node>(d); }
inline type shape_type(std::vector<prim_expr> values) {
  const int n = static_cast<int>(values.size());
  return make_ref<shape_type_node>(n, std::move(values));
}
inline type shape_type_of_rank(int ndim = -1) { return make_ref<shape_type_node>(ndim, std::nullopt); }
/// A tensor type with a known shape.
inline type tensor_type(std::vector<prim_expr> shape, dtype d) {
  const int n = static_cast<int>(shape.size());
  return make_ref<tensor_type_node>(d, n, std::move(shape));
}
/// A tensor type with a static shape given as integers.
inline type tensor_type(std::initializer_list<std::int64_t> shape, dtype d) {
  std::vector<prim_expr> dims;
  for (auto s : shape) dims.push_back(make_int(s));
  return tensor_type(std::move(dims), d);
}
/// A tensor type whose shape is unknown (rank -1 when unknown too).
inline type tensor_type_of_rank(dtype d, int ndim = -1) { return make_ref<tensor_type_node>(d, ndim, std::nullopt); }
inline type tuple_type(std::vector<type> fields) { return make_ref<tuple_type_node>(std::move(fields)); }
inline type func_type(std::vector<type> params, type ret) {
  return make_ref<func_type_node>(std::move(params), std::move(ret));
}

// ---- printing -----------------------------------------------------------------------------------

/// Prints a type in the text format, with `name_of` naming size variables.
template <class NameOf>
std::string to_string(const type& t, NameOf&& name_of) {
  auto dims = [&](const std::vector<prim_expr>& v, const char* open, const char* close) { return to_string(v, name_of, open, close); };
  switch (t->kind) {
    case node_kind::object_type: return "R.Object";
    case node_kind::prim_type:
      return "R.Prim(\"" + std::string(name(static_cast<const prim_type_node&>(*t).dt)) + "\")";
    case node_kind::shape_type: {
      auto& s = static_cast<const shape_type_node&>(*t);
      if (s.values) return "R.Shape(" + dims(*s.values, "[", "]") + ")";
      if (s.ndim >= 0) return "R.Shape(ndim=" + std::to_string(s.ndim) + ")";
      return "R.Shape";
    }
    case node_kind::tensor_type: {
      auto& tt = static_cast<const tensor_type_node&>(*t);
      std::vector<std::string> parts;
      if (tt.shape) parts.push_back(dims(*tt.shape, "(", ")"));
      if (is_known(tt.dt)) parts.push_back("\"" + std::string(name(tt.dt)) + "\"");
      if (!tt.shape && tt.ndim >= 0) parts.push_back("ndim=" + std::to_string(tt.ndim));
      if (parts.empty()) return "R.Tensor";
      std::string s = "R.Tensor(";
      for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
      return s + ")";
    }
    case node_kind::tuple_type: {
      auto& tt = static_cast<const tuple_type_node&>(*t);
      std::string s = "R.Tuple(";
      for (std::size_t i = 0; i < tt.fields.size(); ++i) s += (i ? ", " : "") + to_string(tt.fields[i], name_of);
      return s + ")";
    }
    case node_kind::func_type: {
      auto& f = static_cast<const func_type_node&>(*t);
      std::string s = "R.Callable((";
      for (std::size_t i = 0; i < f.params.size(); ++i) s += (i ? ", " : "") + to_string(f.params[i], name_of);
      if (f.params.size() == 1) s += ",";
      return s + "), " + to_string(f.ret, name_of) + ")";
    }
    default: return "<not a type>";
  }
}
inline std::string to_string(const type& t) {
  return to_string(t, [](const size_var_node& v) { return v.name; });
}

// ---- relations ----------------------------------------------------------------------------------

namespace detail {
inline bool dims_equal(const std::vector<prim_expr>& a, const std::vector<prim_expr>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!prove_equal(a[i], b[i])) return false;
  return true;
}
}  // namespace detail

/// True when every value of type `derived` is also a value of type `base` (as far as can be
/// proven: symbolic dimensions must be provably equal).
inline bool is_base_of(const type& base, const type& derived) {
  if (base == derived) return true;
  if (base->kind == node_kind::object_type) return true;
  if (base->kind != derived->kind) return false;
  switch (base->kind) {
    case node_kind::prim_type:
      return static_cast<const prim_type_node&>(*base).dt == static_cast<const prim_type_node&>(*derived).dt;
    case node_kind::shape_type: {
      auto& b = static_cast<const shape_type_node&>(*base);
      auto& d = static_cast<const shape_type_node&>(*derived);
      if (b.ndim >= 0 && b.ndim != d.ndim) return false;
      return !b.values || (d.values && detail::dims_equal(*b.values, *d.values));
    }
    case node_kind::tensor_type: {
      auto& b = static_cast<const tensor_type_node&>(*base);
      auto& d = static_cast<const tensor_type_node&>(*derived);
      if (is_known(b.dt) && b.dt != d.dt) return false;
      if (b.ndim >= 0 && b.ndim != d.ndim) return false;
      return !b.shape || (d.shape && detail::dims_equal(*b.shape, *d.shape));
    }
    case node_kind::tuple_type: {
      auto& b = static_cast<const tuple_type_node&>(*base);
      auto& d = static_cast<const tuple_type_node&>(*derived);
      if (b.fields.size() != d.fields.size()) return false;
      for (std::size_t i = 0; i < b.fields.size(); ++i)
        if (!is_base_of(b.fields[i], d.fields[i])) return false;
      return true;
    }
    case node_kind::func_type: {
      auto& b = static_cast<const func_type_node&>(*base);
      auto& d = static_cast<const func_type_node&>(*derived);
      if (b.params.size() != d.params.size()) return false;
      for (std::size_t i = 0; i < b.params.size(); ++i)  // parameters are contravariant
        if (!is_base_of(d.params[i], b.params[i])) return false;
      return is_base_of(b.ret, d.ret);
    }
    default: return false;
  }
}

/// True when the two types are provably the same type.
inline bool types_equal(const type& a, const type& b) { return is_base_of(a, b) && is_base_of(b, a); }

/// The most specific type of which both `a` and `b` are derived (the least upper bound).
inline type join(const type& a, const type& b) {
  if (is_base_of(a, b)) return a;
  if (is_base_of(b, a)) return b;
  if (a->kind != b->kind) return object_type();
  switch (a->kind) {
    case node_kind::prim_type: return object_type();
    case node_kind::shape_type: {
      auto& x = static_cast<const shape_type_node&>(*a);
      auto& y = static_cast<const shape_type_node&>(*b);
      return shape_type_of_rank(x.ndim == y.ndim ? x.ndim : -1);
    }
    case node_kind::tensor_type: {
      auto& x = static_cast<const tensor_type_node&>(*a);
      auto& y = static_cast<const tensor_type_node&>(*b);
      const dtype d = x.dt == y.dt ? x.dt : dtype::void_;
      if (x.ndim != y.ndim) return tensor_type_of_rank(d, -1);
      if (x.shape && y.shape && detail::dims_equal(*x.shape, *y.shape)) return tensor_type(*x.shape, d);
      return tensor_type_of_rank(d, x.ndim);
    }
    case node_kind::tuple_type: {
      auto& x = static_cast<const tuple_type_node&>(*a);
      auto& y = static_cast<const tuple_type_node&>(*b);
      if (x.fields.size() != y.fields.size()) return object_type();
      std::vector<type> f;
      for (std::size_t i = 0; i < x.fields.size(); ++i) f.push_back(join(x.fields[i], y.fields[i]));
      return tuple_type(std::move(f));
    }
    default: return object_type();
  }
}

/// Collects the size variables a type mentions, in first-occurrence order.
inline void collect_size_vars(const type& t, std::vector<size_var>& out) {
  switch (t->kind) {
    case node_kind::shape_type: {
      auto& s = static_cast<const shape_type_node&>(*t);
      if (s.values)
        for (auto& d : *s.values) collect_size_vars(d, out);
      break;
    }
    case node_kind::tensor_type: {
      auto& s = static_cast<const tensor_type_node&>(*t);
      if (s.shape)
        for (auto& d : *s.shape) collect_size_vars(d, out);
      break;
    }
    case node_kind::tuple_type:
      for (auto& f : static_cast<const tuple_type_node&>(*t).fields) collect_size_vars(f, out);
      break;
    case node_kind::func_type: {
      auto& f = static_cast<const func_type_node&>(*t);
      for (auto& p : f.params) collect_size_vars(p, out);
      collect_size_vars(f.ret, out);
      break;
    }
    default: break;
  }
}

/// Replaces size variables in a type (see `substitute` on `prim_expr`).
template <class Lookup>
type substitute(const type& t, Lookup&& lookup) {
  auto dims = [&](const std::vector<prim_expr>& v, bool& changed) {
    std::vector<prim_expr> out;
    for (auto& d : v) {
      out.push_back(substitute(d, lookup));
      changed |= out.back() != d;
    }
    return out;
  };
  bool changed = false;
  switch (t->kind) {
    case node_kind::shape_type: {
      auto& s = static_cast<const shape_type_node&>(*t);
      if (!s.values) return t;
      auto v = dims(*s.values, changed);
      return changed ? shape_type(std::move(v)) : t;
    }
    case node_kind::tensor_type: {
      auto& s = static_cast<const tensor_type_node&>(*t);
      if (!s.shape) return t;
      auto v = dims(*s.shape, changed);
      return changed ? tensor_type(std::move(v), s.dt) : t;
    }
    case node_kind::tuple_type: {
      std::vector<type> f;
      for (auto& x : static_cast<const tuple_type_node&>(*t).fields) {
        f.push_back(substitute(x, lookup));
        changed |= f.back() != x;
      }
      return changed ? tuple_type(std::move(f)) : t;
    }
    case node_kind::func_type: {
      auto& fn = static_cast<const func_type_node&>(*t);
      std::vector<type> p;
      for (auto& x : fn.params) {
        p.push_back(substitute(x, lookup));
        changed |= p.back() != x;
      }
      type r = substitute(fn.ret, lookup);
      return changed || r != fn.ret ? func_type(std::move(p), std::move(r)) : t;
    }
    default: return t;
  }
}

}  // namespace kiln::ir
