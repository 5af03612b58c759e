// SPDX-License-Identifier: Apache-2.0
/// \file
/// A tiny IR that is not kiln's: a module is a shared, immutable list of named functions holding
/// one integer each. It models `kiln::module_like` in a few lines, to prove that a user's compiler
/// can plug its own IR into kiln's pass infrastructure.
#pragma once

#include <kiln/pass/module_traits.hpp>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace toy {

struct function {
  std::string name;
  long value = 0;
  bool skip = false;  ///< the toy IR's SkipOptimization
  friend bool operator==(const function&, const function&) = default;
};

struct module {
  std::shared_ptr<const std::vector<function>> functions = std::make_shared<const std::vector<function>>();

  module() = default;
  explicit module(std::vector<function> fns) : functions(std::make_shared<const std::vector<function>>(std::move(fns))) {}

  /// The value of function `name` (-1 when there is none).
  long value(std::string_view name) const {
    for (const auto& f : *functions)
      if (f.name == name) return f.value;
    return -1;
  }
  module with(function f) const {
    auto fns = *functions;
    fns.push_back(std::move(f));
    return module(std::move(fns));
  }
};

/// `n` functions f0..f(n-1) with values 0..n-1.
inline module make_module(int n) {
  std::vector<function> fns;
  for (int i = 0; i < n; ++i) fns.push_back({"f" + std::to_string(i), i, false});
  return module(std::move(fns));
}

}  // namespace toy

template <>
struct kiln::module_traits<toy::module> {
  using function_type = toy::function;
  static constexpr std::string_view ir_name = "toy";

  template <class Fn>
  static toy::module map_functions(const toy::module& m, Fn&& fn) {
    std::vector<toy::function> out;
    bool changed = false;
    out.reserve(m.functions->size());
    for (const auto& f : *m.functions) {
      out.push_back(fn(std::string_view(f.name), f));
      changed |= !(out.back() == f);
    }
    return changed ? toy::module(std::move(out)) : m;
  }
  static bool skip_optimization(const toy::function& f) { return f.skip; }
  static bool same(const toy::module& a, const toy::module& b) { return a.functions == b.functions; }
  static std::size_t structural_hash(const toy::module& m) {
    std::size_t h = 0;
    for (const auto& f : *m.functions) h = h * 1000003u ^ std::hash<std::string>{}(f.name) ^ std::hash<long>{}(f.value);
    return h;
  }
  static void print(std::ostream& os, const toy::module& m) {
    os << "toy {";
    for (const auto& f : *m.functions) os << " " << f.name << "=" << f.value;
    os << " }";
  }
};
