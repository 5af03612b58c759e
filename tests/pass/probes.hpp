// SPDX-License-Identifier: Apache-2.0
// Probe passes and instruments for the pass-infrastructure tests: each logs what happens to it
// in `trace()`, so a test states the expected call sequence as a list of strings.
#pragma once

#include "../common/message_of.hpp"
#include "toy_ir.hpp"

#include <kiln/pass/make_pass.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/sequential.hpp>

#include <string>
#include <vector>

namespace kiln_test {

/// What happened, in order, on this thread.
inline std::vector<std::string>& trace() {
  thread_local std::vector<std::string> t;
  return t;
}
/// The trace so far, then cleared.
inline std::vector<std::string> take_trace() {
  auto t = std::move(trace());
  trace().clear();
  return t;
}

/// A module pass that logs its name and appends a function named after itself.
template <kiln::fixed_string Name, int OptLevel = 0, class Required = kiln::pass_list<>>
struct module_probe {
  static constexpr std::string_view name = Name.view();
  static constexpr int opt_level = OptLevel;
  using required = Required;
  toy::module operator()(const toy::module& m, kiln::pass_context&) const {
    trace().push_back(std::string(name));
    return m.with({std::string(name), 0, false});
  }
};

/// A function pass that logs `name:function` and adds `Step` to each function's value.
template <kiln::fixed_string Name, int OptLevel = 0, class Required = kiln::pass_list<>, long Step = 1>
struct function_probe {
  static constexpr std::string_view name = Name.view();
  static constexpr int opt_level = OptLevel;
  using required = Required;
  toy::function operator()(const toy::function& f, const toy::module&, kiln::pass_context&) const {
    trace().push_back(std::string(name) + ":" + f.name);
    toy::function g = f;
    g.value += Step;
    return g;
  }
};

/// A module pass that reports an error through the context (or throws, when `Throws`).
template <kiln::fixed_string Name, bool Throws = false>
struct failing_probe {
  static constexpr std::string_view name = Name.view();
  toy::module operator()(const toy::module& m, kiln::pass_context& ctx) const {
    trace().push_back(std::string(name));
    ctx.warning("looked at it", "@f0");
    if constexpr (Throws) throw std::runtime_error("boom");
    ctx.error("cannot fold this", "@f1");
    return m.with({"half-done", 0, false});
  }
};

/// An instrument with every hook, logging `label.hook(pass)`.
struct logging_instrument {
  std::string label;
  void enter_pass_ctx() { trace().push_back(label + ".enter"); }
  void exit_pass_ctx() { trace().push_back(label + ".exit"); }
  bool should_run(const kiln::module_view&, const kiln::pass_info& info) {
    trace().push_back(label + ".should_run(" + std::string(info.name) + ")");
    return true;
  }
  void run_before_pass(const kiln::module_view&, const kiln::pass_info& info) {
    trace().push_back(label + ".before(" + std::string(info.name) + ")");
  }
  void run_after_pass(const kiln::module_view&, const kiln::pass_info& info) {
    trace().push_back(label + ".after(" + std::string(info.name) + ")");
  }
  void run_before_skipped_pass(const kiln::module_view&, const kiln::pass_info& info, kiln::skip_reason why) {
    trace().push_back(label + ".skipped(" + std::string(info.name) + ", " + std::string(kiln::to_string(why)) + ")");
  }
  void run_after_pass_failed(const kiln::module_view&, const kiln::pass_info& info, const kiln::pass_error&) {
    trace().push_back(label + ".failed(" + std::string(info.name) + ")");
  }
};

using strings = std::vector<std::string>;

}  // namespace kiln_test
