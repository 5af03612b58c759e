// SPDX-License-Identifier: Apache-2.0
// The compiler on parsed IR: a module that parses either compiles or is refused with a kiln error.
#include <kiln/compile.hpp>
#include <kiln/ir/parser.hpp>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;  // keep each compilation short
  return kiln_fuzz::guarded([&] {
    const kiln::ir::ir_module m = kiln::ir::parse_module(kiln_fuzz::text(data, size));
    (void)kiln::compile(m);
  });
}
