// SPDX-License-Identifier: Apache-2.0
// kiln-run: runs a model — an ONNX file, IR text, or a compiled executable — on kiln's VM.
//
//   kiln-run resnet18.onnx --input input=cat.npy --output logits.npy --repeat 50 --profile
//
// Inputs come from .npy files; a parameter given no file gets random data (seeded) when its
// shape is static. Prints each output's dtype, shape and summary; writes outputs as .npy; with
// --repeat times the runs (median, min, spread); with --profile prints a table of the time spent
// in each native function (the kernels), measured through the VM's instrument hook, and with
// --profile-calls one row per call, in the order of a run, with the shapes of its tensors (which
// of a network's convolutions is slow, not only that convolutions are).
#include "common.hpp"

#include <kiln/kernels/cpu_caches.hpp>
#include <kiln/kernels/isa.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/runtime/npy.hpp>
#include <kiln/vm/vm.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <thread>

namespace {

using namespace kiln_tools;
using kiln::runtime::tensor;

tensor random_input(const kiln::vm::type_signature& s, const std::string& name, std::mt19937& gen) {
  if (s.kind != kiln::vm::signature_kind::tensor || !s.dims || !is_known(s.dt))
    throw tool_error("parameter '" + name + "' (" + s.text() + ") needs an input: --input " + name + "=FILE.npy");
  kiln::runtime::shape_vector shape;
  for (auto& d : *s.dims) {
    if (!d.is_static())
      throw tool_error("parameter '" + name + "' (" + s.text() + ") has symbolic dimension " + d.expr + "; give it with --input " + name + "=FILE.npy");
    shape.push_back(d.size);
  }
  std::int64_t count = 1;
  for (std::int64_t d : shape)
    if (__builtin_mul_overflow(count, d, &count)) count = std::numeric_limits<std::int64_t>::max();
  const std::uint64_t bytes = std::uint64_t(count) * std::max<std::size_t>(kiln::size_of(s.dt), 8);  // drawn as float64, then cast
  // Random data is written to every element: more than the machine's memory would be killed by
  // the OS part-way (or refused by a sanitizer's allocator), so it is refused here, by name.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t memory = pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : std::uint64_t(-1);
  const auto too_large = [&] {
    return tool_error("parameter '" + name + "' (" + s.text() + ") is too large for random data: " + std::to_string(count) +
                      " elements, " + std::to_string(bytes) + " bytes or more, against this machine's " + std::to_string(memory) +
                      " bytes of memory; give a smaller shape (--shape) or an input file");
  };
  if (count > (std::int64_t(1) << 56) || bytes > memory) throw too_large();
  tensor t;
  try {
    t = tensor::empty(shape, kiln::dtype::float64);
  } catch (const kiln::runtime::out_of_memory&) {
    throw too_large();
  }
  std::uniform_real_distribution<double> uni(-1, 1);
  std::uniform_int_distribution<int> small(0, 9);
  const bool integer = !kiln::is_float(s.dt);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = integer ? small(gen) : uni(gen);
  return kiln::kernels::cast(t, s.dt);
}

std::string summary(const tensor& t) {
  std::string s = std::string(kiln::name(t.type())) + kiln::runtime::shape_to_string(t.shape());
  if (t.numel() == 0 || t.type() == kiln::dtype::float16) return s;
  const tensor d = kiln::kernels::cast(t, kiln::dtype::float64);
  const auto v = d.to_vector<double>();
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  char buf[160];
  std::snprintf(buf, sizeof buf, "  min %.6g  max %.6g  mean %.6g", *lo, *hi, std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()));
  return s + buf;
}

void flatten(const kiln::vm::value& v, std::vector<tensor>& out) {
  if (v.is_tensor()) out.push_back(v.as_tensor());
  else if (v.is_tuple())
    for (auto& x : v.as_tuple()) flatten(x, out);
  else throw tool_error("the result holds a " + std::string(kiln::vm::name(v.kind())) + ", which kiln-run cannot print or save");
}

/// "1x64x56x56, 1x64x56x56 -> ..." for a call: the shapes of its tensor arguments (the output of
/// a destination-passing call is its last), then its result's when it returns a tensor.
std::string call_shapes(kiln::vm::call_args a, const kiln::vm::value& ret) {
  const auto dims = [](const tensor& t) {
    std::string s;
    for (std::int64_t d : t.shape()) s += (s.empty() ? "" : "x") + std::to_string(d);
    return s.empty() ? std::string("scalar") : s;
  };
  std::string s;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].is_tensor()) s += (s.empty() ? "" : ", ") + dims(a[i].as_tensor());
  if (ret.is_tensor()) s += (s.empty() ? "-> " : " -> ") + dims(ret.as_tensor());
  return s;
}

/// Events in the Chrome trace-event format (`ph: "X"`, times in microseconds), as ONNX Runtime's
/// profiler writes them: what Perfetto and chrome://tracing open.
struct trace_events {
  struct event {
    std::string name, shapes;
    double ts, dur;
    long call;  // -1: a whole run
  };
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  std::vector<event> events;

  void add(std::string name, std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to, std::string shapes,
           long call) {
    auto us = [&](auto t) { return std::chrono::duration<double, std::micro>(t - origin).count(); };
    events.push_back({std::move(name), std::move(shapes), us(from), us(to) - us(from), call});
  }
  static std::string quoted(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\', out += c;
      else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }
  std::string json(const std::string& model, std::size_t threads) const {
    std::string s = "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"model\": " + quoted(model) +
                    ", \"kiln\": " + quoted(kiln::version) + ", \"threads\": " + std::to_string(threads) +
                    ", \"kernels\": " + quoted(kiln::kernels::isa_report()) +
                    ", \"caches\": " + quoted(kiln::kernels::caches_report(kiln::kernels::cpu_caches())) + "},\n\"traceEvents\": [\n";
    s += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"kiln-run\"}},\n";
    s += "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"VM (kernels use " + std::to_string(threads) +
         " thread" + (threads == 1 ? "" : "s") + ")\"}}";
    char num[64];
    for (const event& e : events) {
      const char* cat = e.call < 0 ? "run" : e.name.starts_with("vm.") ? "vm builtin" : "kernel";
      s += ",\n{\"name\": " + quoted(e.name) + ", \"cat\": \"" + cat + "\", \"ph\": \"X\", \"pid\": 1, \"tid\": 1";
      std::snprintf(num, sizeof num, ", \"ts\": %.3f, \"dur\": %.3f", e.ts, e.dur);
      s += num;
      if (e.call >= 0) s += ", \"args\": {\"call\": " + std::to_string(e.call) + ", \"shapes\": " + quoted(e.shapes) + "}";
      s += "}";
    }
    return s + "\n]}\n";
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs a model on kiln's VM: an .onnx file, a module in kiln's IR text format, or an executable from kiln-compile.", "kiln-run"};
  std::string input, output, function = "main";
  std::vector<std::string> input_options, shape_options, bound_options, configs;
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  std::size_t threads = cores;
  int repeat = 1, warmup = 1;
  bool profile = false, profile_calls = false;
  std::string trace_path;
  unsigned seed = 0;
  app.add_option("MODEL", input,
                 "An .onnx file, IR text, a compiled executable, or a shared library from kiln-compile --exec-mode compiled "
                 "(named *.so; loading a library runs its code: load only libraries you trust)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-i,--input", input_options, "NAME=FILE.npy for a parameter (repeatable); others get random data")->allow_extra_args(false);
  app.add_option("-o,--output", output, "Write the output to this .npy file (several outputs: NAME.0.npy, NAME.1.npy, ...)");
  app.add_option("-f,--function", function, "The function to run");
  app.add_option("--shape", shape_options, "Fix an ONNX input's shape: NAME=D0,D1,... (repeatable)");
  app.add_option("--upper-bound", bound_options,
                 "Bound an ONNX model's symbolic dimension: NAME=N (repeatable; memory is planned for the largest sizes)");
  add_config_option(app, configs);
  app.add_option("-t,--threads", threads, "Threads for the kernels (default: this machine's cores, " + std::to_string(cores) + ", as ONNX Runtime)")
      ->check(CLI::Range(1, 1024));
  app.add_option("-r,--repeat", repeat, "Time this many runs (median, min, spread)")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup, "Untimed runs before --repeat's and the profile's, after the first (default 1)")->check(CLI::Range(0, 1000000));
  app.add_option("--seed", seed, "Seed for random inputs");
  auto* by_kernel = app.add_flag("--profile", profile, "Print the time spent in each kernel (native function)");
  app.add_flag("--profile-calls", profile_calls, "Print the time spent in each kernel call, in the order of a run, with the shapes of its tensors")
      ->excludes(by_kernel);
  app.add_option("--profile-json", trace_path,
                 "Write the profiled runs as a Chrome trace (trace-event JSON; open in Perfetto or chrome://tracing): one event "
                 "per run and per kernel call, with its shapes and thread");
  add_version(app, "kiln-run");
  KILN_TOOL_PARSE(app, argc, argv);

  return guarded("kiln-run", [&] {
    namespace vm = kiln::vm;
    kiln::kernels::set_num_threads(threads);
    std::map<std::string, std::vector<std::int64_t>> shapes;
    for (auto& s : shape_options) shapes.insert(parse_shape_option(s));
    std::map<std::string, std::int64_t> bounds;
    for (auto& b : bound_options) bounds.insert(parse_bound_option(b));
    model_kind kind{};
    kiln::pass_context ctx;
    if (!configs.empty()) kiln::transform::register_passes();
    apply_config(ctx, configs);
    const vm::executable ex = [&] {
      kiln::pass_context_scope scope(ctx);
      return load_model(input, shapes, bounds, &kind);
    }();
    const auto index = ex.find_function(function);
    if (!index || ex.functions[*index].kind == vm::function_kind::native) throw tool_error("the model has no function '" + function + "'");
    const vm::function_info& f = ex.functions[*index];

    // Inputs, by parameter name.
    std::map<std::string, std::string> files;
    for (auto& opt : input_options) {
      const auto eq = opt.find('=');
      if (eq == std::string::npos || eq == 0) throw tool_error("--input '" + opt + "': expected NAME=FILE.npy");
      std::string name = opt.substr(0, eq);
      // An ONNX input's name as the model spells it (past_key_values.0.key) or as the importer
      // made it a parameter name (past_key_values_0_key).
#if KILN_TOOLS_ONNX
      if (std::find(f.param_names.begin(), f.param_names.end(), name) == f.param_names.end() && kind == model_kind::onnx)
        name = kiln::frontend::onnx::detail::sanitize(name);
#endif
      if (std::find(f.param_names.begin(), f.param_names.end(), name) == f.param_names.end()) {
        std::string known;
        for (auto& p : f.param_names) known += (known.empty() ? "" : ", ") + p;
        throw tool_error("--input '" + opt + "': " + function + " has no parameter '" + name + "' (its parameters: " + known + ")");
      }
      files[name] = opt.substr(eq + 1);
    }
    std::mt19937 gen(seed);
    std::vector<vm::value> args;
    std::map<std::string, std::int64_t> bound;
    for (std::size_t i = 0; i < std::size_t(f.num_args); ++i) {
      const std::string name = i < f.param_names.size() ? f.param_names[i] : "#" + std::to_string(i);
      const vm::type_signature sig = i < f.param_types.size() ? f.param_types[i] : vm::type_signature::object();
      if (auto it = files.find(name); it != files.end()) {
        const tensor t = kiln::runtime::load_npy(it->second);
        if (auto problem = vm::check_argument(sig, t, bound))
          throw tool_error("input '" + name + "' ('" + it->second + "'): " + *problem + " (the parameter is " + sig.text() + ")");
        args.emplace_back(t);
      } else {
        args.emplace_back(random_input(sig, name, gen));
        std::cerr << "kiln-run: parameter '" << name << "' gets random data " << sig.text() << "\n";
      }
    }

    vm::virtual_machine machine(ex, {}, kiln::vm::kernel_registry());
    const vm::value result = machine.invoke_span(function, args);
    std::vector<tensor> outs;
    flatten(result, outs);
    for (std::size_t i = 0; i < outs.size(); ++i) std::cout << "output " << i << ": " << summary(outs[i]) << "\n";
    if (!output.empty()) {  // all of them or none
      kiln::detail::staged_files files("");
      std::vector<fs::path> written;
      for (std::size_t i = 0; i < outs.size(); ++i) {
        fs::path p = output;
        if (outs.size() > 1) p.replace_extension(std::to_string(i) + ".npy");
        files.add(p).write(kiln::runtime::to_npy(outs[i].contiguous()));
        written.push_back(p);
      }
      files.commit();
      for (auto& p : written) std::cerr << "kiln-run: wrote '" << p.string() << "'\n";
    }

    const bool tracing = !trace_path.empty();
    if (repeat > 1 || profile || profile_calls || tracing)  // caches, the allocator's pool and the kernels' threads warm
      for (int w = 0; w < warmup; ++w) machine.invoke_span(function, args);
    if (repeat > 1) {
      using clock = std::chrono::steady_clock;
      std::vector<double> ms;
      const auto start = clock::now();
      auto last_note = start;
      bool noted = false;
      for (int r = 0; r < repeat; ++r) {
        const auto t0 = clock::now();
        machine.invoke_span(function, args);
        ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
        if (clock::now() - last_note > std::chrono::seconds(2)) {
          std::cerr << "kiln-run: " << (r + 1) << " of " << repeat << " runs\r" << std::flush;
          last_note = clock::now();
          noted = true;
        }
      }
      if (noted) std::cerr << '\n';  // end the progress line, so that the summary starts a line of its own
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      std::printf("%d runs (after %d warm-up), %zu thread%s: median %.3f ms, min %.3f ms, spread (max - min) / median %.1f%%\n", repeat,
                  warmup, threads, threads == 1 ? "" : "s", median, ms.front(), 100.0 * (ms.back() - ms.front()) / median);
    }

    if (profile || profile_calls || tracing) {
      // One row per native function (--profile) or per call site, in the order of a run
      // (--profile-calls: the calls of a run are numbered; the same number is the same call).
      struct entry {
        std::string symbol, shapes;
        std::size_t calls = 0;
        double ms = 0;
      };
      std::map<std::string, entry, std::less<>> by_function;  // (std::less<>: looked up by string_view)
      std::vector<entry> by_call;
      std::size_t call = 0;  // of this run
      std::vector<std::chrono::steady_clock::time_point> started;
      trace_events trace;
      std::set<std::string, std::less<>> module_functions;  // calls between them are not rows: their kernels are
      for (auto& fn : ex.functions)
        if (fn.kind != vm::function_kind::native) module_functions.insert(fn.name);
      machine.set_instrument([&](const vm::value&, std::string_view symbol, bool before, const vm::value& ret, vm::call_args a) {
        if (module_functions.contains(symbol)) return vm::instrument_action::no_op;
        if (before) {
          started.push_back(std::chrono::steady_clock::now());
          return vm::instrument_action::no_op;
        }
        const auto now = std::chrono::steady_clock::now();
        const double ms = std::chrono::duration<double, std::milli>(now - started.back()).count();
        if (tracing) trace.add(std::string(symbol), started.back(), now, call_shapes(a, ret), static_cast<long>(call));
        started.pop_back();
        entry* e;
        if (profile_calls) {
          if (call == by_call.size()) by_call.push_back({std::string(symbol), call_shapes(a, ret)});
          e = &by_call[call++];
          if (e->symbol != symbol) e->symbol = "(differs between runs)";  // control flow took another way
        } else {
          ++call;
          auto at = by_function.find(symbol);
          if (at == by_function.end()) at = by_function.emplace(std::string(symbol), entry{std::string(symbol), {}}).first;
          e = &at->second;
        }
        ++e->calls;
        e->ms += ms;
        return vm::instrument_action::no_op;
      });
      const auto t0 = std::chrono::steady_clock::now();
      trace.origin = t0;
      for (int r = 0; r < repeat; ++r, call = 0) {
        const auto r0 = std::chrono::steady_clock::now();
        machine.invoke_span(function, args);
        if (tracing) trace.add(function + " (run " + std::to_string(r) + ")", r0, std::chrono::steady_clock::now(), {}, -1);
      }
      const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      machine.set_instrument(nullptr);
      if (tracing) {
        write_output(trace_path, trace.json(input, threads));
        std::cerr << "kiln-run: wrote a trace of " << repeat << " run" << (repeat == 1 ? "" : "s") << " to '" << trace_path
                  << "' (open it in https://ui.perfetto.dev or chrome://tracing)\n";
        if (!profile && !profile_calls) return 0;
      }
      std::vector<entry> rows = by_call;
      if (!profile_calls) {
        for (auto& [name, e] : by_function) rows.push_back(e);
        std::sort(rows.begin(), rows.end(), [](auto& x, auto& y) { return x.ms > y.ms; });
      }
      double in_natives = 0;
      for (auto& e : rows) in_natives += e.ms;
      std::printf("\nprofile over %d run%s (%.3f ms per run; natives %.1f%% of it, the rest the VM and the instrument; kernels %s; caches %s):\n",
                  repeat, repeat == 1 ? "" : "s", total / repeat, 100.0 * in_natives / total, kiln::kernels::isa_report().c_str(),
                  kiln::kernels::caches_report(kiln::kernels::cpu_caches()).c_str());
      if (profile_calls)
        std::printf("  %5s  %-36s %12s %8s  %s\n", "call", "native function", "ms per run", "share", "tensor arguments -> result");
      else
        std::printf("  %-36s %8s %12s %8s\n", "native function", "calls", "ms per run", "share");
      if (rows.empty() && std::any_of(ex.functions.begin(), ex.functions.end(), [](auto& f) { return f.kind == vm::function_kind::compiled; }))
        std::printf("  (no calls reported: compiled functions report their calls only when built with kiln-compile --instrumented)\n");
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const entry& e = rows[i];
        if (profile_calls)
          std::printf("  %5zu  %-36s %12.3f %7.1f%%  %s\n", i, e.symbol.c_str(), e.ms / repeat, 100.0 * e.ms / total, e.shapes.c_str());
        else
          std::printf("  %-36s %8zu %12.3f %7.1f%%\n", e.symbol.c_str(), e.calls / std::size_t(repeat), e.ms / repeat, 100.0 * e.ms / total);
      }
    }
    return 0;
  });
}
