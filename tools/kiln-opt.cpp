// SPDX-License-Identifier: Apache-2.0
// kiln-opt: runs a pipeline of passes on IR text and prints the result (LLVM's opt, mlir-opt).
//
//   kiln-opt model.kir --pipeline "kiln.simplify,legalize_ops" --print-after-change
//   cat model.kir | kiln-opt --pipeline kiln.default --time-passes
#include "common.hpp"

#include <kiln/transform/default_pipeline.hpp>

#include <fstream>
#include <iterator>

int main(int argc, char** argv) {
  using namespace kiln_tools;
  CLI::App app{"Runs a pipeline of kiln's passes on a module in kiln's IR text format and prints the result.\n"
               "Passes are named as in pipeline text: kiln.default, kiln.simplify, kiln.lower_to_vm, or any registered pass.",
               "kiln-opt"};
  std::string input = "-", output = "-", pipeline;
  pass_options passes;
  bool list = false;
  app.add_option("FILE", input, "IR text to read ('-' or nothing: standard input)");
  app.add_option("-p,--pipeline", pipeline, "The pipeline, e.g. \"kiln.simplify,legalize_ops\"");
  app.add_option("-o,--output", output, "Where to write the result ('-': standard output)");
  app.add_flag("--list-passes", list, "List the passes pipeline text can name, and exit");
  passes.add_to(app);
  CLI11_PARSE(app, argc, argv);

  return guarded("kiln-opt", [&] {
    kiln::transform::register_passes();
    if (list) {
      for (auto& name : kiln::pass_registry<kiln::ir::ir_module>::global().names()) std::cout << name << "\n";
      return 0;
    }
    if (pipeline.empty()) throw tool_error("--pipeline is required (try --list-passes)");
    std::string text;
    if (input == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      const auto bytes = kiln::detail::read_file(input, "kiln-opt");
      text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    const kiln::ir::ir_module m = kiln::ir::parse_module(text);
    const auto p = kiln::parse_pipeline<kiln::ir::ir_module>(pipeline);
    kiln::pass_context ctx = passes.make_context();
    const kiln::ir::ir_module out = p(m, ctx);
    passes.report(ctx);
    std::string result = kiln::ir::print(out);
    if (!result.empty() && result.back() != '\n') result += '\n';
    if (output == "-") {
      std::cout << result;
    } else {
      std::ofstream f(output, std::ios::binary);
      if (!(f << result)) throw tool_error("cannot write '" + output + "'");
    }
    return 0;
  });
}
