// SPDX-License-Identifier: Apache-2.0
/// \file
/// `call_tir_rewrite`: makes the outputs of destination-passing calls explicit (Relax's
/// CallTIRRewrite). Each output is allocated by its own binding and passed after the inputs;
/// several outputs go as one tuple. The binding keeps its variable, which now names the
/// allocation:
///
///     lv = R.call_dps_packed(R.ExternFunc("kernels.exp"), (x,), out_sinfo=R.Tensor((n, 4), "float32"))
///  -> lv = R.builtin.alloc_tensor(R.shape([n, 4]), dtype="float32")
///     _ = R.call_packed("kernels.exp", x, lv, sinfo_args=R.Tuple())
#pragma once

#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/properties.hpp>

namespace kiln::transform {

struct call_tir_rewrite {
  static constexpr std::string_view name = "call_tir_rewrite";
  static constexpr std::string_view description =
      "Makes the outputs of kernel calls explicit: each output is allocated (R.builtin.alloc_tensor) and passed to the kernel last.";
  static constexpr int opt_level = 0;
  using needs = property_list<properties::legalized, properties::non_dataflow>;
  using establishes = property_list<properties::explicit_outputs>;

  ir::function operator()(const ir::function& f) const {
    auto on_body = [](const ir::expr& e) { return e; };
    auto on_binding = [](const ir::binding& b, std::vector<ir::binding>& out) {
      if (!detail::is_op_call(b.value, "call_dps_packed")) {
        out.push_back(b);
        return;
      }
      auto& c = static_cast<const ir::call_node&>(*b.value);
      const std::string& symbol = static_cast<const ir::extern_func_node&>(*c.args[0]).symbol;
      std::vector<ir::expr> args;
      if (auto* t = ir::dyn_cast<ir::tuple_node>(c.args[1])) args = t->fields;
      else
        for (std::size_t i = 0; i < static_cast<const ir::tuple_type_node&>(*c.args[1]->checked_type).fields.size(); ++i)
          args.push_back(ir::make_tuple_get_item(c.args[1], static_cast<int>(i)));
      const ir::type& out_type = c.type_args[0];
      if (auto* tt = ir::dyn_cast<ir::tuple_type_node>(out_type)) {
        std::vector<ir::expr> outs;
        for (std::size_t i = 0; i < tt->fields.size(); ++i) {
          ir::var o = ir::make_var(b.variable->name_hint + "_" + std::to_string(i), tt->fields[i]);
          out.push_back({o, alloc(tt->fields[i]), {}});
          outs.push_back(o);
        }
        ir::var all = b.variable;
        out.push_back({all, ir::make_tuple(outs), b.cast_type});
        args.push_back(all);
      } else {
        out.push_back({b.variable, alloc(out_type), b.cast_type});
        args.push_back(b.variable);
      }
      out.push_back({ir::make_var("_", ir::tuple_type({})), ir::call_extern(symbol, std::move(args), ir::tuple_type({})), {}});
    };
    return detail::with_body(f, detail::rewrite_seq(f->body, on_binding, on_body));
  }

  static ir::expr alloc(const ir::type& t) {
    auto& tt = static_cast<const ir::tensor_type_node&>(*t);
    return ir::call_op("builtin.alloc_tensor", {ir::make_shape_expr(*tt.shape)}, {{"dtype", tt.dt}});
  }
};

}  // namespace kiln::transform
