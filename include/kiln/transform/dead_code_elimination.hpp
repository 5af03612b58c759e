// SPDX-License-Identifier: Apache-2.0
/// \file
/// `dead_code_elimination`: removes bindings whose value is never used and has no effect, and
/// functions nothing can call (Relax's DeadCodeElimination).
///
/// A value has no effect when it is an operator call (kiln's operators are pure), a tuple, an
/// element access, a constant, a shape or primitive value, a variable, or an `if` whose branches
/// have none. Calls of external functions and of module functions are kept. Bindings are visited
/// from last to first, so a chain of dead values goes at once.
///
/// The module's entry functions are the graph-level functions with a `global_symbol` attribute
/// (all graph-level functions when none has one); a function that no entry function reaches, directly or through
/// other functions, closures or `R.call_tir`, is removed.
#pragma once

#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/rewrite.hpp>

#include <cstdint>
#include <unordered_set>

namespace kiln::transform {

struct dead_code_elimination {
  static constexpr std::string_view name = "dead_code_elimination";
  static constexpr std::string_view description =
      "Removes bindings whose values are never used (and have no effect) and functions nothing reaches.";
  static constexpr int opt_level = 1;

  /// Statistics: "bindings removed" (in branches too) and "functions removed".
  ir::ir_module operator()(const ir::ir_module& m, pass_context& ctx) const {
    ir::ir_module out = m;
    std::uint64_t removed = 0;
    for (auto& e : m->functions())
      if (auto f = ir::ref_cast<ir::function_node>(e.func)) {
        ir::function g = remove_dead_bindings(f);
        if (g != f) {
          removed += count_bindings(f->body) - count_bindings(g->body);
          out = ir::with_function(out, e.gv->name, g);
        }
      }
    ir::ir_module reachable = remove_unreachable_functions(out);
    if (removed) ctx.statistic(name, "bindings removed") += removed;
    if (reachable->functions().size() < out->functions().size())
      ctx.statistic(name, "functions removed") += out->functions().size() - reachable->functions().size();
    return reachable;
  }

  static bool has_effects(const ir::expr& e) {
    switch (e->kind) {
      case ir::node_kind::call: {
        auto& c = static_cast<const ir::call_node&>(*e);
        auto* o = ir::dyn_cast<ir::op_node>(c.callee);
        if (!o) return true;  // external and module functions may have effects
        // Lowered forms write their operands or the VM's state.
        const std::string& n = o->name();
        return n == "call_dps_packed" || n == "call_builtin_with_ctx" || n == "vm.kill_object" || n.rfind("memory.kill", 0) == 0;
      }
      case ir::node_kind::if_: {
        auto& i = static_cast<const ir::if_node&>(*e);
        return seq_has_effects(i.then_branch) || seq_has_effects(i.else_branch);
      }
      default: return false;
    }
  }

private:
  static bool seq_has_effects(const ir::expr& s) {
    for (auto& b : static_cast<const ir::seq_expr_node&>(*s).blocks)
      for (auto& bd : b.bindings)
        if (has_effects(bd.value)) return true;
    return false;
  }

  static void uses(const ir::expr& e, std::unordered_set<const ir::var_node*>& used) {
    ir::post_order_visit(e, [&](const ir::expr& x) {
      if (auto* v = ir::dyn_cast<ir::var_node>(x)) used.insert(v);
    });
  }

  /// Rebuilds a sequence without its dead bindings, last to first; adds what it uses to `used`.
  static ir::expr sweep(const ir::expr& seq, std::unordered_set<const ir::var_node*>& used) {
    auto& s = static_cast<const ir::seq_expr_node&>(*seq);
    uses(s.body, used);
    bool changed = false;
    std::vector<ir::binding_block> blocks(s.blocks.size());
    for (std::size_t bi = s.blocks.size(); bi-- > 0;) {
      const ir::binding_block& block = s.blocks[bi];
      blocks[bi].dataflow = block.dataflow;
      std::vector<ir::binding> kept;
      for (std::size_t i = block.bindings.size(); i-- > 0;) {
        const ir::binding& b = block.bindings[i];
        if (!used.count(b.variable.get()) && !b.is_match_cast() && !has_effects(b.value)) {
          changed = true;
          continue;
        }
        ir::binding nb = b;
        if (auto* iff = ir::dyn_cast<ir::if_node>(b.value)) {
          ir::expr t = sweep(iff->then_branch, used), el = sweep(iff->else_branch, used);
          uses(iff->cond, used);
          if (t != iff->then_branch || el != iff->else_branch) {
            nb.value = ir::make_if(iff->cond, t, el);
            changed = true;
          }
        } else {
          uses(b.value, used);
        }
        kept.push_back(std::move(nb));
      }
      blocks[bi].bindings.assign(kept.rbegin(), kept.rend());
    }
    if (!changed) return seq;
    return ir::make_seq(std::move(blocks), s.body);
  }

  /// The bindings of a body, those of its `if` branches included.
  static std::uint64_t count_bindings(const ir::expr& e) {
    std::uint64_t n = 0;
    if (auto* s = ir::dyn_cast<ir::seq_expr_node>(e)) {
      for (auto& b : s->blocks)
        for (auto& bd : b.bindings) n += 1 + count_bindings(bd.value);
    } else if (auto* i = ir::dyn_cast<ir::if_node>(e)) {
      n += count_bindings(i->then_branch) + count_bindings(i->else_branch);
    }
    return n;
  }

  static ir::function remove_dead_bindings(const ir::function& f) {
    std::unordered_set<const ir::var_node*> used;
    return detail::with_body(f, sweep(f->body, used));
  }

  static ir::ir_module remove_unreachable_functions(const ir::ir_module& m) {
    std::vector<std::string> work;
    for (auto& e : m->functions())
      if (ir::isa<ir::function_node>(e.func) && e.func->attrs.contains(ir::attr::global_symbol)) work.push_back(e.gv->name);
    if (work.empty())
      for (auto& e : m->functions())
        if (ir::isa<ir::function_node>(e.func)) work.push_back(e.gv->name);
    std::unordered_set<std::string> reached(work.begin(), work.end());
    while (!work.empty()) {
      ir::base_func f = m->lookup(work.back());
      work.pop_back();
      ir::expr body;
      if (auto* fn = ir::dyn_cast<ir::function_node>(f)) body = fn->body;
      else if (auto* pf = ir::dyn_cast<ir::prim_func_node>(f)) body = pf->body;
      if (!body) continue;
      ir::post_order_visit(body, [&](const ir::expr& x) {
        if (auto* g = ir::dyn_cast<ir::global_var_node>(x); g && reached.insert(g->name).second) work.push_back(g->name);
      });
    }
    ir::ir_module out = m;
    for (auto& e : m->functions())
      if (!reached.count(e.gv->name)) out = ir::without_function(out, e.gv->name);
    return out;
  }
};

}  // namespace kiln::transform
