// SPDX-License-Identifier: Apache-2.0
/// \file
/// `eliminate_common_subexpr`: a binding whose value is structurally equal to an earlier one's
/// (same operator, same operands, same attributes) becomes a use of the earlier variable (Relax's
/// EliminateCommonSubexpr).
///
///     a = R.exp(x)                  a = R.exp(x)
///     b = R.exp(x)          ->      b = a                (canonicalize_bindings then drops it)
///
/// Later uses of the variable read the earlier one (where it is visible to all of them), so chains
/// of equal values are shared in one run: `c = R.exp(a)` and `d = R.exp(b)` after `b = a`.
///
/// Only values without effects are shared (operator calls, tuples, element accesses). An earlier
/// value is visible where its variable is: inside its dataflow block for a dataflow variable,
/// after it otherwise, and in the branches of a later `if` (but a branch's values are not visible
/// after the `if`).
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/structural_equal.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/dead_code_elimination.hpp>

#include <cstdint>
#include <unordered_map>

namespace kiln::transform {

struct eliminate_common_subexpr {
  static constexpr std::string_view name = "eliminate_common_subexpr";
  static constexpr std::string_view description =
      "Binds each pure expression computed twice in a function once and reuses it.";
  static constexpr int opt_level = 1;

  /// Statistic: "expressions shared" (bindings whose value became an earlier variable).
  ir::function operator()(const ir::function& f, const ir::ir_module&, pass_context& ctx) const {
    using table = std::unordered_map<ir::expr, ir::var, ir::structural_hash_fn, ir::structural_equal_fn>;
    struct mutator final : ir::expr_mutator {
      std::vector<table> scopes{table{}};  // visible values: the function, then nested branches
      std::uint64_t shared = 0;
      ir::expr mutate_seq(const ir::seq_expr_node& n, const ir::expr& self) override {
        scopes.push_back({});
        ir::expr r = expr_mutator::mutate_seq(n, self);
        scopes.pop_back();
        return r;
      }
      ir::binding_block mutate_binding_block(const ir::binding_block& b, bool& changed) override {
        table block_local;  // dataflow variables: visible inside this block only
        ir::binding_block out{b.dataflow, {}};
        for (auto& bd : b.bindings) {
          ir::binding nb = mutate_binding(bd);
          if (!nb.is_match_cast() && shareable(nb.value)) {
            if (ir::var earlier = lookup(nb.value, block_local)) {
              nb.value = earlier;
              ++shared;
              // Later uses read the earlier variable where it is visible to all of them (it is
              // not a dataflow variable, or this one is), so that values computed from the two
              // are equal too: cumsum(b) after b = a is cumsum(a).
              if (!earlier->is_dataflow() || bd.variable->is_dataflow()) var_remap_[bd.variable.get()] = earlier;
            } else {
              (nb.variable->is_dataflow() ? block_local : scopes.back())[nb.value] = nb.variable;
            }
          }
          changed |= nb.value != bd.value || nb.variable != bd.variable;
          out.bindings.push_back(std::move(nb));
        }
        return out;
      }
      ir::var lookup(const ir::expr& e, const table& local) const {
        if (auto it = local.find(e); it != local.end()) return it->second;
        for (auto s = scopes.rbegin(); s != scopes.rend(); ++s)
          if (auto it = s->find(e); it != s->end()) return it->second;
        return {};
      }
      static bool shareable(const ir::expr& e) {
        if (!ir::isa<ir::call_node>(e) && !ir::isa<ir::tuple_node>(e) && !ir::isa<ir::tuple_get_item_node>(e)) return false;
        if (dead_code_elimination::has_effects(e)) return false;
        auto* c = ir::dyn_cast<ir::call_node>(e);
        return !c || ir::isa<ir::op_node>(c->callee);
      }
    } m;
    ir::function out = m.mutate_function(f);
    if (m.shared) ctx.statistic(name, "expressions shared") += m.shared;
    return out;
  }
};

}  // namespace kiln::transform
