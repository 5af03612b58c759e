// SPDX-License-Identifier: Apache-2.0
// The ONNX importer: bytes that import give a module that verifies and compiles, or a kiln error.
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/ir/verifier.hpp>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return kiln_fuzz::guarded([&] {
    const kiln::ir::ir_module m = kiln::frontend::onnx::import_bytes(kiln_fuzz::bytes(data, size));
    kiln_fuzz::fuzz_check(kiln::ir::verify(m).empty(), "an imported module is well formed");
    (void)kiln::compile(m);
  });
}
