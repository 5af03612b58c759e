// SPDX-License-Identifier: Apache-2.0
// The IR text parser: parse, then verify and print what parsed; a well-formed module must print
// to text that parses to a structurally equal module.
#include <kiln/ir/parser.hpp>
#include <kiln/ir/printer.hpp>
#include <kiln/ir/structural_equal.hpp>
#include <kiln/ir/verifier.hpp>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return kiln_fuzz::guarded([&] {
    const kiln::ir::ir_module m = kiln::ir::parse_module(kiln_fuzz::text(data, size));
    const bool well_formed = kiln::ir::verify(m).empty();
    const std::string printed = kiln::ir::print(m);
    if (!well_formed) return;
    const kiln::ir::ir_module again = kiln::ir::parse_module(printed);
    kiln_fuzz::fuzz_check(kiln::ir::structural_equal(m, again), "a printed well-formed module parses back equal");
  });
}
