// SPDX-License-Identifier: Apache-2.0
// kiln-compile: an ONNX model or IR text in, a serialized executable out (the design's
// tvm.compile followed by export), or in the compiled mode a shared library or a C++ header.
//
//   kiln-compile resnet18.onnx -o resnet18.kx --shape input=1,3,224,224 --time-passes
//   kiln-compile mlp.ir --exec-mode compiled -o mlp.so              # export_library
//   kiln-compile mlp.ir --emit-cpp mlp.hpp -o mlp.kx --namespace mlp  # a header to include
//   kiln-compile mlp.ir --exec-mode compiled --instrumented -o mlp.so # kiln-run --profile sees its kernels
#include "common.hpp"

int main(int argc, char** argv) {
  using namespace kiln_tools;
  CLI::App app{"Compiles an ONNX model or a module in kiln's IR text format to an executable for kiln's VM.", "kiln-compile"};
  std::string input, output, pipeline;
  std::vector<std::string> shape_options, bound_options;
  bool print_bytecode = false, instrumented = false;
  std::string mode_text = "bytecode", emit_cpp, name_space = "kiln_generated", cxx;
  std::vector<std::string> cxx_flags;
  pass_options passes;
  app.add_option("MODEL", input, "An .onnx file, or IR text")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", output, "The executable to write (with --exec-mode compiled: the shared library; with --emit-cpp: the executable the header loads)")
      ->required();
  app.add_option("--exec-mode", mode_text, "bytecode (the VM interprets it) or compiled (C++, built into a shared library)")
      ->check(CLI::IsMember({"bytecode", "compiled"}));
  app.add_option("--emit-cpp", emit_cpp, "Write the compiled mode's C++ as a header to include in a program (implies --exec-mode compiled)");
  app.add_option("--namespace", name_space, "The C++ namespace of the generated code");
  app.add_flag("--instrumented", instrumented,
               "Compiled mode: report every call inside compiled functions to the VM's instrument (for kiln-run --profile)");
  app.add_option("--cxx", cxx, "The C++ compiler that builds the library (default: $CXX, else the one kiln was configured with)");
  app.add_option("--cxx-flag", cxx_flags, "A flag for that compiler instead of the defaults (-O3 -march=native); repeatable")->allow_extra_args(false);
  app.add_option("-p,--pipeline", pipeline, "Pipeline text instead of the default pipeline (kiln.default)");
  app.add_option("--shape", shape_options, "Fix an ONNX input's shape: NAME=D0,D1,... (repeatable)");
  app.add_option("--upper-bound", bound_options,
                 "Bound an ONNX model's symbolic dimension: NAME=N (repeatable; memory is planned for the largest sizes)");
  app.add_flag("--print-bytecode", print_bytecode, "Print the bytecode listing (to stdout)");
  passes.add_to(app, false);
  add_version(app, "kiln-compile");
  KILN_TOOL_PARSE(app, argc, argv);

  return guarded("kiln-compile", [&] {
    std::map<std::string, std::vector<std::int64_t>> shapes;
    for (auto& s : shape_options) shapes.insert(parse_shape_option(s));
    std::map<std::string, std::int64_t> bounds;
    for (auto& b : bound_options) bounds.insert(parse_bound_option(b));
    const auto bytes = kiln::detail::read_file(input, "");
    const model_kind kind = kind_of(input, bytes);
    if (kind == model_kind::executable) throw tool_error("'" + input + "' is already a compiled executable");
    const kiln::ir::ir_module m = read_ir(input, bytes, kind, shapes, bounds);
    kiln::pass_context ctx = passes.make_context();
    const bool compiled = mode_text == "compiled" || !emit_cpp.empty();
    kiln::vm::executable ex;
    {
      kiln::pass_context_scope scope(ctx);
      ex = kiln::compile(m, {.pipeline = pipeline.empty() ? std::nullopt : std::optional<std::string>(pipeline),
                             .mode = compiled ? kiln::exec_mode::compiled : kiln::exec_mode::bytecode,
                             .cpp = {.name_space = name_space, .instrumented = instrumented}});
    }
    passes.report(ctx);
    if (!emit_cpp.empty()) {  // both files or neither
      kiln::detail::staged_files files("");
      files.add(output).write(kiln::vm::serialize(ex));
      files.add(emit_cpp).write(ex.generated_source);
      files.commit();
      std::cerr << "kiln-compile: wrote '" << emit_cpp << "' (C++, namespace " << name_space << ") and '" << output
                << "' (the executable its " << name_space << "::load reads): " << ex.constants.size() << " constants\n";
    } else if (compiled) {
      kiln::vm::export_options opts;
      opts.compiler = cxx;
      if (!cxx_flags.empty()) opts.flags = cxx_flags;
      kiln::vm::export_library(ex, output, opts);
      std::cerr << "kiln-compile: wrote the shared library '" << output << "': " << ex.constants.size() << " constants\n";
    } else {
      kiln::vm::save_executable(ex, output);
      std::cerr << "kiln-compile: wrote '" << output << "': " << ex.num_instructions() << " instructions, " << ex.constants.size() << " constants\n";
    }
    if (print_bytecode) std::cout << (compiled ? ex.generated_source : ex.as_text());
    for (auto& f : ex.functions)
      if (f.kind != kiln::vm::function_kind::native) std::cerr << "  @" << f.name << f.signature_text() << "\n";
    return 0;
  });
}
