// SPDX-License-Identifier: Apache-2.0
/// \file
/// `pass_registry<Module>`: passes by name, the design's pass registration and `GetPass`.
///
/// \code
/// kiln::pass_registry<ir::ir_module>::global().add<fold_constant>();   // also registers what it requires
/// kiln::pass<ir::ir_module> p = kiln::get_pass<ir::ir_module>("fold_constant");
/// \endcode
///
/// A pass may also be registered under other names (`add_alias`): kiln registers TVM's names
/// for its passes this way (`FoldConstant`, `FuseOps`, ...), so that `get_pass`, pipeline text
/// and Python find them under either. Run-time pipelines (`pipeline.hpp`) look requirements up
/// here by name.
#pragma once

#include <kiln/pass/pass_info.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <typeindex>
#include <utility>
#include <vector>

namespace kiln {

template <module_like Module>
class pass;  // erased_pass.hpp

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

  /// Registers `alias` as another name of the pass registered as `target` (registered already, or
  /// later): `create(alias)` makes that pass, whose own name stays `target`. Registering the same
  /// alias again for the same target does nothing; an alias already taken is a `usage_error`.
  pass_registry& add_alias(std::string alias, std::string target) {
    if (!is_valid_pass_name(alias))
      throw usage_error("kiln::pass_registry::add_alias: '" + alias + "' is not a valid pass name (letters, digits, '_', '.' and '-' only)");
    std::lock_guard lock(mutex_);
    if (entries_.contains(alias)) throw usage_error("kiln::pass_registry::add_alias: a pass is already registered as '" + alias + "'");
    auto [it, inserted] = aliases_.try_emplace(std::move(alias), target);
    if (!inserted && it->second != target)
      throw usage_error("kiln::pass_registry::add_alias: '" + it->first + "' already names '" + it->second + "', not '" + target + "'");
    return *this;
  }

  /// Every alias and the name it stands for, sorted by alias.
  std::vector<std::pair<std::string, std::string>> aliases() const {
    std::lock_guard lock(mutex_);
    return {aliases_.begin(), aliases_.end()};
  }

  /// The registered name `name` stands for: itself, or the pass an alias names.
  std::string canonical_name(std::string_view name) const {
    std::lock_guard lock(mutex_);
    auto a = aliases_.find(name);
    return a == aliases_.end() ? std::string(name) : a->second;
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
    if (auto a = aliases_.find(name); a != aliases_.end())
      throw usage_error("kiln::pass_registry::add: '" + name + "' is already an alias of '" + a->second + "'");
    auto [it, inserted] = entries_.try_emplace(std::move(name), entry{std::move(make), type});
    if (!inserted && (type == typeid(void) || it->second.type != std::type_index(type)))
      throw usage_error("kiln::pass_registry::add: a different pass is already registered as '" + it->first + "'");
    return inserted;
  }

public:
  /// True when `name` is a registered pass or an alias of one.
  bool contains(std::string_view name) const {
    std::lock_guard lock(mutex_);
    if (auto a = aliases_.find(name); a != aliases_.end()) name = a->second;
    return entries_.find(name) != entries_.end();
  }

  /// Every registered name, sorted (aliases not included; see `aliases`).
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
      std::string_view key = name;
      if (auto a = aliases_.find(name); a != aliases_.end()) key = a->second;
      auto it = entries_.find(key);
      if (it != entries_.end()) make = it->second.make;
    }
    if (!make) throw usage_error(unknown_pass_message(name));
    return make();
  }

  /// " (did you mean 'y'?)" for the registered names close to `name`, or, when none is,
  /// "; registered passes: a, b, c".
  std::string suggest(std::string_view name) const {
    std::vector<std::string> all = names();
    std::vector<std::string> other_names;  // TVM's names and other aliases
    for (auto& [alias, target] : aliases()) other_names.push_back(alias);
    // A CamelCase name is looked for among TVM's names first, another among kiln's.
    const bool camel = !name.empty() && name[0] >= 'A' && name[0] <= 'Z';
    std::string hint = detail::did_you_mean(name, camel ? other_names : all);
    if (hint.empty()) hint = detail::did_you_mean(name, camel ? all : other_names);
    if (!hint.empty()) return hint;
    hint = all.empty() ? "; no passes are registered" : "; registered passes: ";
    for (std::size_t i = 0; i < all.size(); ++i) hint.append(i ? ", " : "").append(all[i]);
    return hint;
  }

  /// The registered passes (not pipelines) whose `establishes` lists `property`, sorted; for the
  /// message that says which pass a pipeline is missing.
  std::vector<std::string> establishing(std::string_view property) const {
    std::vector<std::string> out;
    for (const std::string& n : names()) {
      const pass<Module> p = create(n);
      if (p.info().kind == pass_kind::sequential) continue;
      for (const property_check& e : p.info().establishes)
        if (e.name == property) out.push_back(n);
    }
    return out;
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
  std::map<std::string, std::string, std::less<>> aliases_;  // alias -> registered name
};

/// A listing of `registry` for people (`kiln-opt --list-passes`, MLIR's `--help`): each pass with
/// its other names, kind, opt level, description, and the properties it needs, establishes and
/// invalidates; then each pipeline with its steps.
template <module_like Module>
std::string describe_passes(const pass_registry<Module>& registry = pass_registry<Module>::global()) {
  std::map<std::string, std::vector<std::string>, std::less<>> other_names;
  for (auto& [alias, target] : registry.aliases()) other_names[target].push_back(alias);
  auto props = [](std::span<const property_check> list) {
    std::string s;
    for (const property_check& p : list) s.append(s.empty() ? "" : ", ").append(p.name);
    return s;
  };
  std::string passes, pipelines;
  for (const std::string& name : registry.names()) {
    const pass<Module> p = registry.create(name);
    const pass_info& info = p.info();
    std::string entry = "  " + name;
    if (auto it = other_names.find(name); it != other_names.end()) {
      entry.append(" (also ");
      for (std::size_t i = 0; i < it->second.size(); ++i) entry.append(i ? ", " : "").append(it->second[i]);
      entry.append(")");
    }
    entry.append(": ").append(to_string(info.kind)).append(", opt level ").append(std::to_string(info.opt_level)).append("\n");
    if (info.kind == pass_kind::sequential) {
      entry.append("      ").append(p.text()).append("\n");
    } else if (!info.description.empty()) {
      entry.append("      ").append(info.description).append("\n");
    }
    if (!info.required.empty()) {
      entry.append("      requires: ");
      for (std::size_t i = 0; i < info.required.size(); ++i) entry.append(i ? ", " : "").append(info.required[i]);
      entry.append("\n");
    }
    if (!info.needs.empty()) entry.append("      needs: ").append(props(info.needs)).append("\n");
    if (!info.establishes.empty()) entry.append("      establishes: ").append(props(info.establishes)).append("\n");
    if (!info.invalidates.empty()) entry.append("      invalidates: ").append(props(info.invalidates)).append("\n");
    (info.kind == pass_kind::sequential ? pipelines : passes).append(entry);
  }
  std::string out;
  if (!passes.empty()) out.append("Passes:\n").append(passes);
  if (!pipelines.empty()) out.append(out.empty() ? "" : "\n").append("Pipelines:\n").append(pipelines);
  return out;
}

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
