// SPDX-License-Identifier: Apache-2.0
// Pass tests in the style of MLIR's: IR text in, run the pass, compare the printed IR with the
// expected text. The output must also be well formed and print and parse back to itself.
#pragma once

#include <kiln/ir/ir.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>

namespace kiln_test {

namespace ir = kiln::ir;

/// The module as text, without the printer's "# kiln IR" header line.
inline std::string text_of(const ir::ir_module& m) {
  std::string s = ir::print(m);
  if (s.rfind("# kiln IR\n", 0) == 0) s.erase(0, 10);
  return s;
}

/// The IR `pass` makes of `input`, as text; checks that it is well formed and round-trips.
template <class Pass>
std::string after(Pass pass, std::string_view input) {
  const ir::ir_module in = ir::parse_module(input);
  const ir::ir_module out = kiln::run(pass, in);
  for (const ir::diagnostic& d : ir::verify(out)) FAIL_CHECK("not well formed after the pass: " << d.to_string());
  const std::string text = text_of(out);
  CHECK(text_of(ir::parse_module(text)) == text);
  return text;
}

/// True when `text` contains `part` (the message shows both when it does not).
inline bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace kiln_test
