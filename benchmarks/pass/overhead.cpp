// SPDX-License-Identifier: Apache-2.0
// What the pass infrastructure costs over hand-written code: K passes (K = 1, 10, 50), each a small
// fixed amount of work per function, over modules of F functions (F = 1, 100, 1000), run
//   (a) hand-written: the passes' work called directly, function by function;
//   (b) as kiln::sequential<...> (no instruments);
//   (c) as kiln::sequential<...> with the pass_timing instrument as a compile-time policy;
//   (d) as a run-time pipeline parsed from "p0,p1,...".
// Reported: ns per pass per function (counter `ns_per_pass_fn`).
//
// `pass_overhead_bench --callgrind <a|b|c|d> <K> <F> <reps>` runs one variant `reps` times inside
// `kiln_measure`, for instruction counts: see benchmarks/pass/callgrind.sh.
#include "bench_ir.hpp"

#include <kiln/pass/instruments/pass_timing.hpp>
#include <kiln/pass/pipeline.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace {

template <int K>
using passes = std::make_integer_sequence<int, K>;

template <class Seq>
struct pipeline_of;
template <int... I>
struct pipeline_of<std::integer_sequence<int, I...>> {
  using type = kiln::sequential<bench::work_pass<I>...>;
  static void register_all(kiln::pass_registry<bench::module>& r) { (r.add<bench::work_pass<I>>(), ...); }
};
template <int K>
using pipeline = typename pipeline_of<passes<K>>::type;

template <int K>
kiln::pass<bench::module> runtime_pipeline() {
  static kiln::pass_registry<bench::module> registry;
  pipeline_of<passes<K>>::register_all(registry);
  std::string text;
  for (int i = 0; i < K; ++i) text.append(i ? ",p" : "p").append(std::to_string(i));  // appends: GCC 12 -Wrestrict
  return kiln::parse_pipeline<bench::module>(text, registry);
}

/// One run of variant `v` with K passes on `m`.
template <int K>
struct variants {
  pipeline<K> seq;
  kiln::pass<bench::module> dynamic = runtime_pipeline<K>();
  kiln::pass_timing timer;

  bench::module run(char v, const bench::module& m, kiln::pass_context& ctx) {
    switch (v) {
      case 'a': return bench::handwritten(m, passes<K>{});
      case 'b': return seq(m, ctx);
      case 'c': {
        bench::module out = kiln::run(seq, m, ctx, timer);
        timer.reset();  // keep the report from growing between runs
        return out;
      }
      default: return dynamic(m, ctx);
    }
  }
};

template <int K>
void bm_pipeline(benchmark::State& state, char variant) {
  const auto f = static_cast<std::size_t>(state.range(0));
  std::vector<bench::function> fns = bench::make_functions(f);
  bench::module m{&fns};
  kiln::pass_context ctx;
  variants<K> v;
  for (auto _ : state) {
    bench::module out = v.run(variant, m, ctx);
    benchmark::DoNotOptimize(out.functions->data());
    benchmark::ClobberMemory();
  }
  const double per = static_cast<double>(K) * static_cast<double>(f);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * static_cast<std::int64_t>(per)));
  state.counters["ns_per_pass_fn"] =
      benchmark::Counter(per, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

template <int K>
void register_benchmarks() {
  const std::pair<char, const char*> kinds[] = {
      {'a', "a_handwritten"}, {'b', "b_sequential"}, {'c', "c_timing_policy"}, {'d', "d_runtime_pipeline"}};
  for (auto [variant, label] : kinds)
    benchmark::RegisterBenchmark(std::string(label).append("/K=").append(std::to_string(K)).c_str(),
                                 [variant = variant](benchmark::State& s) { bm_pipeline<K>(s, variant); })
        ->ArgName("F")
        ->Arg(1)
        ->Arg(100)
        ->Arg(1000);
}

}  // namespace

/// The measured region for callgrind (--toggle-collect=kiln_measure*).
template <int K>
__attribute__((noinline)) std::uint64_t kiln_measure(variants<K>& v, char variant, const bench::module& m,
                                                     kiln::pass_context& ctx, int reps) {
  std::uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) sink += v.run(variant, m, ctx).functions->front().state;
  return sink;
}

template <int K>
int callgrind_run(char variant, std::size_t f, int reps) {
  std::vector<bench::function> fns = bench::make_functions(f);
  bench::module m{&fns};
  kiln::pass_context ctx;
  variants<K> v;
  (void)v.run(variant, m, ctx);  // warm up: first-use allocations stay out of the measured region
  std::printf("%llu\n", static_cast<unsigned long long>(kiln_measure<K>(v, variant, m, ctx, reps)));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--callgrind") == 0) {
    const char variant = argv[2][0];
    const int k = std::atoi(argv[3]);
    const auto f = static_cast<std::size_t>(std::atoll(argv[4]));
    const int reps = std::atoi(argv[5]);
    if (f == 0 || reps <= 0 || std::strchr("abcd", variant) == nullptr) return 2;
    switch (k) {
      case 1: return callgrind_run<1>(variant, f, reps);
      case 10: return callgrind_run<10>(variant, f, reps);
      case 50: return callgrind_run<50>(variant, f, reps);
      default: std::fprintf(stderr, "K must be 1, 10 or 50\n"); return 2;
    }
  }
  register_benchmarks<1>();
  register_benchmarks<10>();
  register_benchmarks<50>();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
