// SPDX-License-Identifier: Apache-2.0
/// \file
/// `crash_reproducer`: when a pass fails, writes a file from which the failure can be replayed —
/// MLIR's `--mlir-pass-pipeline-crash-reproducer`, with its local form — and `replay_reproducer`,
/// which replays one.
///
/// The file is the module in the IR's text format (`module_traits<M>::print`) under a header of
/// `#` comment lines (kiln's IR text skips them) saying how the pipeline ran:
///
/// \code
/// # kiln crash reproducer: kiln-opt --replay FILE
/// # failed: pass 'fold_constant' failed: ...
/// # pipeline: kiln.simplify
/// # opt_level: 2
/// # required: a,b
/// # disabled: c
/// # config: kiln.fold_constant.max_bytes=1024
/// # verify_each: true
/// @I.ir_module
/// ...
/// \endcode
///
/// - The full form (the default) holds the module given to the outermost pass, and as the pipeline
///   the text given to the reproducer (or the outermost pass's name). Replaying it runs everything
///   again, up to the failure.
/// - The local form (`options::local`) holds the module given to the pass that failed, and that
///   pass alone as the pipeline: the smallest replay.
///
/// A failure is a pass's exception or a reported error; with `options::verify_each`, also a module
/// the IR's verifier rejects after a pass (the reproducer runs the verifier itself, and throws
/// `ir_verify_error` as `verify_ir` does; the replay verifies in the same way). The opt level,
/// required and disabled passes and config of the context are those it had when the reproducer
/// was made: make it after configuring the context. A config option whose type has no text form is
/// noted in the file as not reproducible.
///
/// The file is written once per failing run, before the error reaches the caller. If it cannot be
/// written, the failure still reaches the caller unchanged, and `write_error()` says why.
#pragma once

#include <kiln/pass/diagnostics.hpp>
#include <kiln/pass/instruments/verify_ir.hpp>
#include <kiln/pass/module_traits.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/pass_info.hpp>
#include <kiln/pass/pipeline.hpp>
#include <kiln/pass/registry.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/file.hpp>

#include <charconv>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

/// What a reproducer file says (see the file comment).
struct reproducer {
  std::string pipeline;
  int opt_level = 2;
  std::vector<std::string> required, disabled;
  std::vector<std::pair<std::string, std::string>> config;  ///< key, value as text
  bool verify_each = false;
  std::string failure;  ///< the error's message, as recorded (informational)
  std::string module;   ///< the module's text

  /// The file's text: the header, then the module.
  std::string to_text() const {
    std::string s = "# kiln crash reproducer: kiln-opt --replay FILE\n";
    std::istringstream lines(failure);
    std::string line;
    bool first = true;
    while (std::getline(lines, line)) {
      s.append(first ? "# failed: " : "#   ").append(line).append("\n");
      first = false;
    }
    s.append("# pipeline: ").append(pipeline).append("\n");
    s.append("# opt_level: ").append(std::to_string(opt_level)).append("\n");
    if (!required.empty()) s.append("# required: ").append(join(required)).append("\n");
    if (!disabled.empty()) s.append("# disabled: ").append(join(disabled)).append("\n");
    for (const auto& [key, value] : config) s.append("# config: ").append(key).append("=").append(value).append("\n");
    if (verify_each) s.append("# verify_each: true\n");
    s.append(module);
    if (!module.empty() && module.back() != '\n') s.append("\n");
    return s;
  }

  /// Reads a reproducer file's text: the header's settings, and the rest as the module. A
  /// `kiln::error` naming the line when the header is not one.
  static reproducer parse(std::string_view text) {
    reproducer r;
    std::size_t pos = 0, line_no = 0;
    bool seen_pipeline = false, seen_magic = false;
    auto fail = [&](const std::string& what) -> error {
      return error("kiln::reproducer::parse: line " + std::to_string(line_no) + ": " + what);
    };
    while (pos < text.size() && text[pos] == '#') {
      const std::size_t end = std::min(text.find('\n', pos), text.size());
      const std::string_view line = text.substr(pos, end - pos);
      ++line_no;
      pos = end + (end < text.size());
      if (!seen_magic) {
        if (line.rfind("# kiln crash reproducer", 0) != 0) throw fail("not a kiln crash reproducer (it must start with '# kiln crash reproducer')");
        seen_magic = true;
        continue;
      }
      const std::size_t colon = line.find(':');
      if (line.size() < 2 || line[1] != ' ' || colon == std::string_view::npos) continue;  // a continued message or another comment
      const std::string_view key = line.substr(2, colon - 2);
      std::string_view value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (key == "pipeline") {
        if (value.empty()) throw fail("the pipeline is empty");
        r.pipeline = std::string(value);
        seen_pipeline = true;
      } else if (key == "opt_level") {
        int level = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), level);
        if (ec != std::errc() || p != value.data() + value.size() || level < 0) throw fail("opt_level must be a number 0 or more, not '" + std::string(value) + "'");
        r.opt_level = level;
      } else if (key == "required" || key == "disabled") {
        auto& names = key == "required" ? r.required : r.disabled;
        for (std::size_t b = 0; b <= value.size();) {
          const std::size_t c = std::min(value.find(',', b), value.size());
          if (c > b) names.emplace_back(value.substr(b, c - b));
          b = c + 1;
        }
      } else if (key == "config") {
        const std::size_t eq = value.find('=');
        if (eq == std::string_view::npos || eq == 0) throw fail("a config line is 'key=value', not '" + std::string(value) + "'");
        r.config.emplace_back(std::string(value.substr(0, eq)), std::string(value.substr(eq + 1)));
      } else if (key == "verify_each") {
        if (value != "true" && value != "false") throw fail("verify_each must be true or false, not '" + std::string(value) + "'");
        r.verify_each = value == "true";
      } else if (key == "failed") {
        r.failure = std::string(value);
      }
      // Other "# key: value" lines are comments.
    }
    if (!seen_magic) throw error("kiln::reproducer::parse: line 1: not a kiln crash reproducer (it must start with '# kiln crash reproducer')");
    if (!seen_pipeline) throw error("kiln::reproducer::parse: the header has no '# pipeline:' line");
    r.module = std::string(text.substr(pos));
    return r;
  }

  /// A context as the failing run had it: opt level, required and disabled passes, config, and
  /// `verify_ir` when the run verified each pass. A `usage_error` for an unknown config key or a
  /// value its type cannot read.
  pass_context make_context() const {
    pass_context ctx(opt_level);
    for (const auto& n : required) ctx.require(n);
    for (const auto& n : disabled) ctx.disable(n);
    for (const auto& [key, value] : config) ctx.set_config_from_text(key, value);
    if (verify_each) ctx.set_instruments({instrument(verify_ir{})});
    return ctx;
  }

private:
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s.append(s.empty() ? "" : ",").append(x);
    return s;
  }
};

/// Replays a reproducer: parses its module with `parse` (`std::string_view -> Module`) and its
/// pipeline from `registry`, and runs it in the context it describes. Returns the result when the
/// failure no longer happens; otherwise the failure propagates, as it did.
template <module_like Module, class Parse>
Module replay_reproducer(const reproducer& r, Parse&& parse, const pass_registry<Module>& registry = pass_registry<Module>::global()) {
  const Module m = parse(std::string_view(r.module));
  const pass<Module> p = parse_pipeline<Module>(r.pipeline, registry);
  pass_context ctx = r.make_context();
  return p(m, ctx);
}

/// The instrument; see the file comment.
class crash_reproducer {
public:
  static constexpr std::string_view name = "crash_reproducer";

  struct options {
    std::string path{};         ///< where to write the file
    std::string pipeline{};     ///< the pipeline text (full form); empty: the outermost pass's name
    bool local = false;         ///< the failing pass and its input only
    bool verify_each = false;   ///< also a failure: a module the verifier rejects after a pass
  };

  /// Records `ctx`'s settings (opt level, names, config) for the file.
  crash_reproducer(options o, const pass_context& ctx) : options_(std::move(o)) {
    if (options_.path.empty()) throw usage_error("kiln::crash_reproducer: the file path is empty");
    settings_.opt_level = ctx.opt_level();
    settings_.required = ctx.required_passes();
    settings_.disabled = ctx.disabled_passes();
    for (auto& [key, text] : ctx.config_as_text()) {
      if (text) settings_.config.emplace_back(key, *text);
      else unreproducible_.push_back(key);
    }
    settings_.verify_each = options_.verify_each;
  }

  void enter_pass_ctx() { reset(); }

  void run_before_pass(const module_view& m, const pass_info& info) {
    if (inputs_.empty()) {  // the outermost pass: a new run
      outermost_ = std::string(info.name);
      failure_.clear();
      written_.clear();
      write_error_.clear();
    }
    // With the verifier, a failure is found after the pass, when its input is gone: keep a copy of
    // each input (for a handle-based IR, a reference count).
    inputs_.push_back(options_.verify_each ? m.copy() : module_copy());
  }

  void run_after_pass(const module_view& m, const pass_info& info) {
    module_copy input = pop();
    if (!options_.verify_each || info.kind == pass_kind::sequential || !m.verifiable()) return;
    std::vector<std::string> problems = m.verify();
    if (problems.empty()) return;
    ir_verify_error e(std::string(info.name), false, std::move(problems));
    failure_ = e.what();
    // An instrument's error ends the run without the enclosing passes' failed hooks: write now,
    // from this pass's input (local) or the outermost one (kept since the run began).
    if (options_.local) write(input.view(), std::string(info.name), failure_);
    else write(inputs_.empty() ? input.view() : inputs_.front().view(), pipeline_text(), failure_);
    inputs_.clear();
    throw e;
  }

  void run_after_pass_failed(const module_view& m, const pass_info& info, const pass_error& e) {
    (void)pop();
    if (failure_.empty()) {  // the pass that failed (its enclosing pipelines are told after it)
      failure_ = e.what();
      if (options_.local) write(m, std::string(info.name), failure_);
    }
    if (!options_.local && inputs_.empty()) write(m, pipeline_text(), failure_);  // the outermost pass's input
  }

  void exit_pass_ctx() { reset(); }

  /// Forgets the passes running now: for a context reused after a run that another instrument's
  /// error ended before one of its passes was told (the reproducer counts passes to tell the
  /// outermost one; entering a `pass_context_scope` resets it too).
  void reset() {
    inputs_.clear();
    failure_.clear();
  }

  /// The file written by the last failing run (empty when none was).
  const std::string& written() const noexcept { return written_; }
  /// Why the file could not be written (empty when it was, or nothing failed).
  const std::string& write_error() const noexcept { return write_error_; }
  /// Config options of the context the file cannot hold (types without a text form).
  const std::vector<std::string>& unreproducible_config() const noexcept { return unreproducible_; }

private:
  module_copy pop() {
    if (inputs_.empty()) return {};
    module_copy c = std::move(inputs_.back());
    inputs_.pop_back();
    return c;
  }
  std::string pipeline_text() const { return options_.pipeline.empty() ? outermost_ : options_.pipeline; }

  void write(const module_view& m, std::string pipeline, const std::string& failure) {
    reproducer r = settings_;
    r.pipeline = std::move(pipeline);
    r.failure = failure;
    for (const auto& key : unreproducible_) r.failure.append("\n(config option '" + key + "' has no text form: not reproduced)");
    try {
      r.module = m.to_string();
      detail::write_file(options_.path, r.to_text(), "kiln::crash_reproducer");
      written_ = options_.path;
      write_error_.clear();
    } catch (const std::exception& x) {  // the pass's failure is what the caller must see
      write_error_ = x.what();
    }
  }

  options options_;
  reproducer settings_;
  std::vector<std::string> unreproducible_;
  std::vector<module_copy> inputs_;  // one per pass running now, outermost first
  std::string outermost_, failure_, written_, write_error_;
};

}  // namespace kiln
