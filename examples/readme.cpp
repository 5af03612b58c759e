// SPDX-License-Identifier: Apache-2.0
// The README's C++ example, as the README shows it (tests/docs/check_snippets.py keeps the two the
// same; CTest runs it on a ResNet-18 exported from torchvision).
#include <kiln/frontend/onnx/import.hpp>   // link kiln::onnx
#include <kiln/kiln.hpp>

#include <iostream>

int main() {
  namespace vm = kiln::vm;
  // ONNX -> kiln's IR (Relax's from_onnx); symbolic dimensions stay symbolic unless fixed here.
  kiln::ir::ir_module m = kiln::frontend::onnx::import_file("resnet18.onnx", {.shapes = {{"input", {1, 3, 224, 224}}}});

  // The default pipeline at opt level 2, every pass timed (TVM's PassContext and instruments).
  kiln::pass_context ctx(2);
  ctx.set_instruments({kiln::instrument(kiln::pass_timing{})});
  vm::executable ex;
  {
    kiln::pass_context_scope scope(ctx);
    ex = kiln::compile(m);                                    // tvm.compile
  }
  vm::save_executable(ex, "resnet18.kx");                     // or keep it in memory

  vm::virtual_machine machine(ex, {}, kiln::vm::kernel_registry());
  kiln::runtime::tensor x = kiln::runtime::load_npy("cat.npy");
  kiln::runtime::tensor y = machine.invoke("main", x).as_tensor();
  std::cout << kiln::runtime::shape_to_string(y.shape()) << "\n";
}
