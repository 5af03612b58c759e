// SPDX-License-Identifier: Apache-2.0
/// \file
/// The properties of the IR that the compiler's passes need and establish, each with a checker.
///
/// A pass states them as types (see `kiln/pass/property.hpp`):
///
/// \code
/// struct static_plan_block_memory {
///   using needs = kiln::property_list<properties::non_dataflow, properties::explicit_outputs>;
///   using establishes = kiln::property_list<properties::memory_planned>;
///   ...
/// };
/// \endcode
///
/// `kiln::sequential` then refuses, at compile time, a pipeline in which a pass runs before the
/// properties it needs hold; `verify_ir` runs the checker of every property a pass establishes
/// after that pass. The order the default pipeline establishes them in:
///
///     legalized         every operator call is a kernel call (call_dps_packed) or a lowered form
///     non_dataflow      no dataflow blocks remain
///     explicit_outputs  outputs are allocated explicitly and passed to the kernels (no call_dps_packed)
///     memory_planned    intermediates live in planned storage (the function says how much)
///     builtins_lowered  memory operators and closures are VM built-in calls
///     shapes_lowered    no shape or value computes with size variables; the shape heap does
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/visitor.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kiln::transform::properties {

namespace detail {

/// Visits every graph-level function's body; `fn(function name, expression)` sees every
/// expression, bindings' values included.
template <class Fn>
void for_each_expr(const ir::ir_module& m, Fn fn) {
  for (auto& e : m->functions()) {
    auto* f = ir::dyn_cast<ir::function_node>(e.func);
    if (!f) continue;
    const std::string& name = e.gv->name;
    ir::post_order_visit(f->body, [&](const ir::expr& x) { fn(name, x); });
  }
}

inline std::string op_name(const ir::expr& e) {
  auto* c = ir::dyn_cast<ir::call_node>(e);
  auto* o = c ? ir::dyn_cast<ir::op_node>(c->callee) : nullptr;
  return o ? o->name() : std::string();
}

inline bool is_lowered_op(std::string_view n) {
  return n == "call_dps_packed" || n == "call_builtin_with_ctx" || n == "null_value" || n == "make_closure" || n == "vm.kill_object" ||
         n.substr(0, 8) == "builtin." || n.substr(0, 7) == "memory.";
}

}  // namespace detail

struct legalized {
  static constexpr std::string_view name = "legalized";
  static std::vector<std::string> check(const ir::ir_module& m) {
    std::vector<std::string> out;
    detail::for_each_expr(m, [&](const std::string& fn, const ir::expr& e) {
      const std::string n = detail::op_name(e);
      if (!n.empty() && !detail::is_lowered_op(n)) out.push_back("function '" + fn + "' still calls operator R." + n);
    });
    return out;
  }
};

struct non_dataflow {
  static constexpr std::string_view name = "non_dataflow";
  static std::vector<std::string> check(const ir::ir_module& m) {
    std::vector<std::string> out;
    detail::for_each_expr(m, [&](const std::string& fn, const ir::expr& e) {
      if (auto* s = ir::dyn_cast<ir::seq_expr_node>(e))
        for (auto& b : s->blocks)
          if (b.dataflow) out.push_back("function '" + fn + "' has a dataflow block");
    });
    return out;
  }
};

struct explicit_outputs {
  static constexpr std::string_view name = "explicit_outputs";
  static std::vector<std::string> check(const ir::ir_module& m) {
    std::vector<std::string> out;
    detail::for_each_expr(m, [&](const std::string& fn, const ir::expr& e) {
      const std::string n = detail::op_name(e);
      if (n == "call_dps_packed" || n == "call_tir") out.push_back("function '" + fn + "' still has an R." + n + " whose outputs are implicit");
    });
    return out;
  }
};

/// The function attribute that bounds size variables from above, `{"n": 1024}` (TVM's name):
/// memory planning sizes storage for the bound, and the function checks each bound at entry.
inline constexpr const char* upper_bound_attr = "tir_var_upper_bound";

/// The function attribute memory planning records its result in (bytes of planned storage).
inline constexpr const char* planned_bytes_attr = "kiln.planned_bytes";

struct memory_planned {
  static constexpr std::string_view name = "memory_planned";
  static std::vector<std::string> check(const ir::ir_module& m) {
    std::vector<std::string> out;
    for (auto& e : m->functions())
      if (auto* f = ir::dyn_cast<ir::function_node>(e.func); f && !f->attrs.contains(planned_bytes_attr))
        out.push_back("function '" + e.gv->name + "' has no memory plan (no " + planned_bytes_attr + " attribute)");
    return out;
  }
};

struct builtins_lowered {
  static constexpr std::string_view name = "builtins_lowered";
  static std::vector<std::string> check(const ir::ir_module& m) {
    std::vector<std::string> out;
    detail::for_each_expr(m, [&](const std::string& fn, const ir::expr& e) {
      const std::string n = detail::op_name(e);
      if (n.substr(0, 8) == "builtin." || n.substr(0, 7) == "memory." || n == "make_closure")
        out.push_back("function '" + fn + "' still calls R." + n);
    });
    return out;
  }
};

struct shapes_lowered {
  static constexpr std::string_view name = "shapes_lowered";
  static std::vector<std::string> check(const ir::ir_module& m) {
    std::vector<std::string> out;
    auto symbolic = [](const ir::prim_expr& d) {
      std::vector<ir::size_var> vars;
      ir::collect_size_vars(d, vars);
      return !vars.empty();
    };
    detail::for_each_expr(m, [&](const std::string& fn, const ir::expr& e) {
      if (auto* s = ir::dyn_cast<ir::shape_expr_node>(e)) {
        for (auto& d : s->values)
          if (symbolic(d)) {
            out.push_back("function '" + fn + "' computes the shape " + ir::to_string(s->values) + " from size variables");
            break;
          }
      } else if (auto* p = ir::dyn_cast<ir::prim_value_node>(e); p && p->int_value && symbolic(p->int_value)) {
        out.push_back("function '" + fn + "' computes the value " + ir::to_string(p->int_value) + " from size variables");
      }
    });
    return out;
  }
};

}  // namespace kiln::transform::properties
