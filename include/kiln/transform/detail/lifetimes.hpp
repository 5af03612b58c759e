// SPDX-License-Identifier: Apache-2.0
/// \file
/// Lifetimes of the values bound at a function's top level, with aliasing: what memory planning and
/// `kill_after_last_use` decide from.
///
/// Positions number the top-level bindings in order; the function's result is at position N. A
/// value's lifetime ends at the last position that uses it *or anything that may hold it*: a view
/// (`kernels.reshape_view`), a tuple, the result of a call it was passed to (but for the new positions
/// `kernels.kv_cache_append` copies), an `if` whose branches
/// use it, a tensor placed in a storage (`memory.alloc_tensor`). A value escapes when something
/// holding it may reach the result or a closure.
#pragma once

#include <kiln/ir/visitor.hpp>
#include <kiln/kernels/calling_convention.hpp>
#include <kiln/transform/detail/rewrite.hpp>

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::transform::detail {

struct value_lifetimes {
  std::vector<const ir::binding*> bindings;  ///< the top-level bindings, in order
  std::int64_t result_position = 0;          ///< the function's result (== bindings.size())
  std::unordered_map<const ir::var_node*, std::int64_t> end;  ///< last position anything holding it is used
  std::unordered_set<const ir::var_node*> escapes;

  explicit value_lifetimes(const ir::function& f) {
    auto& body = static_cast<const ir::seq_expr_node&>(*f->body);
    for (auto& block : body.blocks)
      for (auto& b : block.bindings) bindings.push_back(&b);
    result_position = std::int64_t(bindings.size());
    std::unordered_map<const ir::var_node*, std::int64_t> last_use;
    std::unordered_map<const ir::var_node*, std::vector<const ir::var_node*>> held_by;  // v -> bindings that may hold v
    for (std::int64_t p = 0; p < result_position; ++p) {
      const ir::binding& b = *bindings[std::size_t(p)];
      std::vector<const ir::var_node*> used;
      vars_in(b.value, used);
      const bool holds = may_hold(b);
      const bool captures = is_op_call(b.value, "make_closure");
      std::vector<const ir::var_node*> held;  // what the value may hold: all it mentions but for a cache append's new positions
      if (holds) {
        if (auto* c = ir::dyn_cast<ir::call_node>(b.value); c && is_extern_call(*c, kernels::abi::kv_cache_append::name) && !c->args.empty())
          vars_in(c->args[0], held);
        else
          held = used;
      }
      for (auto* v : used) {
        last_use[v] = p;
        if (captures) escapes.insert(v);
      }
      for (auto* v : held) held_by[v].push_back(b.variable.get());
    }
    std::vector<const ir::var_node*> returned;
    vars_in(body.body, returned);
    for (auto* v : returned) {
      escapes.insert(v);
      last_use[v] = result_position;
    }
    // Backwards: a value lives as long as anything holding it, and escapes with it.
    for (std::int64_t p = result_position - 1; p >= 0; --p) {
      const ir::var_node* v = bindings[std::size_t(p)]->variable.get();
      std::int64_t e = last_use.count(v) ? last_use[v] : p;
      for (auto* w : held_by[v]) {
        e = std::max(e, end[w]);
        if (escapes.count(w)) escapes.insert(v);
      }
      end[v] = e;
    }
  }

  static bool is_extern_call(const ir::call_node& c, std::string_view symbol) {
    auto* x = ir::dyn_cast<ir::extern_func_node>(c.callee);
    return x && x->symbol == symbol;
  }

  /// The variables `e` mentions, anywhere inside it (branches included).
  static void vars_in(const ir::expr& e, std::vector<const ir::var_node*>& out) {
    ir::post_order_visit(e, [&](const ir::expr& x) {
      if (auto* v = ir::dyn_cast<ir::var_node>(x)) out.push_back(v);
    });
  }

  /// True when the value bound may hold a reference to the variables it mentions.
  static bool may_hold(const ir::binding& b) {
    const ir::type& t = b.variable->checked_type;
    if (t->kind == ir::node_kind::prim_type || t->kind == ir::node_kind::shape_type) return false;
    if (auto* tt = ir::dyn_cast<ir::tuple_type_node>(t); tt && tt->fields.empty()) return false;
    const ir::op_node* o = callee_op(b.value);
    if (o && (o->name() == "builtin.alloc_tensor" || o->name() == "memory.alloc_storage")) return false;  // fresh memory
    return true;  // memory.alloc_tensor holds its storage
  }
};

}  // namespace kiln::transform::detail
