// SPDX-License-Identifier: Apache-2.0
/// \file
/// `canonicalize_bindings`: removes bindings that only rename (Relax's CanonicalizeBindings).
///
///     y = x                         (uses of y become uses of x)
///     z = R.match_cast(x, T)        (when x's type already is a T: the cast proves nothing)
///
/// A binding is kept when removing it would make a dataflow variable visible outside its block
/// (`gv = lv` as a dataflow block's output).
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>

#include <cstdint>

namespace kiln::transform {

struct canonicalize_bindings {
  static constexpr std::string_view name = "canonicalize_bindings";
  static constexpr std::string_view description =
      "Replaces variables bound to other variables or tuple items by what they name, and removes the trivial bindings.";
  static constexpr int opt_level = 0;

  /// Statistic: "copies removed" (bindings `y = x` replaced by `x`).
  ir::function operator()(const ir::function& f, const ir::ir_module&, pass_context& ctx) const {
    struct mutator final : ir::expr_mutator {
      std::uint64_t removed = 0;
      ir::binding_block mutate_binding_block(const ir::binding_block& b, bool& changed) override {
        ir::binding_block out{b.dataflow, {}};
        for (auto& bd : b.bindings) {
          ir::binding nb = mutate_binding(bd);
          auto* src = ir::dyn_cast<ir::var_node>(nb.value);
          const bool trivial = src && (!nb.is_match_cast() || ir::is_base_of(nb.cast_type, src->checked_type));
          // Dropping y = x is fine unless x is a dataflow variable and y is visible outside the block.
          if (trivial && (nb.variable->is_dataflow() || !src->is_dataflow())) {
            var_remap_[bd.variable.get()] = ir::var(src);
            changed = true;
            ++removed;
            continue;
          }
          changed |= nb.value != bd.value || nb.variable != bd.variable || nb.cast_type != bd.cast_type;
          out.bindings.push_back(std::move(nb));
        }
        return out;
      }
    } m;
    ir::function out = m.mutate_function(f);
    if (m.removed) ctx.statistic(name, "copies removed") += m.removed;
    return out;
  }
};

}  // namespace kiln::transform
