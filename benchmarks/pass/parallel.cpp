// SPDX-License-Identifier: Apache-2.0
// Function passes on several threads (pass_context::set_num_threads): kiln's own function passes
// (canonicalize_bindings, eliminate_common_subexpr, to_non_dataflow, as a static sequential) over a
// module of F = 1,000 functions of 40 bindings each (and of 10, where starting threads costs most),
// on 1 thread (the run in order users get by default) and on 2, in one run. The speed-up is the
// ratio of the real times (counter `functions_per_s`). Modules replaced inside the pipeline are
// released on the context's threads; the output is released by the caller, timed apart.
#include <kiln/ir/parser.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>
#include <kiln/transform/canonicalize_bindings.hpp>
#include <kiln/transform/eliminate_common_subexpr.hpp>
#include <kiln/transform/to_non_dataflow.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

namespace {

/// F functions, each 40 bindings: pairs of identical matmul/add chains (work for CSE) and copies
/// (work for canonicalize_bindings).
kiln::ir::ir_module make_module(int functions) {
  std::string text = "@I.ir_module\nclass Module:\n";
  for (int f = 0; f < functions; ++f) {
    const std::string t = "R.Tensor((8, 16), \"float32\")";
    text.append("    @R.function\n    def f").append(std::to_string(f)).append("(x: ").append(t);
    text.append(", w: R.Tensor((16, 16), \"float32\")) -> ").append(t).append(":\n        with R.dataflow():\n");
    std::string prev = "x";
    for (int i = 0; i < 10; ++i) {
      const std::string n = std::to_string(i);
      text.append("            a").append(n).append(": ").append(t).append(" = R.matmul(").append(prev).append(", w)\n");
      text.append("            b").append(n).append(": ").append(t).append(" = R.matmul(").append(prev).append(", w)\n");
      text.append("            c").append(n).append(": ").append(t).append(" = a").append(n).append("\n");
      text.append("            d").append(n).append(": ").append(t).append(" = R.add(c").append(n).append(", b").append(n).append(")\n");
      prev = "d" + n;
    }
    text.append("            R.output(").append(prev).append(")\n        return ").append(prev).append("\n");
  }
  return kiln::ir::parse_module(text);
}

using function_passes = kiln::sequential<kiln::transform::canonicalize_bindings, kiln::transform::eliminate_common_subexpr,
                                         kiln::transform::to_non_dataflow>;

/// The pipeline's run, from the input module to the output module. Releasing the output is the
/// caller's business (it happens whenever the caller drops the module) and is timed apart below.
void function_passes_on_threads(benchmark::State& state) {
  const int functions = static_cast<int>(state.range(0));
  const kiln::ir::ir_module m = make_module(functions);
  kiln::pass_context ctx;
  ctx.set_num_threads(static_cast<std::size_t>(state.range(1)));
  function_passes pipeline;
  std::size_t functions_out = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    kiln::ir::ir_module out = kiln::run(pipeline, m, ctx);
    benchmark::DoNotOptimize(out);
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    functions_out = out->functions().size();
  }
  if (functions_out != static_cast<std::size_t>(functions)) state.SkipWithError("the pipeline lost functions");
  state.counters["functions_per_s"] =
      benchmark::Counter(static_cast<double>(functions), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(function_passes_on_threads)
    ->ArgNames({"functions", "threads"})
    ->Args({1000, 1})
    ->Args({1000, 2})
    ->Args({10, 1})
    ->Args({10, 2})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

/// The same with the release of the output module (on the calling thread) counted too.
void function_passes_and_release(benchmark::State& state) {
  const kiln::ir::ir_module m = make_module(static_cast<int>(state.range(0)));
  kiln::pass_context ctx;
  ctx.set_num_threads(static_cast<std::size_t>(state.range(1)));
  function_passes pipeline;
  for (auto _ : state) {
    kiln::ir::ir_module out = kiln::run(pipeline, m, ctx);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(function_passes_and_release)
    ->ArgNames({"functions", "threads"})
    ->Args({1000, 1})
    ->Args({1000, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
