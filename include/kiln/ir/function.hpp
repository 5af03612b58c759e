// SPDX-License-Identifier: Apache-2.0
/// \file
/// The two kinds of module-level function: `function` (graph-level, Relax's relax.Function) and
/// `prim_func` (a kernel in destination-passing style, the design's PrimFunc).
#pragma once

#include <kiln/ir/expr.hpp>

namespace kiln::ir {

/// Base of module-level functions: both kinds carry attributes.
class base_func_node : public node {
public:
  const attr_map attrs;
  static bool classof(const node& n) noexcept { return n.kind == node_kind::function || n.kind == node_kind::prim_func; }
  /// The type a `global_var` naming this function has.
  virtual type signature() const = 0;

protected:
  base_func_node(node_kind k, attr_map a) : node(k), attrs(std::move(a)) {}
};
using base_func = ref<base_func_node>;

/// A graph-level function: parameters, a `seq_expr` body and a declared return type.
class function_node final : public base_func_node {
public:
  const std::vector<var> params;
  const expr body;
  const type ret_type;
  function_node(std::vector<var> p, expr b, type r, attr_map a)
      : base_func_node(node_kind::function, std::move(a)), params(std::move(p)), body(std::move(b)), ret_type(std::move(r)) {
    nest(params);
    nest(body);
    nest(ret_type);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::function; }
  type signature() const override {
    std::vector<type> p;
    for (auto& v : params) p.push_back(v->checked_type);
    return func_type(std::move(p), ret_type);
  }
};
using function = ref<function_node>;

/// Builds a function. The body is wrapped in a `seq_expr` if it is not one; `ret_type` defaults to
/// the body's type and must otherwise be a base of it.
inline function make_function(std::vector<var> params, expr body, type ret_type = {}, attr_map attrs = {}) {
  if (!isa<seq_expr_node>(body)) body = make_seq({}, body);
  if (!ret_type) ret_type = body->checked_type;
  else if (!is_base_of(ret_type, body->checked_type))
    throw type_error("kiln::ir: function body has type " + to_string(body->checked_type) +
                     ", which does not match the declared return type " + to_string(ret_type));
  return make_ref<function_node>(std::move(params), std::move(body), std::move(ret_type), std::move(attrs));
}

/// A kernel function in destination-passing style: the last `num_outputs` parameters are the
/// output buffers it writes. Its body, when present, is a pure `seq_expr` over the inputs that
/// computes the outputs (a tuple when there are several); without a body it declares an external
/// kernel, to be bound by its `global_symbol`.
class prim_func_node final : public base_func_node {
public:
  const std::vector<var> params;
  const int num_outputs;
  const expr body;  ///< may be null
  prim_func_node(std::vector<var> p, int n, expr b, attr_map a)
      : base_func_node(node_kind::prim_func, std::move(a)), params(std::move(p)), num_outputs(n), body(std::move(b)) {
    nest(params);
    nest(body);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::prim_func; }

  std::size_t num_inputs() const noexcept { return params.size() - static_cast<std::size_t>(num_outputs); }
  /// The type of what the kernel computes: the output buffer, or a tuple of them.
  type output_type() const {
    if (num_outputs == 1) return params.back()->checked_type;
    std::vector<type> outs;
    for (std::size_t i = num_inputs(); i < params.size(); ++i) outs.push_back(params[i]->checked_type);
    return tuple_type(std::move(outs));
  }
  /// `(inputs...) -> outputs`: the view `call_tir` takes of the kernel.
  type signature() const override {
    std::vector<type> in;
    for (std::size_t i = 0; i < num_inputs(); ++i) in.push_back(params[i]->checked_type);
    return func_type(std::move(in), output_type());
  }
};
using prim_func = ref<prim_func_node>;

inline prim_func make_prim_func(std::vector<var> params, int num_outputs, expr body = {}, attr_map attrs = {}) {
  for (auto& p : params)
    if (!isa<tensor_type_node>(p->checked_type) && !isa<prim_type_node>(p->checked_type))
      throw type_error("kiln::ir: prim_func parameter '" + p->name_hint + "' has type " + to_string(p->checked_type) +
                       "; kernel parameters must be tensors or primitive values");
  if (num_outputs < 1 || static_cast<std::size_t>(num_outputs) > params.size())
    throw type_error("kiln::ir: prim_func has " + std::to_string(params.size()) + " parameters, so it cannot have " +
                     std::to_string(num_outputs) + " outputs (at least 1 is needed)");
  for (std::size_t i = params.size() - static_cast<std::size_t>(num_outputs); i < params.size(); ++i)
    if (!isa<tensor_type_node>(params[i]->checked_type))
      throw type_error("kiln::ir: prim_func output parameter '" + params[i]->name_hint + "' must be a tensor, not " +
                       to_string(params[i]->checked_type));
  auto f = make_ref<prim_func_node>(std::move(params), num_outputs, body, std::move(attrs));
  if (body) {
    if (!isa<seq_expr_node>(body))
      return make_prim_func(std::vector<var>(f->params), num_outputs, make_seq({}, body), f->attrs);
    if (!is_base_of(f->output_type(), body->checked_type))
      throw type_error("kiln::ir: prim_func body computes " + to_string(body->checked_type) +
                       ", which does not match its output buffers " + to_string(f->output_type()));
  }
  return f;
}

/// A copy of `f` with attribute `key` set to `value`.
inline base_func with_attr(const base_func& f, std::string key, attr_value value) {
  attr_map a = f->attrs.with(std::move(key), std::move(value));
  if (auto* fn = dyn_cast<function_node>(f))
    return make_ref<function_node>(fn->params, fn->body, fn->ret_type, std::move(a));
  auto& pf = static_cast<const prim_func_node&>(*f);
  return make_ref<prim_func_node>(pf.params, pf.num_outputs, pf.body, std::move(a));
}

}  // namespace kiln::ir
