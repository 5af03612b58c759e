// SPDX-License-Identifier: Apache-2.0
/// \file
/// `print_ir_pass`: the design's PrintIR pass (`tvm.transform.PrintIR`): opt level 0, prints the
/// module it is given and returns it unchanged. Placed between passes it shows the IR there without
/// an instrument (the `print_ir` instrument prints around every pass, or those it names).
///
/// \code
/// using debug = kiln::sequential<fold_constant, kiln::print_ir_pass, dead_code_elimination>;
/// kiln::pass<ir::ir_module> p = kiln::print_ir_pass(std::cout, "after folding");
/// \endcode
///
/// Its pass name is TVM's, `PrintIR`, so `parse_pipeline("fold_constant,PrintIR")` works where it
/// is registered (kiln's compiler registers it with its passes).
#pragma once

#include <kiln/pass/analysis.hpp>
#include <kiln/pass/module_traits.hpp>

#include <iostream>
#include <ostream>
#include <string>
#include <utility>

namespace kiln {

class print_ir_pass {
public:
  static constexpr std::string_view name = "PrintIR";
  static constexpr std::string_view description = "Prints the module to standard error and returns it unchanged (TVM's PrintIR).";
  static constexpr int opt_level = 0;
  using preserves = preserves_all;  // it returns the module it was given

  /// Prints to standard error, as TVM's (which logs), with no header.
  print_ir_pass() = default;
  /// Prints to `out` (which must outlive the pass), after the line `// PrintIR(header):`.
  explicit print_ir_pass(std::ostream& out, std::string header = {}) : out_(&out), header_(std::move(header)) {}

  template <module_like Module>
  Module operator()(const Module& m) const {
    *out_ << "// PrintIR(" << header_ << "):\n";
    print_readable_of(*out_, m);
    out_->flush();
    return m;
  }

  const std::string& header() const noexcept { return header_; }

private:
  std::ostream* out_ = &std::cerr;
  std::string header_;
};

}  // namespace kiln
