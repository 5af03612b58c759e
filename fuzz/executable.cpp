// SPDX-License-Identifier: Apache-2.0
// The executable loader: bytes that load make a virtual machine (with kiln's kernels), and each
// function that can only run forward (no backward Goto: no loop the fuzzer would take for a hang)
// is invoked with float32 scalars for its arguments; it returns or raises a kiln error. A loaded
// executable serializes to bytes that load to an equal one.
#include <kiln/vm/kernels.hpp>
#include <kiln/vm/serialize.hpp>
#include <kiln/vm/virtual_machine.hpp>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return kiln_fuzz::guarded([&] {
    const kiln::vm::executable e = kiln::vm::deserialize(kiln_fuzz::bytes(data, size));
    kiln_fuzz::fuzz_check(kiln::vm::serialize(kiln::vm::deserialize(kiln::vm::serialize(e))) == kiln::vm::serialize(e),
                          "a loaded executable serializes to bytes that load to the same executable");
    kiln::vm::vm_options options;
    options.max_call_depth = 64;  // recursion ends quickly
    kiln::vm::virtual_machine machine(e, options, kiln::vm::kernel_registry());
    for (const kiln::vm::function_info& f : e.functions) {
      if (f.kind != kiln::vm::function_kind::bytecode || f.num_args > 16) continue;
      bool loops = false;
      for (std::int64_t i = f.start_instr; i < f.end_instr; ++i) {
        const kiln::vm::instruction in = e.at(std::size_t(i));
        loops |= (in.op == kiln::vm::opcode::goto_ && in.pc_offset <= 0) || (in.op == kiln::vm::opcode::if_ && in.false_offset <= 0);
      }
      if (loops) continue;
      std::vector<kiln::vm::value> args;
      for (std::int64_t a = 0; a < f.num_args; ++a) args.emplace_back(kiln::runtime::tensor::from_values<float>({}, {1.0f}));
      try {
        (void)machine.invoke_span(f.name, args);
      } catch (const kiln::error&) {
      }
    }
  });
}
