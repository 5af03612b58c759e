// SPDX-License-Identifier: Apache-2.0
/// \file
/// Expressions of the reference IR (modelled on Relax) and their bindings.
///
/// Every expression carries its `checked_type`, computed when it is built (by the factories below,
/// by `call_op`, or by the `block_builder`). A function body is a `seq_expr`: a list of binding
/// blocks, each a list of `var = value` bindings (or `var = match_cast(value, type)`), followed by
/// a result expression. Blocks marked dataflow hold pure code and bind `dataflow_var`s that are
/// invisible outside the block, except the block's outputs, which are plain `var`s.
#pragma once

#include <kiln/ir/attrs.hpp>
#include <kiln/ir/ndarray.hpp>
#include <kiln/ir/type.hpp>

#include <string>
#include <vector>

namespace kiln::ir {

class expr_node : public node {
public:
  /// The type of the value this expression produces.
  const type checked_type;
  static bool classof(const node& n) noexcept { return n.kind >= node_kind::var && n.kind <= node_kind::string_imm; }

protected:
  expr_node(node_kind k, type t) : node(k), checked_type(std::move(t)) { nest(checked_type); }
};
using expr = ref<expr_node>;

/// A variable bound by a function parameter or a binding. Identity is the object; the name is a
/// hint for printing. Its `checked_type` is its declared (annotated) type.
class var_node : public expr_node {
public:
  const std::string name_hint;
  var_node(std::string name, type t, node_kind k = node_kind::var)
      : expr_node(k, std::move(t)), name_hint(std::move(name)) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::var || n.kind == node_kind::dataflow_var; }
  bool is_dataflow() const noexcept { return kind == node_kind::dataflow_var; }
};
using var = ref<var_node>;

/// A variable local to a dataflow block.
class dataflow_var_node final : public var_node {
public:
  dataflow_var_node(std::string name, type t) : var_node(std::move(name), std::move(t), node_kind::dataflow_var) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::dataflow_var; }
};

/// A constant tensor.
class constant_node final : public expr_node {
public:
  const ndarray data;
  constant_node(ndarray d, type t) : expr_node(node_kind::constant, std::move(t)), data(std::move(d)) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::constant; }
};

/// A reference to a function of the module, by name; its type is the function's signature.
class global_var_node final : public expr_node {
public:
  const std::string name;
  global_var_node(std::string n, type t) : expr_node(node_kind::global_var, std::move(t)), name(std::move(n)) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::global_var; }
};
using global_var = ref<global_var_node>;

/// An external function called by symbol (the design's `call_packed` target).
class extern_func_node final : public expr_node {
public:
  const std::string symbol;
  extern_func_node(std::string s, type t) : expr_node(node_kind::extern_func, std::move(t)), symbol(std::move(s)) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::extern_func; }
};

/// A call to an operator (`op_node`), a module function (`global_var`), an external symbol
/// (`extern_func`) or a callable value. `type_args` carry explicit result types where they cannot
/// be inferred (external calls, `call_tir`).
class call_node final : public expr_node {
public:
  const expr callee;
  const std::vector<expr> args;
  const attr_map attrs;
  const std::vector<type> type_args;
  call_node(expr c, std::vector<expr> a, attr_map at, std::vector<type> ta, type t)
      : expr_node(node_kind::call, std::move(t)),
        callee(std::move(c)),
        args(std::move(a)),
        attrs(std::move(at)),
        type_args(std::move(ta)) {
    nest(callee);
    nest(args);
    nest(type_args);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::call; }
};

class tuple_node final : public expr_node {
public:
  const std::vector<expr> fields;
  tuple_node(std::vector<expr> f, type t) : expr_node(node_kind::tuple, std::move(t)), fields(std::move(f)) { nest(fields); }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::tuple; }
};

class tuple_get_item_node final : public expr_node {
public:
  const expr tuple;
  const int index;
  tuple_get_item_node(expr tup, int i, type t)
      : expr_node(node_kind::tuple_get_item, std::move(t)), tuple(std::move(tup)), index(i) {
    nest(tuple);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::tuple_get_item; }
};

/// `if cond then a else b`; both branches are `seq_expr`s.
class if_node final : public expr_node {
public:
  const expr cond, then_branch, else_branch;
  if_node(expr c, expr a, expr b, type t)
      : expr_node(node_kind::if_, std::move(t)), cond(std::move(c)), then_branch(std::move(a)), else_branch(std::move(b)) {
    nest(cond);
    nest(then_branch);
    nest(else_branch);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::if_; }
};

/// `var = value`, or `var = match_cast(value, cast_type)` when `cast_type` is set: a run-time
/// check that `value` has `cast_type`, which also defines the size variables that type mentions
/// for the first time.
struct binding {
  var variable;
  expr value;
  type cast_type;  ///< null for a plain binding
  bool is_match_cast() const noexcept { return static_cast<bool>(cast_type); }
};

struct binding_block {
  bool dataflow = false;
  std::vector<binding> bindings;
};

/// Binding blocks followed by a result.
class seq_expr_node final : public expr_node {
public:
  const std::vector<binding_block> blocks;
  const expr body;
  seq_expr_node(std::vector<binding_block> b, expr r, type t)
      : expr_node(node_kind::seq, std::move(t)), blocks(std::move(b)), body(std::move(r)) {
    for (const binding_block& block : blocks)
      for (const binding& bd : block.bindings) {
        nest(bd.variable);
        nest(bd.value);
        nest(bd.cast_type);
      }
    nest(body);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::seq; }
};

/// A shape value built from dimensions, e.g. `R.shape([n, 4])`.
class shape_expr_node final : public expr_node {
public:
  const std::vector<prim_expr> values;
  shape_expr_node(std::vector<prim_expr> v, type t) : expr_node(node_kind::shape_expr, std::move(t)), values(std::move(v)) {
    nest(values);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::shape_expr; }
};

/// A primitive value: an integer or bool expression (which may use size variables), or a float.
class prim_value_node final : public expr_node {
public:
  const dtype dt;
  const prim_expr int_value;  ///< set for integer and bool dtypes
  const double float_value;   ///< used for float dtypes
  prim_value_node(dtype d, prim_expr i, double f, type t)
      : expr_node(node_kind::prim_value, std::move(t)), dt(d), int_value(std::move(i)), float_value(f) {
    nest(int_value);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::prim_value; }
};

/// A string argument (for external calls).
class string_imm_node final : public expr_node {
public:
  const std::string value;
  string_imm_node(std::string v, type t) : expr_node(node_kind::string_imm, std::move(t)), value(std::move(v)) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::string_imm; }
};

// ---- construction -------------------------------------------------------------------------------

class type_error : public error {
public:
  using error::error;
};

inline var make_var(std::string name, type t) { return make_ref<var_node>(std::move(name), std::move(t)); }
inline var make_dataflow_var(std::string name, type t) {
  return var(make_ref<dataflow_var_node>(std::move(name), std::move(t)));
}
inline expr make_constant(ndarray data) {
  std::vector<prim_expr> dims;
  for (auto d : data.shape()) dims.push_back(make_int(d));
  type t = tensor_type(std::move(dims), data.dt());
  return make_ref<constant_node>(std::move(data), std::move(t));
}
/// A scalar constant of the given dtype.
inline expr make_constant(double value, dtype dt) { return make_constant(ndarray::scalar(dt, value)); }
inline global_var make_global_var(std::string name, type signature) {
  return make_ref<global_var_node>(std::move(name), std::move(signature));
}
inline expr make_extern_func(std::string symbol) { return make_ref<extern_func_node>(std::move(symbol), object_type()); }

/// Builds a call with an explicit result type and no checking (for passes that know the type;
/// `call_op`, `call_function` and `call_extern` infer it).
inline expr make_call(expr callee, std::vector<expr> args, attr_map attrs, std::vector<type> type_args, type result) {
  return make_ref<call_node>(std::move(callee), std::move(args), std::move(attrs), std::move(type_args), std::move(result));
}

inline expr make_tuple(std::vector<expr> fields) {
  std::vector<type> types;
  for (auto& f : fields) types.push_back(f->checked_type);
  type t = tuple_type(std::move(types));
  return make_ref<tuple_node>(std::move(fields), std::move(t));
}

inline expr make_tuple_get_item(expr tup, int index) {
  auto* tt = dyn_cast<tuple_type_node>(tup->checked_type);
  if (!tt)
    throw type_error("kiln::ir: tuple element access: the operand has type " + to_string(tup->checked_type) +
                     ", which is not a tuple");
  if (index < 0 || static_cast<std::size_t>(index) >= tt->fields.size())
    throw type_error("kiln::ir: tuple element access: index " + std::to_string(index) + " is out of range for a tuple of " +
                     std::to_string(tt->fields.size()) + " fields");
  type t = tt->fields[static_cast<std::size_t>(index)];
  return make_ref<tuple_get_item_node>(std::move(tup), index, std::move(t));
}

inline expr make_shape_expr(std::vector<prim_expr> values) {
  type t = shape_type(values);
  return make_ref<shape_expr_node>(std::move(values), std::move(t));
}
/// An int64 primitive value (may be symbolic, e.g. `n * 2`).
inline expr make_prim_value(prim_expr value, dtype dt = dtype::int64) {
  if (!is_int(dt) && dt != dtype::bool_)
    throw type_error("kiln::ir: an integer primitive value cannot have dtype " + std::string(name(dt)));
  return make_ref<prim_value_node>(dt, std::move(value), 0.0, prim_type(dt));
}
inline expr make_prim_value(std::int64_t value, dtype dt = dtype::int64) { return make_prim_value(make_int(value), dt); }
/// A floating-point primitive value.
inline expr make_float_prim_value(double value, dtype dt = dtype::float32) {
  if (!is_float(dt)) throw type_error("kiln::ir: a float primitive value cannot have dtype " + std::string(name(dt)));
  return make_ref<prim_value_node>(dt, prim_expr(), value, prim_type(dt));
}
inline expr make_string_imm(std::string value) { return make_ref<string_imm_node>(std::move(value), object_type()); }

/// Builds a sequence expression in canonical form: empty blocks are dropped and adjacent
/// non-dataflow blocks are merged (so that printing and parsing give back the same structure).
inline expr make_seq(std::vector<binding_block> blocks, expr body) {
  std::vector<binding_block> canon;
  for (auto& b : blocks) {
    if (b.bindings.empty()) continue;
    if (!b.dataflow && !canon.empty() && !canon.back().dataflow) {
      auto& dst = canon.back().bindings;
      dst.insert(dst.end(), b.bindings.begin(), b.bindings.end());
    } else {
      canon.push_back(std::move(b));
    }
  }
  type t = body->checked_type;
  return make_ref<seq_expr_node>(std::move(canon), std::move(body), std::move(t));
}

/// True when `e` may serve as the condition of an `if`: a bool scalar tensor or a bool prim value.
inline bool is_condition_type(const type& t) {
  if (auto* p = dyn_cast<prim_type_node>(t)) return p->dt == dtype::bool_;
  if (auto* tt = dyn_cast<tensor_type_node>(t)) return (tt->dt == dtype::bool_ || !is_known(tt->dt)) && (tt->ndim == 0 || tt->ndim == -1);
  return false;
}

/// `if cond: then_branch else: else_branch`; branches that are not `seq_expr`s are wrapped.
inline expr make_if(expr cond, expr then_branch, expr else_branch) {
  if (!is_condition_type(cond->checked_type))
    throw type_error("kiln::ir: the condition of an if must be a bool scalar, but it has type " +
                     to_string(cond->checked_type));
  if (!isa<seq_expr_node>(then_branch)) then_branch = make_seq({}, then_branch);
  if (!isa<seq_expr_node>(else_branch)) else_branch = make_seq({}, else_branch);
  type t = join(then_branch->checked_type, else_branch->checked_type);
  return make_ref<if_node>(std::move(cond), std::move(then_branch), std::move(else_branch), std::move(t));
}

}  // namespace kiln::ir
