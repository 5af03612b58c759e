// SPDX-License-Identifier: Apache-2.0
/// \file
/// `verify_ir`: runs the IR's verifier on the module given to the first pass and after every pass,
/// and names the pass that broke the IR. It also checks IR properties (`property.hpp`) that have a
/// checker: before a pass, those it needs; after it, those it establishes.
///
/// Needs an IR whose `module_traits` define `verify` (kiln's reference IR does).
#pragma once

#include <kiln/pass/instrument.hpp>
#include <kiln/pass/module_traits.hpp>
#include <kiln/pass/pass_info.hpp>
#include <kiln/support/error.hpp>

#include <span>
#include <string>
#include <vector>

namespace kiln {

/// The module is not well formed after a pass (or was not before the first one).
class ir_verify_error : public error {
public:
  ir_verify_error(std::string pass, bool before, std::vector<std::string> problems)
      : error(format(pass, before, problems)), pass_(std::move(pass)), problems_(std::move(problems)) {}
  /// A property check that failed, with its message.
  ir_verify_error(std::string pass, std::vector<std::string> problems, const std::string& message)
      : error(message), pass_(std::move(pass)), problems_(std::move(problems)) {}
  /// The pass after which the module was found broken (before which, for an input that was
  /// already broken).
  const std::string& pass_name() const noexcept { return pass_; }
  const std::vector<std::string>& problems() const noexcept { return problems_; }

private:
  static std::string format(const std::string& pass, bool before, const std::vector<std::string>& problems) {
    std::string s = before ? "kiln::verify_ir: the module given to the pipeline is not well formed (found before pass '" + pass + "'):"
                           : "kiln::verify_ir: pass '" + pass + "' left the module not well formed:";
    for (const auto& p : problems) s.append("\n  ").append(p);
    return s;
  }
  std::string pass_;
  std::vector<std::string> problems_;
};

class verify_ir {
public:
  static constexpr std::string_view name = "verify_ir";

  void enter_pass_ctx() { checked_input_ = false; }
  void run_before_pass(const module_view& m, const pass_info& info) {
    if (!checked_input_) {
      checked_input_ = true;
      if (auto problems = m.verify(); !problems.empty()) throw ir_verify_error(std::string(info.name), true, std::move(problems));
    }
    check_properties(m, info, info.needs, "needs property '", "', which does not hold before it:");
  }
  void run_after_pass(const module_view& m, const pass_info& info) {
    if (info.kind == pass_kind::sequential) return;  // its last pass was checked already
    ++verified_;
    if (auto problems = m.verify(); !problems.empty()) throw ir_verify_error(std::string(info.name), false, std::move(problems));
    check_properties(m, info, info.establishes, "establishes property '", "', which does not hold after it:");
  }
  /// How many passes' results were verified.
  std::size_t verified() const noexcept { return verified_; }

private:
  static void check_properties(const module_view& m, const pass_info& info, std::span<const property_check> props, const char* what,
                               const char* fails) {
    for (const property_check& p : props) {
      if (!p.check) continue;
      std::vector<std::string> problems = p.check(m);
      if (problems.empty()) continue;
      std::string msg = "kiln::verify_ir: pass '" + std::string(info.name) + "' " + what + std::string(p.name) + fails;
      for (const auto& x : problems) msg.append("\n  ").append(x);
      throw ir_verify_error(std::string(info.name), std::move(problems), std::move(msg));
    }
  }

  bool checked_input_ = false;
  std::size_t verified_ = 0;
};

}  // namespace kiln
