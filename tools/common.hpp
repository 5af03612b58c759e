// SPDX-License-Identifier: Apache-2.0
// What kiln's command-line tools share: reading a model of any kind kiln takes (an ONNX file, IR
// text, a compiled executable), pass-context options, and error reporting.
#pragma once

#include <kiln/compile.hpp>
#include <kiln/ir/parser.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/kernels/common.hpp>
#include <kiln/kernels/cpu_caches.hpp>
#include <kiln/kernels/isa.hpp>
#include <kiln/pass/pass.hpp>
#include <kiln/support/file.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/transform/default_pipeline.hpp>
#include <kiln/vm/library.hpp>
#include <kiln/vm/serialize.hpp>
#if KILN_TOOLS_ONNX
#include <kiln/frontend/onnx/import.hpp>
#endif

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstring>
#include <new>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln_tools {

namespace fs = std::filesystem;

/// An error the tool reports as `<tool>: <message>` with exit status 1.
struct tool_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class model_kind { onnx, ir_text, executable, library };

/// Whether `path` names a shared library: `*.so`, or a versioned `*.so.N`.
inline bool named_as_library(const fs::path& path) {
  const std::string name = path.filename().string();
  return path.extension() == ".so" || name.find(".so.") != std::string::npos;
}

/// The kind of model in `bytes`, by content first, then by name. A shared library is loaded only
/// from a file named as one: loading a library runs its code, which a model's name must ask for.
inline model_kind kind_of(const fs::path& path, const std::vector<std::byte>& bytes) {
  const auto starts_with = [&](std::string_view magic) {
    return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
  };
  if (bytes.size() >= 8) {
    std::uint64_t magic = 0;
    for (int i = 0; i < 8; ++i) magic |= std::uint64_t(std::to_integer<std::uint8_t>(bytes[std::size_t(i)])) << (8 * i);
    if (magic == kiln::vm::executable_magic) return model_kind::executable;
  }
  if (starts_with("\x7f" "ELF")) {
    if (named_as_library(path)) return model_kind::library;
    throw tool_error("'" + path.string() +
                     "' is an ELF file; a shared library is loaded only from a file named *.so (loading a library runs its code: "
                     "load only libraries you trust)");
  }
  if (starts_with("\x93NUMPY"))
    throw tool_error("'" + path.string() + "' is a .npy array, not a model (give arrays with --input NAME=FILE.npy)");
  if (path.extension() == ".onnx") return model_kind::onnx;
  if (named_as_library(path)) throw tool_error("'" + path.string() + "' is named as a shared library but is not one (no ELF header)");
  return model_kind::ir_text;
}

/// `text` as a non-negative integer (a dimension, a bound, a token id), or nothing when it is not
/// one whole number.
inline std::optional<std::int64_t> non_negative(const std::string& text) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

/// The position of the '=' in an option's `NAME=VALUE` text `text`; an error naming the option and the
/// `expected` form when there is none or the name is empty.
inline std::size_t split_assignment(const std::string& text, const char* option, const char* expected) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw tool_error(std::string(option) + " '" + text + "': expected " + expected);
  return eq;
}

/// `name=1,3,224,224` as a name and dimensions.
inline std::pair<std::string, std::vector<std::int64_t>> parse_shape_option(const std::string& text) {
  const std::size_t eq = split_assignment(text, "--shape", "NAME=D0,D1,...");
  std::vector<std::int64_t> dims;
  std::size_t at = eq + 1;
  while (at <= text.size()) {
    const auto comma = std::min(text.find(',', at), text.size());
    const std::string d = text.substr(at, comma - at);
    const auto v = non_negative(d);
    if (!v) throw tool_error("--shape '" + text + "': '" + d + "' is not a dimension");
    dims.push_back(*v);
    at = comma + 1;
  }
  return {text.substr(0, eq), dims};
}

/// `--upper-bound NAME=N`: a bound of an ONNX model's symbolic dimension.
inline std::pair<std::string, std::int64_t> parse_bound_option(const std::string& text) {
  const std::size_t eq = split_assignment(text, "--upper-bound", "NAME=N");
  const std::string n = text.substr(eq + 1);
  const auto v = non_negative(n);
  if (!v) throw tool_error("--upper-bound '" + text + "': '" + n + "' is not a dimension");
  return {text.substr(0, eq), *v};
}

/// The IR of an ONNX file or an IR text file. `upper_bounds` bound an ONNX model's symbolic
/// dimensions (import_options::upper_bounds).
inline kiln::ir::ir_module read_ir(const fs::path& path, const std::vector<std::byte>& bytes, model_kind kind,
                                   const std::map<std::string, std::vector<std::int64_t>>& shapes,
                                   const std::map<std::string, std::int64_t>& upper_bounds = {}) {
  if (kind == model_kind::onnx) {
#if KILN_TOOLS_ONNX
    kiln::frontend::onnx::import_options o;
    o.shapes = shapes;
    o.upper_bounds = upper_bounds;
    // From the file, not `bytes`: import_file frees the file's bytes once parsed, and each
    // initializer's once converted, so that a model is held once while it is imported.
    (void)bytes;
    return kiln::frontend::onnx::import_file(path, o);
#else
    (void)shapes;
    (void)upper_bounds;
    throw tool_error("'" + path.string() + "' is an ONNX model, but this kiln was built without the ONNX importer (libonnx-dev)");
#endif
  }
  if (!shapes.empty()) throw tool_error("--shape applies to ONNX models only");
  if (!upper_bounds.empty()) throw tool_error("--upper-bound applies to ONNX models only (IR text sets R.func_attr({\"tir_var_upper_bound\": ...}))");
  return kiln::ir::parse_module(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

/// The executable in file `path`: an ONNX model or IR text (compiled under the current pass
/// context), an executable from kiln-compile, or a shared library from kiln-compile --exec-mode
/// compiled. `shapes` fix an ONNX model's input shapes (--shape), `upper_bounds` bound its
/// symbolic dimensions (--upper-bound).
inline kiln::vm::executable load_model(const fs::path& path, const std::map<std::string, std::vector<std::int64_t>>& shapes,
                                       const std::map<std::string, std::int64_t>& upper_bounds = {}, model_kind* kind_out = nullptr) {
  auto bytes = kiln::detail::read_file(path, "");
  const model_kind kind = kind_of(path, bytes);
  if (kind_out) *kind_out = kind;
  if (kind == model_kind::onnx) std::vector<std::byte>().swap(bytes);  // read again by the importer (read_ir)
  if (kind == model_kind::executable || kind == model_kind::library) {
    if (!shapes.empty()) throw tool_error("--shape applies to ONNX models only");
    if (!upper_bounds.empty()) throw tool_error("--upper-bound applies to ONNX models only");
    return kind == model_kind::executable ? kiln::vm::deserialize(bytes, "'" + path.string() + "'") : kiln::vm::load_module(path);
  }
  return kiln::compile(read_ir(path, bytes, kind, shapes, upper_bounds));
}

/// `--config KEY=VALUE` (repeatable): a pass config option, as TVM's PassContext(config=...).
inline void add_config_option(CLI::App& app, std::vector<std::string>& configs) {
  app.add_option("--config", configs,
                 "KEY=VALUE: set a pass config option for the compilation (repeatable), e.g. kiln.static_plan_block_memory.concat_in_place=false")
      ->allow_extra_args(false);
}

/// Sets each KEY=VALUE of `configs` on `ctx`; an unknown key or a value of the wrong type is an error naming it.
/// The passes must be registered first (`kiln::transform::register_passes`): that registers their options.
inline void apply_config(kiln::pass_context& ctx, const std::vector<std::string>& configs) {
  for (const std::string& c : configs) {
    const std::size_t eq = split_assignment(c, "--config", "KEY=VALUE");
    try {
      ctx.set_config_from_text(c.substr(0, eq), c.substr(eq + 1));
    } catch (const kiln::usage_error& e) {
      throw tool_error("--config '" + c + "': " + e.what());
    }
  }
}

/// Pass-context options shared by the tools that run pipelines.
struct pass_options {
  bool print_after_all = false, print_after_change = false, print_full_constants = false, time_passes = false, verify_each = false,
       stats = false;
  int opt_level = 2;
  std::size_t threads = 1;
  std::vector<std::string> disabled, configs;
  long long bisect = -1;  // -1: no limit

  void add_to(CLI::App& app, bool with_change = true) {
    app.add_flag("--print-after-all", print_after_all, "Print the IR after every pass (to stderr)");
    if (with_change) app.add_flag("--print-after-change", print_after_change, "Print the IR after each pass that changed it (to stderr)");
    app.add_flag("--print-full-constants", print_full_constants,
                 "Print every element of every constant (by default the IR printed for reading shows constants of more than " +
                     std::to_string(kiln::ir::print_options::readable_constant_elements) +
                     " elements as R.const(meta[i], dtype, shape=...))");
    app.add_flag("--time-passes", time_passes, "Print a table of the time each pass took (to stderr)");
    app.add_flag("--verify-each", verify_each, "Verify the IR, and the properties each pass needs and establishes, around every pass");
    app.add_option("-O,--opt-level", opt_level, "The pass context's opt level")->check(CLI::Range(0, 3));
    app.add_flag("--stats", stats, "Print the passes' statistics after the run (to stderr), as LLVM's -stats");
    app.add_option("-j,--threads", threads, "Run function passes on this many threads")->check(CLI::Range(1, 1024));
    app.add_option("--disable-pass", disabled, "Skip this pass wherever a pipeline runs it (TVM's disabled_pass; repeatable)")
        ->allow_extra_args(false);
    add_config_option(app, configs);
    app.add_option("--opt-bisect-limit", bisect,
                   "Run only the first N passes and skip the rest, printing each decision to stderr (LLVM's -opt-bisect-limit)")
        ->check(CLI::NonNegativeNumber);
  }
  /// `verify_by_other`: the caller verifies each pass itself (the crash reproducer does, when asked).
  kiln::pass_context make_context(bool verify_by_other = false) const {
    kiln::pass_context ctx(opt_level);
    ctx.set_num_threads(threads);
    kiln::transform::register_passes();  // the names --disable-pass may give, the options --config may set
    const auto& registry = kiln::pass_registry<kiln::ir::ir_module>::global();
    for (const std::string& name : disabled) {
      if (!registry.contains(name)) throw tool_error("--disable-pass '" + name + "': " + registry.unknown_pass_message(name));
      ctx.disable(registry.canonical_name(name));
    }
    apply_config(ctx, configs);
    std::vector<kiln::instrument> list;
    if (bisect >= 0) list.emplace_back(kiln::bisect_limit(static_cast<std::size_t>(bisect), &std::cerr));
    if (time_passes) list.emplace_back(kiln::pass_timing{});
    if (print_after_all || print_after_change)
      list.emplace_back(kiln::print_ir(std::cerr, (print_after_all ? kiln::print_ir::after : kiln::print_ir::after_change) |
                                                      (print_full_constants ? kiln::print_ir::full_text : 0u)));
    if (verify_each && !verify_by_other) list.emplace_back(kiln::verify_ir{});
    ctx.set_instruments(std::move(list));
    return ctx;
  }
  void report(kiln::pass_context& ctx) const {
    for (auto& i : ctx.instruments())
      if (auto* t = i.target<kiln::pass_timing>()) std::cerr << t->table();
    if (stats) std::cerr << ctx.statistics_report();
  }
};

/// "kiln-run 0.1.0 (kiln 0.1.0; built by GCC 12.2.0; kernels x86-64-v4 (AVX-512), chosen at run
/// time among x86-64, x86-64-v3, x86-64-v4)": what `--version` prints.
inline std::string version_text(const char* tool) {
#if defined(__clang__)
  const std::string compiler = std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = std::string("GCC ") + __VERSION__;
#else
  const std::string compiler = "an unknown compiler";
#endif
  return std::string(tool) + " " + kiln::version + " (kiln " + kiln::version + "; built by " + compiler + "; kernels " + kiln::kernels::isa_report() +
         "; caches " + kiln::kernels::caches_report(kiln::kernels::cpu_caches()) + ")";
}

/// Adds `--version` to `app`.
inline void add_version(CLI::App& app, const char* tool) { app.set_version_flag("--version", version_text(tool), "Print the version, the compiler and the kernels' instruction set, and exit"); }

/// Parses the command line as CLI11_PARSE does, but with the exit status kiln's tools document:
/// 0 after --help or --version, 1 for every error in the arguments (CLI11 gives each kind of
/// error its own status: a missing argument is 106).
#define KILN_TOOL_PARSE(app, argc, argv) \
  try {                                  \
    (app).parse((argc), (argv));         \
  } catch (const CLI::Success& e) {      \
    return (app).exit(e);                \
  } catch (const CLI::ParseError& e) {   \
    (void)(app).exit(e);                 \
    return 1;                            \
  }

/// Writes `text` to standard output, or replaces the file `path` with it ('-': standard output).
inline void write_output(const std::string& path, std::string_view text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  kiln::detail::write_file(path, text, "");
}

/// Runs `body`, turning every error into `<tool>: <message>` on stderr and exit status 1. Standard
/// output is flushed and checked before a success is reported (`kiln-opt > /dev/full` fails). A
/// file-size limit (`ulimit -f`) fails the write that exceeds it instead of killing the tool.
template <class Body>
int guarded(const char* tool, Body&& body) {
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    const int status = body();
    if (!std::cout.flush()) throw tool_error("cannot write to standard output");
    return status;
  } catch (const std::bad_alloc&) {
    std::cerr << tool << ": out of memory (a tensor or a buffer larger than this machine can give)\n";
  } catch (const std::exception& e) {
    std::cerr << tool << ": " << kiln::detail::escape_controls(e.what()) << "\n";
  }
  std::cout.clear();
  return 1;
}

}  // namespace kiln_tools
