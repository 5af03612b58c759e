// SPDX-License-Identifier: Apache-2.0
/// \file
/// `verify_ir`: runs the IR's verifier on the module given to the first pass and after every pass,
/// and names the pass that broke the IR.
///
/// Needs an IR whose `module_traits` define `verify` (kiln's reference IR does).
#pragma once

#include <kiln/pass/instrument.hpp>
#include <kiln/pass/module_traits.hpp>
#include <kiln/pass/pass_info.hpp>
#include <kiln/support/error.hpp>

#include <string>
#include <vector>

namespace kiln {

/// The module is not well formed after a pass (or was not before the first one).
class ir_verify_error : public error {
public:
  ir_verify_error(std::string pass, bool before, std::vector<std::string> problems)
      : error(format(pass, before, problems)), pass_(std::move(pass)), problems_(std::move(problems)) {}
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
    if (checked_input_) return;
    checked_input_ = true;
    if (auto problems = m.verify(); !problems.empty()) throw ir_verify_error(std::string(info.name), true, std::move(problems));
  }
  void run_after_pass(const module_view& m, const pass_info& info) {
    if (info.kind == pass_kind::sequential) return;  // its last pass was checked already
    ++verified_;
    if (auto problems = m.verify(); !problems.empty()) throw ir_verify_error(std::string(info.name), false, std::move(problems));
  }
  /// How many passes' results were verified.
  std::size_t verified() const noexcept { return verified_; }

private:
  bool checked_input_ = false;
  std::size_t verified_ = 0;
};

}  // namespace kiln
