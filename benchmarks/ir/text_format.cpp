// SPDX-License-Identifier: Apache-2.0
// Throughput of the IR's tooling on modules of F transformer encoder layers (25 bindings each):
// building, printing, parsing, structural hashing and equality, verification, and an identity
// mutator pass (which must rebuild nothing). Reported per binding, so sizes compare directly.
#include "models.hpp"

#include <benchmark/benchmark.h>

namespace {
namespace ir = kiln::ir;

constexpr int bindings_per_layer = 25;

ir::ir_module layers(int count) {
  ir::ir_module one = kiln_test::make_transformer_layer();
  ir::ir_module m = ir::make_module();
  for (int i = 0; i < count; ++i) m = ir::with_function(m, "layer_" + std::to_string(i), one->lookup("encoder_layer"));
  return m;
}

void per_binding(benchmark::State& state) {
  const auto items = static_cast<std::int64_t>(state.iterations()) * state.range(0) * bindings_per_layer;
  state.SetItemsProcessed(items);
  state.counters["ns_per_binding"] =
      benchmark::Counter(static_cast<double>(items), benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}

void BM_build(benchmark::State& state) {
  for (auto _ : state)
    for (int i = 0; i < state.range(0); ++i) benchmark::DoNotOptimize(kiln_test::make_transformer_layer());
  per_binding(state);
}

void BM_print(benchmark::State& state) {
  ir::ir_module m = layers(static_cast<int>(state.range(0)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = ir::print(m);
    bytes += text.size();
    benchmark::DoNotOptimize(text);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  per_binding(state);
}

void BM_parse(benchmark::State& state) {
  const std::string text = ir::print(layers(static_cast<int>(state.range(0))));
  for (auto _ : state) benchmark::DoNotOptimize(ir::parse_module(text));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  per_binding(state);
}

void BM_structural_hash(benchmark::State& state) {
  ir::ir_module m = layers(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(ir::structural_hash(m));
  per_binding(state);
}

void BM_structural_equal(benchmark::State& state) {
  ir::ir_module m = layers(static_cast<int>(state.range(0)));
  ir::ir_module copy = ir::parse_module(ir::print(m));  // equal, but no shared nodes
  for (auto _ : state) benchmark::DoNotOptimize(ir::structural_equal(m, copy));
  per_binding(state);
}

void BM_verify(benchmark::State& state) {
  ir::ir_module m = layers(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(ir::verify(m));
  per_binding(state);
}

void BM_identity_mutator(benchmark::State& state) {
  ir::ir_module m = layers(static_cast<int>(state.range(0)));
  ir::expr_mutator identity;
  for (auto _ : state) {
    ir::ir_module out = identity.mutate_module(m);
    if (out != m) state.SkipWithError("the identity mutator rebuilt the module");
    benchmark::DoNotOptimize(out);
  }
  per_binding(state);
}

BENCHMARK(BM_build)->Arg(1)->Arg(16);
BENCHMARK(BM_print)->Arg(1)->Arg(16);
BENCHMARK(BM_parse)->Arg(1)->Arg(16);
BENCHMARK(BM_structural_hash)->Arg(1)->Arg(16);
BENCHMARK(BM_structural_equal)->Arg(1)->Arg(16);
BENCHMARK(BM_verify)->Arg(1)->Arg(16);
BENCHMARK(BM_identity_mutator)->Arg(1)->Arg(16);
}  // namespace

BENCHMARK_MAIN();
