// SPDX-License-Identifier: Apache-2.0
// The deployment form of the compiled mode: a program that includes the header
// `kiln-compile --emit-cpp` wrote (at build time, from tests/tools/small.kir, as model.hpp and
// model.kx in the directory the test runs in) and runs the model with it, checking against the
// bytecode compiled from the same IR. docs/howto-deploy-compiled.md shows its two regions.
//
//   kiln_test_emit_cpp IR.kir        (in the directory of model.kx)
// [includes]
#include "model.hpp"
#include <kiln/vm/kernels.hpp>
#include <kiln/vm/virtual_machine.hpp>
// [includes]

#include <kiln/compile.hpp>
#include <kiln/ir/parser.hpp>
#include <kiln/support/file.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kiln_test_emit_cpp IR.kir  (in the directory of model.kx)\n";
    return 2;
  }
  namespace vm = kiln::vm;
  using kiln::runtime::tensor;
  try {
    const tensor x = tensor::from_values<float>({2, 4}, {1, -2, 3, -4, 5, -6, 7, -8});
    const tensor w = tensor::from_values<float>({4, 3}, {0.5f, -1, 2, 1, 0.25f, -0.5f, -1, 1, 0, 2, -2, 1});
    // [run]
    kiln::vm::virtual_machine machine(models::mine::load("model.kx"), {}, kiln::vm::kernel_registry());
    kiln::runtime::tensor y = machine.invoke("main", x, w).as_tensor();
    // [run]
    const auto bytes = kiln::detail::read_file(argv[1], "kiln_test_emit_cpp");
    const vm::executable bytecode_ex = kiln::compile(kiln::ir::parse_module(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
    vm::virtual_machine bytecode(bytecode_ex, {}, kiln::vm::kernel_registry());
    const auto a = y.to_vector<float>();
    const auto b = bytecode.invoke("main", x, w).as_tensor().to_vector<float>();
    if (a != b) {
      std::cerr << "kiln_test_emit_cpp: the header's code and the bytecode differ\n";
      return 1;
    }
    std::cout << "the header's compiled functions give what the bytecode gives: " << a.size() << " values\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kiln_test_emit_cpp: " << e.what() << "\n";
    return 1;
  }
}
