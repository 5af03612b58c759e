// SPDX-License-Identifier: Apache-2.0
/// \file
/// Helpers the compiler's passes share: rebuilding a function body binding by binding (into the
/// branches of `if` too), and naming things in messages.
#pragma once

#include <kiln/ir/function.hpp>
#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::transform::detail {

/// The operator a call calls, or null.
inline const ir::op_node* callee_op(const ir::expr& e) {
  auto* c = ir::dyn_cast<ir::call_node>(e);
  return c ? ir::dyn_cast<ir::op_node>(c->callee) : nullptr;
}
inline bool is_op_call(const ir::expr& e, std::string_view name) {
  const ir::op_node* o = callee_op(e);
  return o && o->name() == name;
}
/// The symbol an external call (`R.call_packed`) calls, or empty.
inline std::string_view extern_symbol(const ir::expr& e) {
  auto* c = ir::dyn_cast<ir::call_node>(e);
  auto* x = c ? ir::dyn_cast<ir::extern_func_node>(c->callee) : nullptr;
  return x ? std::string_view(x->symbol) : std::string_view();
}

/// `R.call_builtin_with_ctx(R.ExternFunc(builtin), (args...))` returning `t`: a VM built-in given
/// the VM first.
inline ir::expr call_builtin_with_ctx(const std::string& builtin, std::vector<ir::expr> args, ir::type t) {
  return ir::call_op("call_builtin_with_ctx", {ir::make_extern_func(builtin), ir::make_tuple(std::move(args))}, {}, {std::move(t)});
}

/// Rebuilds sequence `seq`: each binding (after the branches of an `if` value were rebuilt the same
/// way) goes to `on_binding(b, out)`, which appends what replaces it to `out` (an
/// `on_binding(b, out, dataflow)` also learns whether the block is a dataflow block, for the
/// variables it binds). Blocks keep their dataflow flag; `on_body(body)` rewrites each sequence's result (and the condition of each `if`);
/// an `on_body(body, out)` taking two arguments may also append bindings to the sequence's last
/// block first. Returns `seq` itself when nothing changed.
template <class OnBinding, class OnBody>
ir::expr rewrite_seq(const ir::expr& seq, OnBinding& on_binding, OnBody& on_body) {
  auto& s = static_cast<const ir::seq_expr_node&>(*seq);
  bool changed = false;
  std::vector<ir::binding_block> blocks;
  for (const ir::binding_block& block : s.blocks) {
    ir::binding_block out{block.dataflow, {}};
    for (const ir::binding& b : block.bindings) {
      ir::binding cur = b;
      if (auto* i = ir::dyn_cast<ir::if_node>(b.value)) {
        ir::expr t = rewrite_seq(i->then_branch, on_binding, on_body), e = rewrite_seq(i->else_branch, on_binding, on_body);
        ir::expr c = i->cond;
        if constexpr (std::is_invocable_v<OnBody&, const ir::expr&>) c = on_body(i->cond);
        if (t != i->then_branch || e != i->else_branch || c != i->cond) cur.value = ir::make_if(c, t, e);
      }
      const std::size_t before = out.bindings.size();
      if constexpr (std::is_invocable_v<OnBinding&, const ir::binding&, std::vector<ir::binding>&, bool>)
        on_binding(cur, out.bindings, block.dataflow);
      else
        on_binding(cur, out.bindings);
      changed |= out.bindings.size() != before + 1 || out.bindings.back().variable != b.variable ||
                 out.bindings.back().value != b.value || out.bindings.back().cast_type != b.cast_type;
    }
    blocks.push_back(std::move(out));
  }
  ir::expr body;
  if constexpr (std::is_invocable_v<OnBody&, const ir::expr&>) {
    body = on_body(s.body);
  } else {
    if (blocks.empty() || blocks.back().dataflow) blocks.push_back({false, {}});
    const std::size_t before = blocks.back().bindings.size();
    body = on_body(s.body, blocks.back().bindings);
    changed |= blocks.back().bindings.size() != before;
  }
  if (!changed && body == s.body) return seq;
  return ir::make_seq(std::move(blocks), std::move(body));
}

/// The function with a new body; its return type is kept (types do not change in these passes).
inline ir::function with_body(const ir::function& f, ir::expr body) {
  if (body == f->body) return f;
  return ir::make_ref<ir::function_node>(f->params, std::move(body), f->ret_type, f->attrs);
}

/// Calls `fn(e)` on `e` and every expression below it, except into `if` branches and sequences.
inline void for_each_subexpr(const ir::expr& e, const std::function<void(const ir::expr&)>& fn) {
  fn(e);
  switch (e->kind) {
    case ir::node_kind::call: {
      auto& c = static_cast<const ir::call_node&>(*e);
      for_each_subexpr(c.callee, fn);
      for (auto& a : c.args) for_each_subexpr(a, fn);
      break;
    }
    case ir::node_kind::tuple:
      for (auto& a : static_cast<const ir::tuple_node&>(*e).fields) for_each_subexpr(a, fn);
      break;
    case ir::node_kind::tuple_get_item: for_each_subexpr(static_cast<const ir::tuple_get_item_node&>(*e).tuple, fn); break;
    case ir::node_kind::if_: for_each_subexpr(static_cast<const ir::if_node&>(*e).cond, fn); break;
    default: break;
  }
}

}  // namespace kiln::transform::detail
