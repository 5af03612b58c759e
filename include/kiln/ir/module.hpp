// SPDX-License-Identifier: Apache-2.0
/// \file
/// `ir_module`: an ordered map from global names to functions, plus module attributes.
///
/// Modules are immutable like every node: `with_function` and friends return a new module that
/// shares all untouched functions, so a pass that changes nothing returns the same module object.
///
/// Threads: being immutable, a module (and every node in it) may be read, printed, compiled and
/// transformed from any number of threads at once; node reference counts are atomic.
#pragma once

#include <kiln/ir/function.hpp>

#include <unordered_map>

namespace kiln::ir {

class ir_module_node final : public node {
public:
  struct entry {
    global_var gv;
    base_func func;
  };

  ir_module_node(std::vector<entry> fns, attr_map a) : node(node_kind::module), attrs(std::move(a)), functions_(std::move(fns)) {
    for (std::size_t i = 0; i < functions_.size(); ++i) {
      const std::string& n = functions_[i].gv->name;
      if (!index_.emplace(n, i).second) throw error("kiln::ir::ir_module: the function name '" + n + "' is defined twice");
    }
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::module; }

  const attr_map attrs;

  /// Functions in definition order.
  const std::vector<entry>& functions() const noexcept { return functions_; }
  std::size_t size() const noexcept { return functions_.size(); }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  /// The function named `name`, or null.
  base_func lookup(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? base_func() : functions_[it->second].func;
  }
  /// The global variable naming function `name`, or null.
  global_var get_global_var(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? global_var() : functions_[it->second].gv;
  }

private:
  std::vector<entry> functions_;
  std::unordered_map<std::string, std::size_t> index_;
};
using ir_module = ref<ir_module_node>;

/// True when `s` can name a function (and be printed as `cls.s`): `[A-Za-z_][A-Za-z0-9_]*`.
inline bool is_identifier(std::string_view s) noexcept {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

inline ir_module make_module(std::vector<ir_module_node::entry> functions = {}, attr_map attrs = {}) {
  return make_ref<ir_module_node>(std::move(functions), std::move(attrs));
}

/// A module with function `name` added (at the end) or replaced (in place).
inline ir_module with_function(const ir_module& m, const std::string& name, base_func f) {
  if (!is_identifier(name))
    throw error("kiln::ir::ir_module: '" + name + "' is not a valid function name (letters, digits and _ only)");
  auto fns = m->functions();
  global_var gv = m->get_global_var(name);
  if (!gv || !types_equal(gv->checked_type, f->signature())) gv = make_global_var(name, f->signature());
  bool replaced = false;
  for (auto& e : fns)
    if (e.gv->name == name) {
      e = {gv, std::move(f)};
      replaced = true;
    }
  if (!replaced) fns.push_back({gv, std::move(f)});
  return make_module(std::move(fns), m->attrs);
}

/// A module without function `name` (an error if there is none).
inline ir_module without_function(const ir_module& m, const std::string& name) {
  if (!m->contains(name)) throw error("kiln::ir::ir_module: there is no function named '" + name + "' to remove");
  auto fns = m->functions();
  std::erase_if(fns, [&](const auto& e) { return e.gv->name == name; });
  return make_module(std::move(fns), m->attrs);
}

inline ir_module with_module_attrs(const ir_module& m, attr_map attrs) {
  return make_module(m->functions(), std::move(attrs));
}

}  // namespace kiln::ir
