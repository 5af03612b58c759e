// SPDX-License-Identifier: Apache-2.0
/// \file
/// `bisect_limit`: runs only the first N passes and skips the rest, reporting which pass was the
/// N-th, to find the pass that breaks a program by bisecting N (LLVM's -opt-bisect-limit).
///
/// Passes are counted in the order they would run; pipelines are not counted (their passes are).
/// Like every `should_run`, it is not consulted for passes the context requires by name.
#pragma once

#include <kiln/pass/instrument.hpp>
#include <kiln/pass/pass_info.hpp>

#include <ostream>
#include <string>

namespace kiln {

class bisect_limit {
public:
  static constexpr std::string_view name = "bisect_limit";

  /// Runs passes 1..`limit`; with `log`, writes one line per pass: `BISECT: running pass (3) fold`
  /// or `BISECT: NOT running pass (4) fuse_ops`.
  explicit bisect_limit(std::size_t limit, std::ostream* log = nullptr) : limit_(limit), log_(log) {}

  skip_reason should_run(const pass_info& info) {
    if (info.kind == pass_kind::sequential) return skip_reason::none;
    const std::size_t k = ++seen_;
    const bool runs = k <= limit_;
    if (runs) last_ = std::string(info.name);
    if (log_) *log_ << "BISECT: " << (runs ? "running" : "NOT running") << " pass (" << k << ") " << info.name << "\n";
    return runs ? skip_reason::none : skip_reason::bisect_limit;
  }

  std::size_t limit() const noexcept { return limit_; }
  /// How many passes have asked so far (the limit to give to run everything).
  std::size_t passes_seen() const noexcept { return seen_; }
  /// The last pass allowed to run: the N-th, once N passes have asked (empty if none ran).
  const std::string& last_run() const noexcept { return last_; }
  void reset() {
    seen_ = 0;
    last_.clear();
  }

private:
  std::size_t limit_;
  std::ostream* log_;
  std::size_t seen_ = 0;
  std::string last_;
};

}  // namespace kiln
