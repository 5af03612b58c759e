// SPDX-License-Identifier: Apache-2.0
/// \file
/// kiln's reference IR as a model of the pass infrastructure's `module_like`: function passes
/// transform `ir::function`s (Relax functions), kernel-function passes `ir::prim_func`s.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/printer.hpp>
#include <kiln/ir/structural_equal.hpp>
#include <kiln/ir/verifier.hpp>
#include <kiln/pass/module_traits.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::ir::detail {

/// `m` with every function of node type `Node` replaced by `fn(name, f)`; `m` itself when `fn`
/// returned each function unchanged (the same object).
template <class Node, class Fn>
ir_module map_functions_of_kind(const ir_module& m, Fn& fn) {
  std::optional<std::vector<ir_module_node::entry>> changed;  // allocated on the first change only
  const auto& entries = m->functions();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const ir_module_node::entry& e = entries[i];
    const Node* f = dyn_cast<Node>(e.func.get());
    if (!f) continue;
    ref<Node> in(f);
    ref<Node> out = fn(std::string_view(e.gv->name), in);
    if (!out)
      throw error("kiln::ir: a function pass returned a null function for '" + e.gv->name + "'");
    if (out.get() == f) continue;
    if (!changed) changed.emplace(entries);
    global_var gv = types_equal(e.gv->checked_type, out->signature()) ? e.gv : make_global_var(e.gv->name, out->signature());
    (*changed)[i] = {std::move(gv), base_func(std::move(out))};
  }
  return changed ? make_module(std::move(*changed), m->attrs) : m;
}

inline bool has_skip_optimization(const base_func_node& f) {
  static const std::string key = attr::skip_optimization;
  const attr_value* v = f.attrs.find(key);
  if (!v) return false;
  if (const bool* b = v->get_if<bool>()) return *b;
  if (const std::int64_t* i = v->get_if<std::int64_t>()) return *i != 0;
  return false;
}

}  // namespace kiln::ir::detail

template <>
struct kiln::module_traits<kiln::ir::ir_module> {
  using function_type = ir::function;
  using kernel_function_type = ir::prim_func;
  static constexpr std::string_view ir_name = "kiln IR";

  template <class Fn>
  static ir::ir_module map_functions(const ir::ir_module& m, Fn&& fn) {
    return ir::detail::map_functions_of_kind<ir::function_node>(m, fn);
  }
  template <class Fn>
  static ir::ir_module map_kernel_functions(const ir::ir_module& m, Fn&& fn) {
    return ir::detail::map_functions_of_kind<ir::prim_func_node>(m, fn);
  }
  /// A function whose `SkipOptimization` attribute is true (or a non-zero integer).
  static bool skip_optimization(const ir::function& f) { return ir::detail::has_skip_optimization(*f); }
  static bool skip_optimization(const ir::prim_func& f) { return ir::detail::has_skip_optimization(*f); }
  static bool same(const ir::ir_module& a, const ir::ir_module& b) noexcept { return a.get() == b.get(); }
  static void print(std::ostream& os, const ir::ir_module& m) { os << ir::print(m); }
  /// For instruments and PrintIR: constants of more than 16 elements elided.
  static void print_readable(std::ostream& os, const ir::ir_module& m) { os << ir::print(m, ir::print_options::readable()); }
  static std::size_t structural_hash(const ir::ir_module& m) { return ir::structural_hash(m); }
  static std::vector<std::string> verify(const ir::ir_module& m) {
    std::vector<std::string> out;
    for (const ir::diagnostic& d : ir::verify(m)) out.push_back(d.to_string());
    return out;
  }
};
