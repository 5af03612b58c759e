// SPDX-License-Identifier: Apache-2.0
// kiln-compile: an ONNX model or IR text in, a serialized executable out (the design's
// tvm.compile followed by export).
//
//   kiln-compile resnet18.onnx -o resnet18.kx --shape input=1,3,224,224 --time-passes
#include "common.hpp"

int main(int argc, char** argv) {
  using namespace kiln_tools;
  CLI::App app{"Compiles an ONNX model or a module in kiln's IR text format to an executable for kiln's VM.", "kiln-compile"};
  std::string input, output, pipeline;
  std::vector<std::string> shape_options;
  bool print_bytecode = false;
  pass_options passes;
  app.add_option("MODEL", input, "An .onnx file, or IR text")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", output, "The executable to write")->required();
  app.add_option("-p,--pipeline", pipeline, "Pipeline text instead of the default pipeline (kiln.default)");
  app.add_option("--shape", shape_options, "Fix an ONNX input's shape: NAME=D0,D1,... (repeatable)");
  app.add_flag("--print-bytecode", print_bytecode, "Print the bytecode listing (to stdout)");
  passes.add_to(app, false);
  CLI11_PARSE(app, argc, argv);

  return guarded("kiln-compile", [&] {
    std::map<std::string, std::vector<std::int64_t>> shapes;
    for (auto& s : shape_options) shapes.insert(parse_shape_option(s));
    const auto bytes = kiln::detail::read_file(input, "kiln-compile");
    const model_kind kind = kind_of(input, bytes);
    if (kind == model_kind::executable) throw tool_error("'" + input + "' is already a compiled executable");
    const kiln::ir::ir_module m = read_ir(input, bytes, kind, shapes);
    kiln::pass_context ctx = passes.make_context();
    kiln::vm::executable ex;
    {
      kiln::pass_context_scope scope(ctx);
      ex = kiln::compile(m, {.pipeline = pipeline.empty() ? std::nullopt : std::optional<std::string>(pipeline)});
    }
    passes.report(ctx);
    kiln::vm::save_executable(ex, output);
    if (print_bytecode) std::cout << ex.as_text();
    std::cerr << "kiln-compile: wrote '" << output << "': " << ex.num_instructions() << " instructions, " << ex.constants.size() << " constants\n";
    for (auto& f : ex.functions)
      if (f.kind == kiln::vm::function_kind::bytecode) std::cerr << "  @" << f.name << f.signature_text() << "\n";
    return 0;
  });
}
