// SPDX-License-Identifier: Apache-2.0
// kiln-opt: runs a pipeline of passes on IR text and prints the result (LLVM's opt, mlir-opt).
//
//   kiln-opt model.kir --pipeline "kiln.simplify,legalize_ops" --print-after-change
//   cat model.kir | kiln-opt --pipeline kiln.default --time-passes
//   kiln-opt model.kir -p kiln.default --crash-reproducer repro.kir   # on failure, then:
//   kiln-opt --replay repro.kir
//   kiln-opt model.kir -p kiln.fuse --emit-dot - | dot -Tsvg -o model.svg
#include "common.hpp"

#include <kiln/ir/dot.hpp>
#include <kiln/pass/instruments/crash_reproducer.hpp>
#include <kiln/transform/default_pipeline.hpp>

#include <iterator>

int main(int argc, char** argv) {
  using namespace kiln_tools;
  CLI::App app{"Runs a pipeline of kiln's passes on a module in kiln's IR text format and prints the result.\n"
               "Passes are named as in pipeline text: kiln.default, kiln.simplify, kiln.lower_to_vm, or any registered pass\n"
               "(by kiln's name or TVM's: fold_constant or FoldConstant).",
               "kiln-opt"};
  std::string input = "-", output = "-", pipeline, reproducer_path, replay, dot_path;
  pass_options passes;
  bool list = false, local_reproducer = false, elide = false;
  app.add_option("FILE", input, "IR text or an ONNX model to read ('-' or nothing: IR text from standard input)");
  app.add_option("-p,--pipeline", pipeline, "The pipeline, e.g. \"kiln.simplify,legalize_ops\"");
  app.add_option("-o,--output", output,
                 "Where to write the result ('-': standard output), with every constant, so that it reads back");
  app.add_flag("--elide-constants", elide,
               "Write the result for reading instead: constants of more than " +
                   std::to_string(kiln::ir::print_options::readable_constant_elements) +
                   " elements as R.const(meta[i], dtype, shape=...) (such text does not read back)");
  app.add_option("--emit-dot", dot_path,
                 "Also write the result as a Graphviz graph ('-': standard output, instead of the IR): one node per binding, "
                 "fused kernels as clusters; render with dot -Tsvg");
  app.add_flag("--list-passes", list,
               "List the passes and pipelines pipeline text can name (with TVM's names, descriptions, opt levels and the "
               "properties each needs and establishes), and exit");
  app.add_option("--crash-reproducer", reproducer_path,
                 "When a pass fails, write a file that --replay runs to the same failure (the input and the pipeline)");
  app.add_flag("--local-reproducer", local_reproducer,
               "With --crash-reproducer: the failing pass and its input only (the smallest replay)");
  app.add_option("--replay", replay, "Run a crash reproducer: its module, pipeline, opt level, names and config")
      ->excludes("--pipeline", "FILE", "--crash-reproducer");
  passes.add_to(app);
  add_version(app, "kiln-opt");
  KILN_TOOL_PARSE(app, argc, argv);

  return guarded("kiln-opt", [&] {
    kiln::transform::register_passes();
    if (list) {
      std::cout << kiln::describe_passes<kiln::ir::ir_module>();
      return 0;
    }
    if (local_reproducer && reproducer_path.empty()) throw tool_error("--local-reproducer needs --crash-reproducer FILE");
    if (replay.empty() && pipeline.empty() && dot_path.empty()) throw tool_error("--pipeline is required (try --list-passes)");
    auto read_text = [](const std::string& path) {
      if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      const auto bytes = kiln::detail::read_file(path, "");
      return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    };
    kiln::ir::ir_module out;
    if (!replay.empty()) {
      const kiln::reproducer r = kiln::reproducer::parse(read_text(replay));
      out = kiln::replay_reproducer<kiln::ir::ir_module>(r, [](std::string_view t) { return kiln::ir::parse_module(t); });
    } else {
      kiln::ir::ir_module m;
      if (input == "-") {
        m = kiln::ir::parse_module(read_text(input));
      } else {  // IR text or an ONNX model, recognised by content and name
        const auto bytes = kiln::detail::read_file(input, "");
        const model_kind kind = kind_of(input, bytes);
        if (kind == model_kind::executable || kind == model_kind::library)
          throw tool_error("'" + input + "' is a compiled " + (kind == model_kind::library ? "library" : "executable") +
                           "; kiln-opt reads IR text or an ONNX model (run it with kiln-run)");
        m = read_ir(input, bytes, kind, {});
      }
      const auto p = kiln::parse_pipeline<kiln::ir::ir_module>(pipeline);  // "": no passes (--emit-dot of the input)
      kiln::pass_context ctx = passes.make_context(/*verify_each_by_reproducer=*/!reproducer_path.empty());
      if (!reproducer_path.empty()) {
        auto list = ctx.instruments();
        list.emplace_back(kiln::crash_reproducer(
            {.path = reproducer_path, .pipeline = pipeline, .local = local_reproducer, .verify_each = passes.verify_each}, ctx));
        ctx.set_instruments(std::move(list));
      }
      try {
        out = p(m, ctx);
      } catch (...) {
        if (!reproducer_path.empty())
          if (const auto* r = ctx.instruments().back().target<kiln::crash_reproducer>()) {
            if (!r->written().empty())
              std::cerr << "kiln-opt: wrote a crash reproducer to " << r->written() << " (kiln-opt --replay " << r->written() << ")\n";
            else if (!r->write_error().empty())
              std::cerr << "kiln-opt: could not write the crash reproducer: " << r->write_error() << "\n";
          }
        throw;
      }
      passes.report(ctx);
    }
    if (!dot_path.empty()) {
      write_output(dot_path, kiln::ir::to_dot(out));
      if (dot_path == "-" && output == "-") return 0;  // the graph is the output
    }
    std::string result = kiln::ir::print(out, elide ? kiln::ir::print_options::readable() : kiln::ir::print_options{});
    if (!result.empty() && result.back() != '\n') result += '\n';
    write_output(output, result);
    return 0;
  });
}
