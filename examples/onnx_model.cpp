// SPDX-License-Identifier: Apache-2.0
// kiln's main demo (scripts/demo): a model exported from PyTorch to ONNX is imported, compiled with
// the default pipeline (printed, with the time of every pass), run on the VM and the CPU kernels
// on the input stored beside it, compared with PyTorch's output, and timed.
//
//     onnx_model MODEL.onnx        (MODEL.input.npy and MODEL.output.npy beside it, as
//                                   scripts/export_models.py writes them)
//
// Exit status 0 when kiln's output matches PyTorch's at atol = rtol = 1e-4, 1 when it does not,
// 2 on a usage error or a model kiln cannot import.
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/kiln.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  namespace ir = kiln::ir;
  namespace vm = kiln::vm;
  using kiln::runtime::tensor;
  if (argc != 2) {
    std::cerr << "usage: onnx_model MODEL.onnx  (MODEL.input.npy and MODEL.output.npy beside it)\n";
    return 2;
  }
  const fs::path model = argv[1];
  fs::path input_file = model, reference_file = model;
  input_file.replace_extension(".input.npy");
  reference_file.replace_extension(".output.npy");

  ir::ir_module m;
  tensor input, reference;
  try {
    m = kiln::frontend::onnx::import_file(model);
    input = kiln::runtime::load_npy(input_file);
    reference = kiln::runtime::load_npy(reference_file);
  } catch (const std::exception& e) {
    std::cerr << "onnx_model: " << e.what() << '\n';
    return 2;
  }
  std::cout << "== " << model.filename().string() << " ==\n  imported: " << m->size() << " function(s)\n\n";

  std::cout << "== the pipeline ==\n" << kiln::transform::default_pipeline::element_text() << "\n\n";

  // Compile under a context whose instrument times every pass.
  kiln::pass_context ctx(2);
  ctx.set_instruments({kiln::instrument(kiln::pass_timing{})});
  vm::executable ex;
  {
    kiln::pass_context_scope scope(ctx);
    ex = kiln::compile(m);
  }
  std::cout << "== per-pass timing ==\n" << ctx.instruments()[0].target<kiln::pass_timing>()->table() << '\n';
  const vm::function_info& f = ex.functions[*ex.find_function("main")];
  std::cout << "== executable ==\n  @main" << f.signature_text() << "\n  " << f.end_instr - f.start_instr << " instructions, " << f.register_file_size
            << " registers, " << ex.constants.size() << " constants (the weights among them)\n\n";

  vm::virtual_machine machine(ex, {}, kiln::vm::kernel_registry());
  const tensor out = machine.invoke("main", input).as_tensor();
  const kiln::runtime::closeness c = kiln::runtime::compare_close(out, reference, 1e-4, 1e-4);
  std::cout << "== run ==\n  input " << kiln::runtime::shape_to_string(input.shape()) << ", output " << kiln::runtime::shape_to_string(out.shape())
            << "\n  largest difference from PyTorch's output: " << c.max_abs_diff << (c.ok() ? " (within" : " (NOT within")
            << " atol = rtol = 1e-4)\n";
  if (!c.ok()) std::cout << "  " << c.describe() << '\n';

  const vm::timing_result t = machine.time_evaluator("main", 10, 5)(std::vector<vm::value>{input});
  std::printf("  time per run: median %.1f us, min %.1f us over %zu repeats of %d runs (one thread)\n", t.median() * 1e6, t.min() * 1e6, t.results.size(),
              t.number);
  return c.ok() ? 0 : 1;
}
