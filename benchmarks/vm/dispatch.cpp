// SPDX-License-Identifier: Apache-2.0
// VM dispatch cost against the same work written in C++ (issue 4's four workloads):
//   (a) calls: one function of 1,000 Calls to a trivial native function   -> ns per Call
//   (b) loop:  a counting loop of If/Goto and native compare/increment    -> ns per iteration
//   (c) vmcall: 1,000 calls between bytecode functions                    -> ns per call
//   (d) enter: invoking an empty entry function from C++                  -> ns per invocation
// Each VM benchmark has a `hand` twin doing the same calls on noinline C++ functions.
//
// `vm_dispatch_bench --callgrind <workload> <variant vm|hand> <reps>` runs one workload `reps`
// times inside `kiln_measure` for instruction counts: see benchmarks/vm/callgrind.sh.
#include <kiln/vm/vm.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace kiln::vm;

namespace {

constexpr int calls_per_function = 1000;

// The native functions: trivially small, so the measurement is the dispatch around them.
// DoNotOptimize keeps the compiler from proving them pure and folding the hand-written loops.
__attribute__((noinline)) std::int64_t inc(std::int64_t x) {
  benchmark::DoNotOptimize(x);
  return x + 1;
}
__attribute__((noinline)) bool less(std::int64_t a, std::int64_t b) {
  benchmark::DoNotOptimize(a);
  return a < b;
}
__attribute__((noinline)) std::int64_t identity(std::int64_t x) {
  benchmark::DoNotOptimize(x);
  return x;
}

function_registry& registry() {
  static function_registry r;
  static const bool ready = [] {
    register_builtins(r);
    r.add("bench.inc", &inc);
    r.add("bench.less", &less);
    return true;
  }();
  (void)ready;
  return r;
}

/// (a) main(x): x = inc(x) 1,000 times; return x
executable native_calls() {
  exec_builder b;
  b.begin_function("main", {"x"}, 1);
  for (int i = 0; i < calls_per_function; ++i) b.emit_call("bench.inc", {b.r(0)}, 0);
  b.emit_ret(0);
  b.end_function();
  return b.get();
}

/// (b) main(n): i = 0; while (less(i, n)) i = inc(i); return i
executable counting_loop() {
  exec_builder b;
  b.begin_function("main", {"n"}, 3);
  auto loop = b.new_label(), done = b.new_label();
  b.emit_call("vm.builtin.copy", {b.imm(0)}, 1);
  b.bind(loop);
  b.emit_call("bench.less", {b.r(1), b.r(0)}, 2);
  b.emit_if(2, done);
  b.emit_call("bench.inc", {b.r(1)}, 1);
  b.emit_goto(loop);
  b.bind(done);
  b.emit_ret(1);
  b.end_function();
  return b.get();
}

/// (c) main(x): x = id(x) 1,000 times, id a bytecode function that returns its argument.
executable bytecode_calls() {
  exec_builder b;
  b.declare_function("id", function_kind::bytecode, 1);
  b.begin_function("main", {"x"}, 1);
  for (int i = 0; i < calls_per_function; ++i) b.emit_call("id", {b.r(0)}, 0);
  b.emit_ret(0);
  b.end_function();
  b.begin_function("id", {"x"}, 1);
  b.emit_ret(0);
  b.end_function();
  return b.get();
}

/// (d) main(x): return x
executable empty_entry() {
  exec_builder b;
  b.begin_function("main", {"x"}, 1);
  b.emit_ret(0);
  b.end_function();
  return b.get();
}

// ---- the hand-written twins ---------------------------------------------------------------------

__attribute__((noinline)) std::int64_t hand_calls(std::int64_t x) {
  for (int i = 0; i < calls_per_function; ++i) x = inc(x);
  return x;
}
__attribute__((noinline)) std::int64_t hand_loop(std::int64_t n) {
  std::int64_t i = 0;
  while (less(i, n)) i = inc(i);
  return i;
}
__attribute__((noinline)) std::int64_t hand_bytecode_calls(std::int64_t x) {
  for (int i = 0; i < calls_per_function; ++i) x = identity(x);
  return x;
}

constexpr std::int64_t loop_iterations = 1000;

struct workload {
  virtual_machine vm;
  function_handle main;
  explicit workload(executable e) : vm(std::move(e), {}, registry()), main(vm.get_function("main")) {}
};

void vm_calls(benchmark::State& s) {
  workload w(native_calls());
  for (auto _ : s) benchmark::DoNotOptimize(w.main(std::int64_t(0)));
  s.SetItemsProcessed(s.iterations() * calls_per_function);
}
void hand_calls_bench(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(hand_calls(0));
  s.SetItemsProcessed(s.iterations() * calls_per_function);
}
void vm_loop(benchmark::State& s) {
  workload w(counting_loop());
  for (auto _ : s) benchmark::DoNotOptimize(w.main(loop_iterations));
  s.SetItemsProcessed(s.iterations() * loop_iterations);
}
void hand_loop_bench(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(hand_loop(loop_iterations));
  s.SetItemsProcessed(s.iterations() * loop_iterations);
}
void vm_bytecode_calls(benchmark::State& s) {
  workload w(bytecode_calls());
  for (auto _ : s) benchmark::DoNotOptimize(w.main(std::int64_t(0)));
  s.SetItemsProcessed(s.iterations() * calls_per_function);
}
void hand_bytecode_calls_bench(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(hand_bytecode_calls(0));
  s.SetItemsProcessed(s.iterations() * calls_per_function);
}
void vm_enter(benchmark::State& s) {
  workload w(empty_entry());
  const value arg(std::int64_t(1));
  for (auto _ : s) benchmark::DoNotOptimize(w.main.call(std::span<const value>(&arg, 1)));
  s.SetItemsProcessed(s.iterations());
}
void hand_enter(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(identity(1));
  s.SetItemsProcessed(s.iterations());
}

// With --benchmark_repetitions, `min` is reported beside mean and median: on a shared machine the
// fastest repetition is the one least disturbed, and the most repeatable figure.
double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
#define KILN_DISPATCH_BENCHMARK(fn, name) BENCHMARK(fn)->Name(name)->ComputeStatistics("min", fastest)
KILN_DISPATCH_BENCHMARK(vm_calls, "a_calls/vm");
KILN_DISPATCH_BENCHMARK(hand_calls_bench, "a_calls/hand");
KILN_DISPATCH_BENCHMARK(vm_loop, "b_loop/vm");
KILN_DISPATCH_BENCHMARK(hand_loop_bench, "b_loop/hand");
KILN_DISPATCH_BENCHMARK(vm_bytecode_calls, "c_vmcall/vm");
KILN_DISPATCH_BENCHMARK(hand_bytecode_calls_bench, "c_vmcall/hand");
KILN_DISPATCH_BENCHMARK(vm_enter, "d_enter/vm");
KILN_DISPATCH_BENCHMARK(hand_enter, "d_enter/hand");

/// The measured region for callgrind (--toggle-collect=kiln_measure*).
__attribute__((noinline)) std::int64_t kiln_measure(char workload_id, bool use_vm, function_handle main, int reps) {
  std::int64_t sum = 0;
  const value arg(std::int64_t(workload_id == 'b' ? loop_iterations : 1));
  for (int r = 0; r < reps; ++r) {
    if (use_vm) {
      sum += main.call(std::span<const value>(&arg, 1)).as_int();
    } else {
      switch (workload_id) {
        case 'a': sum += hand_calls(1); break;
        case 'b': sum += hand_loop(loop_iterations); break;
        case 'c': sum += hand_bytecode_calls(1); break;
        default: sum += identity(1); break;
      }
    }
  }
  return sum;
}

int callgrind_run(char id, bool use_vm, int reps) {
  executable e = id == 'a' ? native_calls() : id == 'b' ? counting_loop() : id == 'c' ? bytecode_calls() : empty_entry();
  workload w(std::move(e));
  const value arg(std::int64_t(1));
  w.main.call(std::span<const value>(&arg, 1));  // warm: the register stack's first chunk
  std::printf("%lld\n", static_cast<long long>(kiln_measure(id, use_vm, w.main, reps)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--callgrind") == 0)
    return callgrind_run(argv[2][0], std::strcmp(argv[3], "vm") == 0, std::atoi(argv[4]));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
