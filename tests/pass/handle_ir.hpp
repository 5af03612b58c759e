// SPDX-License-Identifier: Apache-2.0
/// \file
/// A second tiny IR for the pass-infrastructure tests, whose functions are shared, immutable
/// objects (as in kiln's IR, TVM's or any IR of reference-counted nodes): what cached analyses key
/// their results on. A module is a shared list of named functions, each holding a string.
#pragma once

#include <kiln/pass/analysis.hpp>
#include <kiln/pass/module_traits.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace handle {

struct function_node {
  std::string body;
};
using function = std::shared_ptr<const function_node>;

struct module {
  using list = std::vector<std::pair<std::string, function>>;
  std::shared_ptr<const list> functions = std::make_shared<const list>();

  module() = default;
  explicit module(list fns) : functions(std::make_shared<const list>(std::move(fns))) {}

  /// The function named `name` (null when there is none).
  function get(std::string_view name) const {
    for (const auto& [n, f] : *functions)
      if (n == name) return f;
    return nullptr;
  }
};

inline function make_function(std::string body) { return std::make_shared<const function_node>(function_node{std::move(body)}); }

/// A function analysis for the tests: the length of the body. Counts its runs (from any thread).
struct body_length {
  static constexpr std::string_view name = "body_length";
  static inline std::atomic<int> runs{0};
  std::size_t run(const function& f) const {
    ++runs;
    return f->body.size();
  }
};

/// Functions f0..f(n-1) with bodies "b0".."b(n-1)".
inline module make_module(int n) {
  module::list fns;
  for (int i = 0; i < n; ++i) fns.emplace_back("f" + std::to_string(i), make_function("b" + std::to_string(i)));
  return module(std::move(fns));
}

}  // namespace handle

template <>
struct kiln::module_traits<handle::module> {
  using function_type = handle::function;
  static constexpr std::string_view ir_name = "handle";

  template <class Fn>
  static handle::module map_functions(const handle::module& m, Fn&& fn) {
    handle::module::list out;
    bool changed = false;
    for (const auto& [name, f] : *m.functions) {
      out.emplace_back(name, fn(std::string_view(name), f));
      changed |= out.back().second != f;
    }
    return changed ? handle::module(std::move(out)) : m;
  }
  static bool skip_optimization(const handle::function&) { return false; }
  static bool same(const handle::module& a, const handle::module& b) { return a.functions == b.functions; }
  static void print(std::ostream& os, const handle::module& m) {
    os << "handle {";
    for (const auto& [name, f] : *m.functions) os << " " << name << "=" << f->body;
    os << " }";
  }
  /// Well formed: no function has an empty body.
  static std::vector<std::string> verify(const handle::module& m) {
    std::vector<std::string> problems;
    for (const auto& [name, f] : *m.functions)
      if (f->body.empty()) problems.push_back("function '" + name + "' has an empty body");
    return problems;
  }
};

namespace handle {
/// Reads what `print` writes (`handle { f0=b0 f1=b1 }`), after any `#` comment lines; a
/// std::invalid_argument when it is not that.
inline module parse(std::string_view text) {
  while (!text.empty() && text.front() == '#') {
    const std::size_t end = text.find('\n');
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  std::istringstream in{std::string(text)};
  std::string word;
  if (!(in >> word) || word != "handle" || !(in >> word) || word != "{") throw std::invalid_argument("handle::parse: expected 'handle {'");
  module::list fns;
  while (in >> word && word != "}") {
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("handle::parse: expected name=body, got '" + word + "'");
    fns.emplace_back(word.substr(0, eq), make_function(word.substr(eq + 1)));
  }
  if (word != "}") throw std::invalid_argument("handle::parse: expected '}'");
  return module(std::move(fns));
}
}  // namespace handle

/// A module is known by its list (a module has no get() of its own): the customisation point
/// the analysis cache offers.
template <>
struct kiln::analysis_unit_identity<handle::module> {
  static const void* of(const handle::module& m) noexcept { return m.functions.get(); }
};
