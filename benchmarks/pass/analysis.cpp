// SPDX-License-Identifier: Apache-2.0
// What two pass-manager features cost:
//   - an analysis cache hit: `ctx.analysis<A>(unit)` on a cached result (and, for scale, a miss:
//     computing a trivial result and storing it);
//   - the fixed-point combinator, per iteration: `repeat_until_fixed<64, p0..p9, settle>` against
//     the same loop written by hand (the ten work passes over every function, then `settle`, then
//     "did anything change?"), on a module that reaches its fixed point after 8 iterations.
// Reported: ns per hit / per iteration.
//
// `pass_analysis_bench --callgrind <hit|miss|loop_a|loop_b> <F> <reps>` runs one variant `reps`
// times inside `kiln_measure`, for instruction counts: see benchmarks/pass/callgrind_analysis.sh.
#include "bench_ir.hpp"

#include <kiln/pass/analysis.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/repeat.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

// ---- analyses -----------------------------------------------------------------------------------

using unit = std::shared_ptr<const int>;

/// A trivial analysis: what it costs is the cache, not the analysis.
struct doubled {
  static constexpr std::string_view name = "doubled";
  int run(const unit& u) const { return 2 * *u; }
};

/// `reps` lookups of the same cached result.
__attribute__((noinline)) long hits(kiln::pass_context& ctx, const unit& u, int reps) {
  long sum = 0;
  for (int r = 0; r < reps; ++r) sum += *ctx.analysis<doubled>(u);
  return sum;
}
/// `reps` misses: the cache is cleared before each lookup.
__attribute__((noinline)) long misses(kiln::pass_context& ctx, const unit& u, int reps) {
  long sum = 0;
  for (int r = 0; r < reps; ++r) {
    ctx.analyses().clear();
    sum += *ctx.analysis<doubled>(u);
  }
  return sum;
}

void bm_analysis_hit(benchmark::State& state) {
  kiln::pass_context ctx;
  const unit u = std::make_shared<const int>(21);
  (void)ctx.analysis<doubled>(u);
  for (auto _ : state) benchmark::DoNotOptimize(hits(ctx, u, 1));
}
BENCHMARK(bm_analysis_hit);

void bm_analysis_miss(benchmark::State& state) {
  kiln::pass_context ctx;
  const unit u = std::make_shared<const int>(21);
  for (auto _ : state) benchmark::DoNotOptimize(misses(ctx, u, 1));
}
BENCHMARK(bm_analysis_miss);

// ---- the fixed-point combinator ------------------------------------------------------------------

/// bench's module with a version: a pass that "changes" it returns the next version.
struct versioned {
  std::vector<bench::function>* functions = nullptr;
  int version = 0;
};

constexpr int settles_after = 8;  // iterations until `settle` returns its input

/// Returns the next version until the module has changed `settles_after - 1` times.
struct settle {
  static constexpr std::string_view name = "settle";
  versioned operator()(const versioned& m) const {
    return m.version + 1 < settles_after ? versioned{m.functions, m.version + 1} : m;
  }
};

}  // namespace

template <>
struct kiln::module_traits<versioned> {
  using function_type = bench::function;
  template <class Fn>
  static versioned map_functions(const versioned& m, Fn&& fn) {
    for (bench::function& f : *m.functions) f = fn(std::string_view(), f);
    return m;
  }
  static bool skip_optimization(const bench::function& f) { return f.skip; }
  static bool same(const versioned& a, const versioned& b) { return a.functions == b.functions && a.version == b.version; }
  static void print(std::ostream& os, const versioned& m) { os << "versioned module " << m.version; }
};

namespace {

template <class Seq>
struct fixed_point_of;
template <int... I>
struct fixed_point_of<std::integer_sequence<int, I...>> {
  using type = kiln::repeat_until_fixed<64, bench::work_pass<I>..., settle>;

  /// (a) the same loop by hand.
  static versioned by_hand(const versioned& m) {
    using traits = kiln::module_traits<versioned>;
    versioned cur = m;
    for (int i = 0; i < 64; ++i) {
      versioned next = cur;
      ((next = traits::map_functions(next, [](std::string_view, const bench::function& f) {
          return traits::skip_optimization(f) ? f : bench::work<I>(f);
        })),
       ...);
      next = settle{}(next);
      if (traits::same(next, cur)) return next;
      cur = next;
    }
    return cur;
  }
};
using fixed_point = fixed_point_of<std::make_integer_sequence<int, 10>>;

versioned run_loop(char variant, const versioned& m, kiln::pass_context& ctx) {
  return variant == 'a' ? fixed_point::by_hand(m) : kiln::run(fixed_point::type{}, m, ctx);
}

void bm_fixed_point(benchmark::State& state, char variant) {
  std::vector<bench::function> fns = bench::make_functions(static_cast<std::size_t>(state.range(0)));
  const versioned m{&fns, 0};
  kiln::pass_context ctx;
  for (auto _ : state) {
    versioned out = run_loop(variant, m, ctx);
    benchmark::DoNotOptimize(out.version);
  }
  state.counters["ns_per_iteration"] =
      benchmark::Counter(settles_after, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(bm_fixed_point, a_handwritten, 'a')->ArgName("F")->Arg(1)->Arg(100);
BENCHMARK_CAPTURE(bm_fixed_point, b_repeat_until_fixed, 'b')->ArgName("F")->Arg(1)->Arg(100);

}  // namespace

/// The measured region for callgrind (--toggle-collect=kiln_measure*).
__attribute__((noinline)) long kiln_measure(const std::string& variant, std::size_t f, int reps) {
  kiln::pass_context ctx;
  if (variant == "hit" || variant == "miss") {
    const unit u = std::make_shared<const int>(21);
    (void)ctx.analysis<doubled>(u);
    return variant == "hit" ? hits(ctx, u, reps) : misses(ctx, u, reps);
  }
  std::vector<bench::function> fns = bench::make_functions(f);
  const versioned m{&fns, 0};
  long sum = 0;
  for (int r = 0; r < reps; ++r) sum += run_loop(variant == "loop_a" ? 'a' : 'b', m, ctx).version;
  return sum;
}

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--callgrind") == 0) {
    const std::string variant = argv[2];
    const auto f = static_cast<std::size_t>(std::atoll(argv[3]));
    const int reps = std::atoi(argv[4]);
    if (f == 0 || reps <= 0 || (variant != "hit" && variant != "miss" && variant != "loop_a" && variant != "loop_b")) return 2;
    // Warm up outside the measured region (first-use allocations, the statistics' map entries).
    (void)kiln_measure(variant, f, 1);
    std::printf("%ld\n", kiln_measure(variant, f, reps));
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
