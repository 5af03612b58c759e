// SPDX-License-Identifier: Apache-2.0
// Builds, prints, parses and verifies a module through the installed headers; then compiles it to
// C++, exports it as a shared library (export_library finds kiln's headers by itself) and runs it.
// Prints the include directory export_library used, which the test checks.
#include <kiln/kiln.hpp>

#include <filesystem>
#include <iostream>

int main(int argc, char** argv) {
  using namespace kiln::ir;
  block_builder bb;
  auto x = make_var("x", tensor_type({2, 3}, kiln::dtype::float32));
  bb.function("main", {x}, [&] { return bb.emit(call_op("nn.relu", {x})); });
  ir_module back = parse_module(print(bb.module()));
  verify_or_throw(back);
  if (!structural_equal(bb.module(), back)) return 1;
  std::cout << "consumer: kiln " << kiln::version << " works\n";
  if (argc < 2) return 0;

  // argv[1]: where to write the library.
  namespace vm = kiln::vm;
  std::cout << "consumer: kiln headers at " << vm::detail::find_kiln_include_dir({}).string() << "\n";
  const vm::executable ex = kiln::compile(back, {.mode = kiln::exec_mode::compiled});
  vm::export_library(ex, argv[1], {.flags = {"-O1"}});
  vm::virtual_machine machine(vm::load_module(argv[1]), {}, kiln::vm::kernel_registry());
  auto in = kiln::runtime::tensor::from_values<float>({2, 3}, {-1, 2, -3, 4, -5, 6});
  if (machine.invoke("main", in).as_tensor().to_vector<float>() != std::vector<float>{0, 2, 0, 4, 0, 6}) return 2;
  std::cout << "consumer: the exported library runs\n";  // run.cmake checks the line before
  return 0;
}
