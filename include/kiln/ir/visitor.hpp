// SPDX-License-Identifier: Apache-2.0
/// \file
/// `expr_visitor` and `expr_mutator`: the bases that passes derive from (Relax's ExprVisitor and
/// ExprMutator).
///
/// Both dispatch on the node kind to one virtual `visit_<kind>` / `mutate_<kind>` per node type;
/// the defaults walk into every child. A mutator returns the very same node when none of its
/// children changed, so an untouched sub-tree keeps its identity and "did anything change?" is a
/// pointer comparison. When a binding's new value no longer fits its variable's type, the mutator
/// gives the binding a fresh variable of the new type and renames every later use.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>

#include <functional>
#include <unordered_map>

namespace kiln::ir {

/// Read-only traversal of expressions, in evaluation order.
class expr_visitor {
public:
  virtual ~expr_visitor() = default;

  /// Visits `e` by dispatching on its kind.
  virtual void visit(const expr& e) {
    switch (e->kind) {
      case node_kind::var:
      case node_kind::dataflow_var: return visit_var(static_cast<const var_node&>(*e));
      case node_kind::constant: return visit_constant(static_cast<const constant_node&>(*e));
      case node_kind::global_var: return visit_global_var(static_cast<const global_var_node&>(*e));
      case node_kind::op: return visit_op(static_cast<const op_node&>(*e));
      case node_kind::extern_func: return visit_extern_func(static_cast<const extern_func_node&>(*e));
      case node_kind::call: return visit_call(static_cast<const call_node&>(*e));
      case node_kind::tuple: return visit_tuple(static_cast<const tuple_node&>(*e));
      case node_kind::tuple_get_item: return visit_tuple_get_item(static_cast<const tuple_get_item_node&>(*e));
      case node_kind::if_: return visit_if(static_cast<const if_node&>(*e));
      case node_kind::seq: return visit_seq(static_cast<const seq_expr_node&>(*e));
      case node_kind::shape_expr: return visit_shape_expr(static_cast<const shape_expr_node&>(*e));
      case node_kind::prim_value: return visit_prim_value(static_cast<const prim_value_node&>(*e));
      case node_kind::string_imm: return visit_string_imm(static_cast<const string_imm_node&>(*e));
      default: throw error("kiln::ir::expr_visitor: not an expression node");
    }
  }

  /// Visits a function's parameters (as definitions) and body.
  virtual void visit_function(const function_node& f) {
    for (auto& p : f.params) visit_var_def(p);
    visit(f.body);
  }
  /// Visits a kernel function's parameters and body (if any).
  virtual void visit_prim_func(const prim_func_node& f) {
    for (auto& p : f.params) visit_var_def(p);
    if (f.body) visit(f.body);
  }
  /// Visits every function of a module in order.
  void visit_module(const ir_module& m) {
    for (auto& e : m->functions()) {
      if (auto* f = dyn_cast<function_node>(e.func)) visit_function(*f);
      else visit_prim_func(static_cast<const prim_func_node&>(*e.func));
    }
  }

  virtual void visit_binding_block(const binding_block& b) {
    for (auto& bd : b.bindings) visit_binding(bd);
  }
  /// Visits the value, then the variable it defines.
  virtual void visit_binding(const binding& b) {
    visit(b.value);
    visit_var_def(b.variable);
  }
  /// Called where a variable is bound (parameter or binding).
  virtual void visit_var_def(const var&) {}

  virtual void visit_var(const var_node&) {}
  virtual void visit_constant(const constant_node&) {}
  virtual void visit_global_var(const global_var_node&) {}
  virtual void visit_op(const op_node&) {}
  virtual void visit_extern_func(const extern_func_node&) {}
  virtual void visit_call(const call_node& n) {
    visit(n.callee);
    for (auto& a : n.args) visit(a);
  }
  virtual void visit_tuple(const tuple_node& n) {
    for (auto& f : n.fields) visit(f);
  }
  virtual void visit_tuple_get_item(const tuple_get_item_node& n) { visit(n.tuple); }
  virtual void visit_if(const if_node& n) {
    visit(n.cond);
    visit(n.then_branch);
    visit(n.else_branch);
  }
  virtual void visit_seq(const seq_expr_node& n) {
    for (auto& b : n.blocks) visit_binding_block(b);
    visit(n.body);
  }
  virtual void visit_shape_expr(const shape_expr_node&) {}
  virtual void visit_prim_value(const prim_value_node&) {}
  virtual void visit_string_imm(const string_imm_node&) {}
};

/// Calls `fn` on every expression under `e` after its children (post-order).
inline void post_order_visit(const expr& e, const std::function<void(const expr&)>& fn) {
  struct walker final : expr_visitor {
    const std::function<void(const expr&)>& fn;
    explicit walker(const std::function<void(const expr&)>& f) : fn(f) {}
    void visit(const expr& x) override {
      expr_visitor::visit(x);
      fn(x);
    }
  } w(fn);
  w.visit(e);
}

/// Rewriting traversal. Override `mutate_<kind>` for the nodes a pass changes; each receives the
/// node and its handle (`self`) and returns the replacement (or `self`).
class expr_mutator {
public:
  virtual ~expr_mutator() = default;

  /// Rewrites `e` by dispatching on its kind.
  virtual expr mutate(const expr& e) {
    switch (e->kind) {
      case node_kind::var:
      case node_kind::dataflow_var: return mutate_var(static_cast<const var_node&>(*e), e);
      case node_kind::constant: return mutate_constant(static_cast<const constant_node&>(*e), e);
      case node_kind::global_var:
      case node_kind::op:
      case node_kind::extern_func:
      case node_kind::string_imm: return e;
      case node_kind::call: return mutate_call(static_cast<const call_node&>(*e), e);
      case node_kind::tuple: return mutate_tuple(static_cast<const tuple_node&>(*e), e);
      case node_kind::tuple_get_item: return mutate_tuple_get_item(static_cast<const tuple_get_item_node&>(*e), e);
      case node_kind::if_: return mutate_if(static_cast<const if_node&>(*e), e);
      case node_kind::seq: return mutate_seq(static_cast<const seq_expr_node&>(*e), e);
      case node_kind::shape_expr: return mutate_shape_expr(static_cast<const shape_expr_node&>(*e), e);
      case node_kind::prim_value: return mutate_prim_value(static_cast<const prim_value_node&>(*e), e);
      default: throw error("kiln::ir::expr_mutator: not an expression node");
    }
  }

  /// Rewrites a function's body; returns `f` itself when nothing changed. The declared return type
  /// is kept when it still covers the new body, and replaced by the body's type otherwise.
  virtual function mutate_function(const function& f) {
    expr body = mutate(f->body);
    if (body == f->body) return f;
    type ret = is_base_of(f->ret_type, body->checked_type) ? f->ret_type : body->checked_type;
    return make_function(f->params, body, ret, f->attrs);
  }

  /// Applies `mutate_function` to every graph-level function; returns `m` itself when nothing
  /// changed.
  ir_module mutate_module(const ir_module& m) {
    ir_module out = m;
    for (auto& e : m->functions())
      if (auto fn = ref_cast<function_node>(e.func)) {
        function g = mutate_function(fn);
        if (g != fn) out = with_function(out, e.gv->name, g);
      }
    return out;
  }

  virtual binding_block mutate_binding_block(const binding_block& b, bool& changed) {
    binding_block out{b.dataflow, {}};
    out.bindings.reserve(b.bindings.size());
    for (auto& bd : b.bindings) {
      binding nb = mutate_binding(bd);
      changed |= nb.value != bd.value || nb.variable != bd.variable || nb.cast_type != bd.cast_type;
      out.bindings.push_back(std::move(nb));
    }
    return out;
  }

  /// Rewrites the value; renews the variable if the new value no longer fits its type.
  virtual binding mutate_binding(const binding& b) {
    expr value = mutate(b.value);
    var v = b.variable;
    const type& declared = b.is_match_cast() ? b.cast_type : v->checked_type;
    if (!b.is_match_cast() && value != b.value && !is_base_of(declared, value->checked_type)) {
      v = v->is_dataflow() ? make_dataflow_var(v->name_hint, value->checked_type) : make_var(v->name_hint, value->checked_type);
      var_remap_[b.variable.get()] = v;
    }
    return {v, value, b.cast_type};
  }

  virtual expr mutate_var(const var_node& n, const expr& self) {
    auto it = var_remap_.find(&n);
    return it == var_remap_.end() ? self : expr(it->second);
  }
  virtual expr mutate_constant(const constant_node&, const expr& self) { return self; }
  virtual expr mutate_shape_expr(const shape_expr_node&, const expr& self) { return self; }
  virtual expr mutate_prim_value(const prim_value_node&, const expr& self) { return self; }

  virtual expr mutate_call(const call_node& n, const expr& self) {
    expr callee = mutate(n.callee);
    bool changed = callee != n.callee;
    std::vector<expr> args = mutate_list(n.args, changed);
    if (!changed) return self;
    return rebuild_call(n, std::move(callee), std::move(args));
  }
  virtual expr mutate_tuple(const tuple_node& n, const expr& self) {
    bool changed = false;
    std::vector<expr> f = mutate_list(n.fields, changed);
    return changed ? make_tuple(std::move(f)) : self;
  }
  virtual expr mutate_tuple_get_item(const tuple_get_item_node& n, const expr& self) {
    expr t = mutate(n.tuple);
    return t == n.tuple ? self : make_tuple_get_item(t, n.index);
  }
  virtual expr mutate_if(const if_node& n, const expr& self) {
    expr c = mutate(n.cond), a = mutate(n.then_branch), b = mutate(n.else_branch);
    if (c == n.cond && a == n.then_branch && b == n.else_branch) return self;
    return make_if(c, a, b);
  }
  virtual expr mutate_seq(const seq_expr_node& n, const expr& self) {
    bool changed = false;
    std::vector<binding_block> blocks;
    blocks.reserve(n.blocks.size());
    for (auto& b : n.blocks) blocks.push_back(mutate_binding_block(b, changed));
    expr body = mutate(n.body);
    if (!changed && body == n.body) return self;
    return make_seq(std::move(blocks), std::move(body));
  }

  /// A call like `n` with a new callee and arguments, its type inferred again.
  static expr rebuild_call(const call_node& n, expr callee, std::vector<expr> args) {
    if (auto o = ref_cast<op_node>(callee)) return call_op(o, std::move(args), n.attrs, n.type_args);
    if (isa<extern_func_node>(callee)) return make_call(callee, std::move(args), n.attrs, n.type_args, n.checked_type);
    type t = infer_call_result(callee->checked_type, args, "call");
    return make_call(std::move(callee), std::move(args), n.attrs, n.type_args, std::move(t));
  }

protected:
  std::vector<expr> mutate_list(const std::vector<expr>& in, bool& changed) {
    std::vector<expr> out;
    out.reserve(in.size());
    for (auto& x : in) {
      out.push_back(mutate(x));
      changed |= out.back() != x;
    }
    return out;
  }

  /// Variables renamed because their binding's type changed.
  std::unordered_map<const var_node*, var> var_remap_;
};

}  // namespace kiln::ir
