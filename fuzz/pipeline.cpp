// SPDX-License-Identifier: Apache-2.0
// The pipeline text parser over the registry of kiln's compiler passes.
#include <kiln/pass/pipeline.hpp>
#include <kiln/transform/default_pipeline.hpp>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::transform::register_passes();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return kiln_fuzz::guarded([&] { (void)kiln::parse_pipeline<kiln::ir::ir_module>(kiln_fuzz::text(data, size)); });
}
