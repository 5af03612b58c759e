// SPDX-License-Identifier: Apache-2.0
/// \file
/// `pass_registry<Module>`: passes by name, the design's pass registration and `GetPass`.
///
/// \code
/// kiln::pass_registry<ir::ir_module>::global().add<fold_constant>();   // also registers what it requires
/// kiln::pass<ir::ir_module> p = kiln::get_pass<ir::ir_module>("fold_constant");
/// \endcode
///
/// Run-time pipelines (`pipeline.hpp`) look requirements up here by name.
#pragma once

#include <kiln/pass/erased_pass.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

namespace kiln {

/// Passes that run on `Module`, by name. Thread-safe.
template <module_like Module>
class pass_registry {
public:
  using factory = std::function<pass<Module>()>;

  /// The process-wide registry for `Module`.
  static pass_registry& global() {
    static pass_registry r;
    return r;
  }

  /// Registers `Pass` (default-constructed on each lookup) under its name, and the passes it
  /// requires, transitively. Registering the same type again does nothing; another type under a
  /// name already taken is a `usage_error`.
  template <class Pass>
  pass_registry& add() {
    static_assert(pass_for<Pass, Module>, "kiln::pass_registry::add: the type is not a pass that runs on this module type");
    static_assert(std::is_default_constructible_v<Pass>,
                  "kiln::pass_registry::add: a registered pass must be default-constructible (the registry creates "
                  "it on each lookup); register a factory with add(name, factory) instead");
    // Requirements are registered once, when their dependent is first added (which also ends the
    // recursion for requirements that form a cycle; the pipeline reports the cycle).
    if (insert(std::string(Pass::name), [] { return pass<Module>(Pass{}); }, typeid(Pass))) add_all(required_of<Pass>{});
    return *this;
  }

  /// Registers a factory under `name`. `type` identifies what it makes, so that registering the
  /// same thing twice is harmless (typeid(void): always a conflict when the name is taken).
  pass_registry& add(std::string name, factory make, const std::type_info& type = typeid(void)) {
    insert(std::move(name), std::move(make), type);
    return *this;
  }

private:
  template <class... Passes>
  void add_all(pass_list<Passes...>) {
    (add<Passes>(), ...);
  }

  /// True when `name` was not registered before.
  bool insert(std::string name, factory make, const std::type_info& type) {
    if (!is_valid_pass_name(name))
      throw usage_error("kiln::pass_registry::add: '" + name +
                        "' is not a valid pass name (letters, digits, '_', '.' and '-' only)");
    std::lock_guard lock(mutex_);
    auto [it, inserted] = entries_.try_emplace(std::move(name), entry{std::move(make), type});
    if (!inserted && (type == typeid(void) || it->second.type != std::type_index(type)))
      throw usage_error("kiln::pass_registry::add: a different pass is already registered as '" + it->first + "'");
    return inserted;
  }

public:
  bool contains(std::string_view name) const {
    std::lock_guard lock(mutex_);
    return entries_.find(name) != entries_.end();
  }

  /// Every registered name, sorted.
  std::vector<std::string> names() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [name, e] : entries_) out.push_back(name);
    return out;
  }

  /// A new instance of the pass registered as `name`; a `usage_error` that suggests close names
  /// when there is none.
  pass<Module> create(std::string_view name) const {
    factory make;
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(name);
      if (it != entries_.end()) make = it->second.make;
    }
    if (!make) throw usage_error(unknown_pass_message(name));
    return make();
  }

  /// " (did you mean 'y'?)" for the registered names close to `name`, or, when none is,
  /// "; registered passes: a, b, c".
  std::string suggest(std::string_view name) const {
    const std::vector<std::string> all = names();
    std::string hint = detail::did_you_mean(name, all);
    if (!hint.empty()) return hint;
    hint = all.empty() ? "; no passes are registered" : "; registered passes: ";
    for (std::size_t i = 0; i < all.size(); ++i) hint.append(i ? ", " : "").append(all[i]);
    return hint;
  }

  /// "no pass is registered as 'x'" and `suggest(x)`.
  std::string unknown_pass_message(std::string_view name) const {
    return "no pass is registered as '" + std::string(name) + "'" + suggest(name);
  }

private:
  struct entry {
    factory make;
    std::type_index type;
  };
  mutable std::mutex mutex_;
  std::map<std::string, entry, std::less<>> entries_;
};

/// The design's `GetPass`: a new instance of the pass registered as `name` for `Module`.
template <module_like Module>
pass<Module> get_pass(std::string_view name) {
  try {
    return pass_registry<Module>::global().create(name);
  } catch (const usage_error& e) {
    throw usage_error(std::string("kiln::get_pass: ") + e.what());
  }
}

}  // namespace kiln
