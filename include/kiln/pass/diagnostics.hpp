// SPDX-License-Identifier: Apache-2.0
/// \file
/// Diagnostics that passes report through the `pass_context`, and `pass_error`, the exception a
/// failing pass surfaces as.
#pragma once

#include <kiln/support/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class severity : std::uint8_t { note, warning, error };

constexpr std::string_view to_string(severity s) noexcept {
  switch (s) {
    case severity::note: return "note";
    case severity::warning: return "warning";
    case severity::error: return "error";
  }
  return "diagnostic";
}

/// One message a pass reported: its severity, the pass (filled in by the pipeline), where in the
/// module (a function name, a binding; free text, may be empty) and the message.
struct diagnostic {
  kiln::severity severity = severity::error;
  std::string pass;
  std::string where;
  std::string message;

  /// `error in 'fold_constant' at @main: message`
  std::string to_string() const {
    std::string s(kiln::to_string(severity));
    if (!pass.empty()) s.append(" in '").append(pass).append("'");
    if (!where.empty()) s.append(" at ").append(where);
    return s.append(": ").append(message);
  }
};

/// A pass failed: it threw, or it reported an error through the context. Names the pass and the
/// pipelines it ran in, carries the diagnostics it reported, and says why. The module given to the
/// pipeline is untouched.
class pass_error : public error {
public:
  pass_error(std::string pass, std::string reason, std::vector<diagnostic> diagnostics)
      : error(""), pass_(std::move(pass)), reason_(std::move(reason)), diagnostics_(std::move(diagnostics)) {
    compose();
  }

  const char* what() const noexcept override { return message_.c_str(); }
  /// The pass that failed.
  const std::string& pass_name() const noexcept { return pass_; }
  /// The pipelines around it, outermost first (empty when the pass ran on its own).
  const std::vector<std::string>& pipeline() const noexcept { return pipeline_; }
  /// What went wrong: the first error the pass reported, or what the exception it threw said.
  const std::string& reason() const noexcept { return reason_; }
  /// Everything the pass reported while it ran, in order.
  const std::vector<diagnostic>& diagnostics() const noexcept { return diagnostics_; }

  /// Records that the failing pass ran inside the pipeline `name` (called as the error leaves it).
  void add_pipeline(std::string_view name) {
    pipeline_.insert(pipeline_.begin(), std::string(name));
    compose();
  }

private:
  void compose() {
    message_ = "kiln: pass '" + pass_ + "'";
    if (!pipeline_.empty()) {
      message_ += " (in ";
      for (std::size_t i = 0; i < pipeline_.size(); ++i) message_.append(i ? " > '" : "'").append(pipeline_[i]).append("'");
      message_ += ")";
    }
    message_.append(" failed: ").append(reason_);
    for (const diagnostic& d : diagnostics_) message_.append("\n  ").append(d.to_string());
  }

  std::string pass_;
  std::string reason_;
  std::vector<diagnostic> diagnostics_;
  std::vector<std::string> pipeline_;
  std::string message_;
};

}  // namespace kiln
