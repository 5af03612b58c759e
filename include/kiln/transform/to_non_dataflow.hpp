// SPDX-License-Identifier: Apache-2.0
/// \file
/// `to_non_dataflow`: turns every dataflow block into an ordinary block and every dataflow variable
/// into an ordinary variable (Relax's ToNonDataflow), so that later passes and code generation see
/// one flat list of bindings.
///
///     with R.dataflow():                       lv: R.Tensor((4,), "float32") = R.exp(x)
///         lv = R.exp(x)                  ->    gv: R.Tensor((4,), "float32") = R.add(lv, x)
///         gv = R.add(lv, x)
///         R.output(gv)
#pragma once

#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/properties.hpp>
#include <kiln/ir/visitor.hpp>

namespace kiln::transform {

struct to_non_dataflow {
  static constexpr std::string_view name = "to_non_dataflow";
  static constexpr std::string_view description =
      "Turns dataflow blocks into ordinary binding blocks.";
  static constexpr int opt_level = 0;
  using establishes = property_list<properties::non_dataflow>;

  ir::function operator()(const ir::function& f) const {
    struct renamer final : ir::expr_mutator {
      ir::binding mutate_binding(const ir::binding& b) override {
        ir::binding nb = expr_mutator::mutate_binding(b);
        if (nb.variable->is_dataflow()) {
          ir::var v = ir::make_var(nb.variable->name_hint, nb.variable->checked_type);
          var_remap_[b.variable.get()] = v;
          nb.variable = v;
        }
        return nb;
      }
      ir::binding_block mutate_binding_block(const ir::binding_block& b, bool& changed) override {
        ir::binding_block out = expr_mutator::mutate_binding_block(b, changed);
        changed |= out.dataflow;
        out.dataflow = false;
        return out;
      }
    } r;
    return r.mutate_function(f);
  }
};

}  // namespace kiln::transform
