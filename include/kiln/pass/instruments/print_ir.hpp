// SPDX-License-Identifier: Apache-2.0
/// \file
/// `print_ir`: prints the module around passes (the design's PrintIRBefore / PrintAfter, which it
/// lists as TODO), filtered by pass name, with a print-after-change mode that prints only when a
/// pass changed the module and otherwise one line saying it did not.
///
/// \code
/// auto printer = std::make_shared<kiln::print_ir>(std::cerr, kiln::print_ir::after_change, {"fuse_ops"});
/// ctx.set_instruments({printer});
/// \endcode
#pragma once

#include <kiln/pass/instrument.hpp>
#include <kiln/pass/module_traits.hpp>
#include <kiln/pass/pass_info.hpp>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {

class print_ir {
public:
  static constexpr std::string_view name = "print_ir";

  enum mode : unsigned {
    before = 1,        ///< the module each pass receives
    after = 2,         ///< the module each pass returns
    after_change = 4,  ///< the module a pass returns, only when it changed it
    full_text = 8,     ///< every constant in full (`module_view::print`); by default the IR's
                       ///< readable form (`module_view::print_readable`: large constants elided)
  };

  /// Prints to `out` (which must outlive the instrument) in `modes` (a set of `mode` bits), for
  /// the passes named in `only` (all passes when empty). Pipelines themselves are printed only when
  /// named in `only`.
  explicit print_ir(std::ostream& out, unsigned modes = after, std::vector<std::string> only = {})
      : out_(&out), modes_(modes), only_(std::move(only)) {}

  void run_before_pass(const module_view& m, const pass_info& info) {
    if (!selected(info)) return;
    if (modes_ & after_change) before_.push_back(m);  // alive until the matching after hook
    if (modes_ & before) print("before", m, info);
  }
  void run_after_pass(const module_view& m, const pass_info& info) {
    if (!selected(info)) return;
    if (modes_ & after) print("after", m, info);
    if (modes_ & after_change) {
      const module_view in = before_.back();
      before_.pop_back();
      if (in.same_as(m))
        *out_ << "// pass '" << info.name << "' did not change the module\n";
      else if (!(modes_ & after))
        print("after", m, info);
    }
  }
  void run_after_pass_failed(const module_view&, const pass_info& info, const pass_error&) {
    if (selected(info) && (modes_ & after_change)) before_.pop_back();
  }

private:
  bool selected(const pass_info& info) const {
    if (only_.empty()) return info.kind != pass_kind::sequential;
    return std::find(only_.begin(), only_.end(), info.name) != only_.end();
  }
  void print(const char* when, const module_view& m, const pass_info& info) {
    *out_ << "// IR " << when << " " << to_string(info.kind) << " '" << info.name << "'\n";
    if (modes_ & full_text)
      m.print(*out_);
    else
      m.print_readable(*out_);
    *out_ << "\n";
  }

  std::ostream* out_;
  unsigned modes_;
  std::vector<std::string> only_;
  std::vector<module_view> before_;
};

}  // namespace kiln
