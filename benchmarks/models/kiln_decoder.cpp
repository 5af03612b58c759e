// SPDX-License-Identifier: Apache-2.0
// kiln's side of the decoder comparison with ONNX Runtime and PyTorch (benchmarks/models/decoder_compare):
// one call of a decoder with past (scripts/gpt2.py's GPT-2 in ONNX) at the shapes of a prefill or
// of a decode step, on the VM with the kernels on 1 and 2 threads.
//
//     kiln_decoder_bench MODEL.onnx CASE... [Google Benchmark flags]
//
//     kiln_decoder_bench MODEL.onnx --copy-cache CASE...   (also each case with the cache copied,
//                                   as compiled without kv_cache_in_place: "kiln-copying/CASE")
//     kiln_decoder_bench MODEL.onnx --without PASS CASE...   (also each case compiled without the
//                                   pass PASS, e.g. fuse_attention: "kiln-without-PASS/CASE")
//     kiln_decoder_bench MODEL.onnx --ir WEIGHTS_DIR CASE...   (also each case on the same model
//                                   built in kiln's IR with its caches as VM state, examples/gpt2_ir.hpp,
//                                   on the weights scripts/gpt2.py --weights wrote: "kiln-ir/CASE")
//     kiln_decoder_bench MODEL.onnx --read-weights CASE...   (the weights read into memory at import,
//                                   import_options::map_weights = false, instead of mapped)
//     kiln_decoder_bench read:MiB      (the machine's memory read bandwidth, 1 and 2 threads)
//     kiln_decoder_bench MODEL.onnx --callgrind CASE vm|replay REPS   (for benchmarks/models/callgrind.sh:
//                                   REPS calls inside kiln_measure, on the VM or as the kernel calls
//                                   one VM call made, recorded and replayed from a loop)
//
// A CASE is prefill:N (a prompt of N tokens, an empty cache) or decode:C (one token after a cache
// of C positions), at batch 1, or with xB (decode:128x4) for B sequences at once. Inputs are what a generation loop passes at that point: token ids, a mask of
// ones, positions counting on from the cache, random cache contents (in a capacity buffer, as the
// previous step of a generation loop leaves them: runtime/kv_cache.hpp). The model is imported and
// compiled once: every case runs on the one executable.
//
// Protocol (the same in ort_decoder.js and torch_decoder.py): repetitions of at least 50 ms each,
// the median and the minimum over repetitions of the mean time per call; peak resident memory of
// the process once the model is compiled and at the end, on stderr.
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/kernels/isa.hpp>
#include <kiln/kernels/kernels.hpp>
#include <kiln/runtime/kv_cache.hpp>
#include <kiln/vm/generate.hpp>
#include <kiln/vm/vm.hpp>

#include "../../examples/gpt2_ir.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::runtime::tensor;
namespace vm = kiln::vm;

struct shared_model {
  std::shared_ptr<const vm::executable> ex;
  vm::decoder_layout layout;
};

/// The arguments of one call: `batch` sequences of `past` cached positions and `t` new ones.
std::vector<vm::value> arguments(const vm::decoder_layout& layout, std::int64_t past, std::int64_t t, std::int64_t batch) {
  std::mt19937 gen(1);
  std::vector<vm::value> args(layout.num_params);
  std::vector<std::int64_t> ids, pos;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < t; ++i) {
      ids.push_back(std::int64_t(gen() % 1000));
      pos.push_back(past + i);
    }
  const auto ints = [batch](const std::vector<std::int64_t>& v, kiln::dtype dt) {
    const kiln::runtime::shape_vector shape{batch, std::int64_t(v.size()) / batch};
    if (dt == kiln::dtype::int64) return vm::value(tensor::from_values<std::int64_t>(shape, std::span<const std::int64_t>(v)));
    const std::vector<std::int32_t> narrow(v.begin(), v.end());
    return vm::value(tensor::from_values<std::int32_t>(shape, std::span<const std::int32_t>(narrow)));
  };
  args[layout.input_ids] = ints(ids, layout.ids_dt);
  if (layout.attention_mask) args[*layout.attention_mask] = ints(std::vector<std::int64_t>(std::size_t(batch * (past + t)), 1), layout.mask_dt);
  if (layout.position_ids) args[*layout.position_ids] = ints(pos, layout.positions_dt);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const auto& c : layout.caches) {
    kiln::runtime::shape_vector shape;
    for (std::size_t d = 0; d < c.dims.size(); ++d) shape.push_back(d == 0 ? batch : d == c.axis ? past : c.dims[d]);
    tensor x = tensor::empty(shape, kiln::dtype::float32);
    float* p = x.data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = u(gen);
    // As a generation loop holds it: the previous step's present, a view of a capacity buffer
    // (twice the length, as kernels.kv_cache_append grows one), so that a compiled kv_cache_in_place
    // appends the step's position in place. Each call's result is dropped before the next, so every
    // call appends at the same position.
    shape[c.axis] = 0;
    args[c.param] = vm::value(kiln::runtime::kv_cache_append(tensor::empty(shape, kiln::dtype::float32), x, std::int64_t(c.axis)));
  }
  return args;
}

void call(benchmark::State& state, std::shared_ptr<shared_model> m, std::int64_t past, std::int64_t t, std::int64_t batch, std::size_t threads) {
  kiln::kernels::set_num_threads(threads);
  vm::virtual_machine machine(m->ex, {}, kiln::vm::kernel_registry());
  const std::vector<vm::value> args = arguments(m->layout, past, t, batch);
  const vm::function_handle f = machine.get_function("main");
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(f.call(args));  // warm-up: the arena, the caches
  for (auto _ : state) benchmark::DoNotOptimize(f.call(args));
  kiln::kernels::set_num_threads(1);
}

/// One forward() of the model in kiln's IR (gpt2_ir.hpp) with `past` positions cached and `t` new
/// ones. Its caches are objects the call appends to; after each call the `t` positions are popped
/// again (attention_kv_cache::pop_n, timed with the call: microseconds), so that every call
/// appends at the same position, in place, as a generation loop's step does.
void call_ir(benchmark::State& state, std::shared_ptr<const vm::executable> ex, gpt2_ir::config c, std::int64_t past, std::int64_t t,
             std::size_t threads) {
  kiln::kernels::set_num_threads(threads);
  vm::virtual_machine machine(ex, {}, kiln::vm::kernel_registry());
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(-1, 1);
  const std::int64_t hd = c.n_embd / c.n_head;
  tensor init = tensor::empty({c.n_head, past, hd}, kiln::dtype::float32);
  for (std::int64_t i = 0; i < init.numel(); ++i) init.data<float>()[i] = u(gen);
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < t; ++i) ids.push_back(std::int64_t(gen() % 1000));
  std::vector<vm::value> caches;
  for (std::int64_t i = 0; i < 2 * c.n_layer; ++i)
    caches.push_back(vm::value::from_object(
        kiln::runtime::make_object<kiln::runtime::attention_kv_cache>(init, kiln::runtime::shape_vector{c.n_head, c.n_positions, hd}, -1, 1)));
  const vm::value args[] = {vm::value(tensor::from_values<std::int64_t>({1, t}, std::span<const std::int64_t>(ids))),
                            vm::value::shape({past + t}), vm::value::tuple(caches)};
  const vm::function_handle f = machine.get_function("forward");
  auto step = [&] {
    benchmark::DoNotOptimize(f.call(args));
    for (const vm::value& cache : caches) cache.as_object<kiln::runtime::attention_kv_cache>()->pop_n(t);
  };
  for (int i = 0; i < 2; ++i) step();  // warm-up: the arena, the caches
  for (auto _ : state) step();
  kiln::kernels::set_num_threads(1);
}

/// Sums `n` floats (a multiple of 64) with eight independent vector accumulators: a read of
/// memory that no arithmetic limits.
float read_all(const float* p, std::size_t n) {
  using v8 = float __attribute__((vector_size(32)));
  v8 acc[8] = {};
  for (std::size_t i = 0; i < n; i += 64)
    for (int k = 0; k < 8; ++k) {
      v8 x;
      std::memcpy(&x, p + i + 8 * std::size_t(k), sizeof x);
      acc[k] += x;
    }
  float s = 0;
  for (auto& a : acc)
    for (int k = 0; k < 8; ++k) s += a[k];
  return s;
}

/// One read of `buffer` split among `threads` threads, each reading a contiguous part.
void read_buffer(benchmark::State& state, const std::vector<float>& buffer, std::size_t threads) {
  const std::size_t chunk = buffer.size() / threads / 64 * 64;
  std::vector<float> sums(threads);
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back([&, t] { sums[t] = read_all(buffer.data() + t * chunk, chunk); });
    sums[0] = read_all(buffer.data(), chunk);
    for (auto& th : pool) th.join();
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["bytes"] = double(chunk * threads * sizeof(float));
}

/// A case: `past` cached positions and `t` new ones, for `batch` sequences.
struct bench_case {
  std::int64_t past, t, batch;
};

/// prefill:N, decode:C, either with xB for a batch of B; anything else is an error naming it.
bench_case parse_case(const std::string& c) {
  const auto colon = c.find(':'), x = c.find('x');
  const std::string kind = c.substr(0, colon);
  std::int64_t n = -1, batch = 1;
  try {
    std::size_t used = 0;
    if (colon != std::string::npos) n = std::stoll(c.substr(colon + 1), &used);
    if (colon + 1 + used != (x == std::string::npos ? c.size() : x)) n = -1;
    if (x != std::string::npos) batch = std::stoll(c.substr(x + 1), &used), batch = x + 1 + used == c.size() ? batch : 0;
  } catch (const std::exception&) {
    n = -1;
  }
  if ((kind != "prefill" && kind != "decode") || n < (kind == "prefill" ? 1 : 0) || batch < 1)
    throw std::runtime_error("a case is prefill:N (N >= 1) or decode:C (C >= 0), with xB for a batch of B, not '" + c + "'");
  return kind == "prefill" ? bench_case{0, n, batch} : bench_case{n, 1, batch};
}

/// What callgrind counts (--toggle-collect=kiln_measure): `reps` runs of `f`.
extern "C" __attribute__((noinline)) void kiln_measure(const std::function<void()>& f, int reps) {
  for (int i = 0; i < reps; ++i) f();
}

/// One kernel call of a VM call: the kernel and its arguments (outputs included, so the buffers
/// the VM planned stay alive and are written again).
struct recorded_call {
  vm::native_function fn;
  std::vector<vm::value> args;
};

/// Fills `r` with the kernels' registry, whose kernels.* functions also append each call to `log`.
void recording(vm::function_registry& r, std::shared_ptr<std::vector<recorded_call>> log) {
  const vm::function_registry& base = kiln::vm::kernel_registry();
  for (const std::string& name : base.names()) {
    vm::native_function f = *base.find(name);
    if (!name.starts_with("kernels.")) {
      r.add(name, f);
      continue;
    }
    auto state = std::make_shared<const std::pair<vm::native_function, std::shared_ptr<std::vector<recorded_call>>>>(f, log);
    vm::native_function w;
    w.fn = [](const void* st, vm::call_args a) -> vm::raw_value {
      const auto& [inner, calls] = *static_cast<const std::pair<vm::native_function, std::shared_ptr<std::vector<recorded_call>>>*>(st);
      recorded_call c{inner, {}};
      for (std::size_t i = 0; i < a.size(); ++i) c.args.push_back(a[i]);
      calls->push_back(std::move(c));
      return inner.fn(inner.state, a);
    };
    w.state = state.get();
    w.owner = state;
    w.arity = f.arity;
    r.add(name, std::move(w));
  }
}

/// --callgrind: `reps` calls of CASE inside kiln_measure, on the VM ("vm") or as the kernel calls
/// one VM call made, replayed in order from a loop ("replay": what a hand-written loop calling the
/// same kernels with every buffer allocated once costs). The executable is compiled without
/// kv_cache_in_place, so that every kernel call can be replayed as it was made (an append in place
/// is not repeatable: it moves the cache's end).
int callgrind_mode(const char* model, const std::string& c, const std::string& mode, int reps) {
  const bench_case bc = parse_case(c);
  kiln::pass_context ctx;
  ctx.disable("kv_cache_in_place");
  std::shared_ptr<const vm::executable> ex;
  {
    kiln::pass_context_scope scope(ctx);
    ex = std::make_shared<const vm::executable>(kiln::compile(kiln::frontend::onnx::import_file(model)));
  }
  auto log = std::make_shared<std::vector<recorded_call>>();
  vm::function_registry rec;
  recording(rec, log);
  vm::virtual_machine machine(ex, {}, mode == "vm" ? kiln::vm::kernel_registry() : rec);
  const vm::decoder_layout layout = vm::decoder(machine).layout();
  const std::vector<vm::value> args = arguments(layout, bc.past, bc.t, bc.batch);
  const vm::function_handle f = machine.get_function("main");
  for (int i = 0; i < 2; ++i) f.call(args);  // warm-up: the arena
  if (mode == "vm") {
    kiln_measure([&] { benchmark::DoNotOptimize(f.call(args)); }, reps);
  } else if (mode == "replay") {
    log->clear();
    f.call(args);
    const std::vector<recorded_call> calls = std::move(*log);
    std::vector<std::vector<const vm::value*>> ptrs;
    for (const recorded_call& r : calls) {
      ptrs.emplace_back();
      for (const vm::value& v : r.args) ptrs.back().push_back(&v);
    }
    kiln_measure([&] {
      for (std::size_t i = 0; i < calls.size(); ++i) vm::value::from_raw(calls[i].fn.fn(calls[i].fn.state, vm::call_args(ptrs[i].data(), ptrs[i].size())));
    }, reps);
    std::cerr << "kiln_decoder_bench: " << calls.size() << " kernel calls per call\n";
  } else {
    std::cerr << "kiln_decoder_bench: --callgrind takes vm or replay, not '" << mode << "'\n";
    return 2;
  }
  return 0;
}

template <class F>
void add(const std::string& name, F&& f) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<F>(f))
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.05)
      ->Repetitions(7)
      ->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
      ->ReportAggregatesOnly(true)
      ->UseRealTime();
}

/// The process's peak resident memory since it began, in MiB: VmHWM, the high-water mark of its
/// own address space. (getrusage's ru_maxrss is not: Linux carries it over from the parent across
/// fork and exec, so a child of a large process, as decoder_compare is, reports the parent's size.)
long peak_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6)) / 1024;
  throw std::runtime_error("/proc/self/status has no VmHWM line");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("kiln kernels", kiln::kernels::isa_report());
  if (argc >= 2 && std::string(argv[1]).starts_with("read:")) {
    // The machine's read bandwidth, in a process of its own (its buffer would count in the
    // decoder's peak memory): a buffer of that many MiB, read whole by 1 and 2 threads.
    const std::size_t mib = std::stoull(std::string(argv[1]).substr(5));
    auto buffer = std::make_shared<std::vector<float>>(mib << 18, 1.0f);
    for (std::size_t threads : {1, 2})
      add("read/" + std::to_string(mib) + "MiB/threads:" + std::to_string(threads),
          [=](benchmark::State& s) { read_buffer(s, *buffer, threads); });
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  }
  if (argc == 6 && std::string(argv[2]) == "--callgrind") {
    try {
      return callgrind_mode(argv[1], argv[3], argv[4], std::stoi(argv[5]));
    } catch (const std::exception& e) {
      std::cerr << "kiln_decoder_bench: " << e.what() << "\n";
      return 1;
    }
  }
  if (argc < 3) {
    std::cerr << "usage: kiln_decoder_bench MODEL.onnx prefill:N|decode:C ... [Google Benchmark flags]\n"
                 "       kiln_decoder_bench read:MiB [Google Benchmark flags]   (the memory read bandwidth)\n";
    return 2;
  }
  try {
    // --copy-cache, --without PASS: also the executable compiled without kv_cache_in_place (each
    // step copies the cache, as the model is written) or without PASS, as "kiln-copying/CASE" or
    // "kiln-without-PASS/CASE", taking turns with "kiln/CASE".
    std::string without, label, ir_weights;
    kiln::frontend::onnx::import_options import;
    if (argc > 2 && std::string(argv[2]) == "--read-weights") {
      import.map_weights = false;
      std::rotate(argv + 2, argv + 3, argv + argc--);
    }
    if (argc > 3 && std::string(argv[2]) == "--ir") {
      ir_weights = argv[3];
      std::rotate(argv + 2, argv + 4, argv + argc), argc -= 2;
    }
    if (argc > 2 && std::string(argv[2]) == "--copy-cache") {
      without = "kv_cache_in_place", label = "kiln-copying";
      std::rotate(argv + 2, argv + 3, argv + argc--);
    } else if (argc > 3 && std::string(argv[2]) == "--without") {
      without = argv[3], label = "kiln-without-" + without;
      std::rotate(argv + 2, argv + 4, argv + argc), argc -= 2;
    }
    const bool copying = !without.empty();
    auto m = std::make_shared<shared_model>();
    m->ex = std::make_shared<const vm::executable>(kiln::compile(kiln::frontend::onnx::import_file(argv[1], import)));
    std::cerr << "kiln_decoder_bench: peak resident memory once compiled " << peak_mib() << " MiB\n";
    auto copy = std::make_shared<shared_model>();
    if (copying) {
      kiln::pass_context ctx;
      ctx.disable(without);
      kiln::pass_context_scope scope(ctx);
      copy->ex = std::make_shared<const vm::executable>(kiln::compile(kiln::frontend::onnx::import_file(argv[1], import)));
    }
    std::shared_ptr<const vm::executable> ir_ex;
    std::optional<gpt2_ir::config> ir_config;
    if (!ir_weights.empty()) {
      const gpt2_ir::weights w(ir_weights);
      ir_ex = std::make_shared<const vm::executable>(kiln::compile(gpt2_ir::build(w)));
      ir_config = w.cfg();
    }
    {
      vm::virtual_machine probe(m->ex, {}, kiln::vm::kernel_registry());
      m->layout = vm::decoder(probe).layout();
      copy->layout = m->layout;
    }
    for (int i = 2; i < argc; ++i) {
      const std::string c = argv[i];
      const bench_case bc = parse_case(c);
      for (std::size_t threads : {1, 2}) {
        add("kiln/" + c + "/threads:" + std::to_string(threads), [=](benchmark::State& s) {
          call(s, m, bc.past, bc.t, bc.batch, threads);
        });
        if (copying)
          add(label + "/" + c + "/threads:" + std::to_string(threads), [=](benchmark::State& s) {
            call(s, copy, bc.past, bc.t, bc.batch, threads);
          });
        if (ir_ex) {
          if (bc.batch != 1 || bc.past + bc.t > ir_config->n_positions)
            throw std::runtime_error("--ir runs batch 1 within n_positions " + std::to_string(ir_config->n_positions) + ", not '" + c + "'");
          add("kiln-ir/" + c + "/threads:" + std::to_string(threads), [=](benchmark::State& s) {
            call_ir(s, ir_ex, *ir_config, bc.past, bc.t, threads);
          });
        }
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "kiln_decoder_bench: " << e.what() << "\n";
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::cerr << "kiln_decoder_bench: peak resident memory " << peak_mib() << " MiB\n";
  return 0;
}
