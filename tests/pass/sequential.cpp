// SPDX-License-Identifier: Apache-2.0
// kiln::sequential: static dependency resolution, the enabled check, nesting, text form.
#include "probes.hpp"

#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <doctest/doctest.h>

using namespace kiln_test;
using kiln::pass_list;

namespace {

using a = module_probe<"a">;
using b = module_probe<"b", 0, pass_list<a>>;
using c = module_probe<"c", 0, pass_list<b>>;
using d = module_probe<"d", 0, pass_list<a, b>>;
using heavy = module_probe<"heavy", 3>;
using needs_heavy = module_probe<"needs_heavy", 0, pass_list<heavy>>;
using heavy_user = module_probe<"heavy_user", 3, pass_list<a>>;

struct scale {
  static constexpr std::string_view name = "scale";
  long factor = 1;
  toy::function operator()(const toy::function& f) const { return {f.name, f.value * factor, f.skip}; }
};

template <class Seq>
strings plan_of() {
  strings out;
  for (const auto& s : Seq::steps()) out.push_back(std::string(s.name) + (s.pulled_in ? "*" : ""));
  return out;
}

template <class Seq>
strings run_trace(kiln::pass_context& ctx) {
  trace().clear();
  Seq seq;
  (void)seq(toy::make_module(1), ctx);
  return take_trace();
}

}  // namespace

TEST_CASE("a required pass is placed before the pass that needs it") {
  CHECK(plan_of<kiln::sequential<b>>() == strings{"a*", "b"});
  CHECK(plan_of<kiln::sequential<c>>() == strings{"a*", "b*", "c"});  // transitively, deepest first
}

TEST_CASE("a required pass is placed at most once, however many passes need it") {
  CHECK(plan_of<kiln::sequential<b, d>>() == strings{"a*", "b", "d"});
  CHECK(plan_of<kiln::sequential<d, c>>() == strings{"a*", "b*", "d", "c"});
}

TEST_CASE("a listed pass already placed as a requirement is not placed again") {
  CHECK(plan_of<kiln::sequential<a, b>>() == strings{"a", "b"});
  CHECK(plan_of<kiln::sequential<b, a>>() == strings{"a", "b"});  // the requirement step takes the user's a
}

TEST_CASE("a pass listed twice runs twice") {
  CHECK(plan_of<kiln::sequential<a, b, a>>() == strings{"a", "b", "a"});
  CHECK(plan_of<kiln::sequential<b, a, a>>() == strings{"a", "b", "a"});
  kiln::pass_context ctx;
  CHECK(run_trace<kiln::sequential<a, b, a>>(ctx) == strings{"a", "b", "a"});
}

TEST_CASE("passes run in plan order and thread the module through") {
  kiln::pass_context ctx;
  kiln::sequential<c, function_probe<"f">> seq;
  trace().clear();
  toy::module in = toy::make_module(2);
  toy::module out = seq(in, ctx);
  CHECK(take_trace() == strings{"a", "b", "c", "f:f0", "f:f1", "f:a", "f:b", "f:c"});
  CHECK(out.functions->size() == 5);
  CHECK(out.value("f1") == 2);
  CHECK(in.functions->size() == 2);  // the input is untouched
  CHECK(in.value("f1") == 1);
}

TEST_CASE("an empty sequential returns the module it was given") {
  kiln::pass_context ctx;
  kiln::sequential<> seq;
  toy::module in = toy::make_module(2);
  CHECK(kiln::module_traits<toy::module>::same(seq(in, ctx), in));
  CHECK(kiln::sequential<>::text().empty());
}

TEST_CASE("the enabled check: opt level, disabled and required names (TVM's rule)") {
  kiln::pass_context ctx;  // opt level 2
  CHECK(run_trace<kiln::sequential<a, heavy>>(ctx) == strings{"a"});
  ctx.set_opt_level(3);
  CHECK(run_trace<kiln::sequential<a, heavy>>(ctx) == strings{"a", "heavy"});
  ctx.disable("heavy");
  CHECK(run_trace<kiln::sequential<a, heavy>>(ctx) == strings{"a"});

  kiln::pass_context low(0);
  low.require("heavy");
  CHECK(run_trace<kiln::sequential<a, heavy>>(low) == strings{"a", "heavy"});
  low.disable("heavy");  // disabled wins over required
  CHECK(run_trace<kiln::sequential<a, heavy>>(low) == strings{"a"});
}

TEST_CASE("a pass pulled in as a requirement runs whatever its own opt level") {
  kiln::pass_context ctx(0);
  CHECK(run_trace<kiln::sequential<needs_heavy>>(ctx) == strings{"heavy", "needs_heavy"});
}

TEST_CASE("a pulled-in pass does not run when nothing that needs it runs") {
  kiln::pass_context ctx;  // heavy_user (level 3) is off at level 2, so its requirement a is not needed
  CHECK(run_trace<kiln::sequential<heavy_user>>(ctx) == strings{});
  ctx.set_opt_level(3);
  CHECK(run_trace<kiln::sequential<heavy_user>>(ctx) == strings{"a", "heavy_user"});
}

TEST_CASE("disabling a pass that a running pass requires is an error before anything runs") {
  kiln::pass_context ctx;
  ctx.disable("a");
  trace().clear();
  kiln::sequential<c> seq;
  CHECK(message_of<kiln::usage_error>([&] { (void)seq(toy::make_module(1), ctx); }) ==
        "kiln::sequential 'sequential': pass 'a' is disabled in the pass_context, but 'b', which runs, requires it; "
        "disable 'b' too, or stop disabling 'a'");
  CHECK(trace().empty());
  ctx.disable("b").disable("c");
  CHECK(run_trace<kiln::sequential<c>>(ctx) == strings{});
}

TEST_CASE("a sequential is a pass: it has a name and opt level and nests") {
  using inner = kiln::named_sequential<"cleanup", 1, b, function_probe<"f">>;
  using outer = kiln::sequential<inner, c>;
  static_assert(kiln::pass_like<inner>);
  CHECK(inner::name == "cleanup");
  CHECK(inner::opt_level == 1);
  CHECK(kiln::pass_info_of<inner, toy::module>.kind == kiln::pass_kind::sequential);
  // Requirements resolve inside each sequential: c's requirements are placed again in the outer one.
  CHECK(plan_of<outer>() == strings{"cleanup", "a*", "b*", "c"});
  kiln::pass_context ctx;
  CHECK(run_trace<outer>(ctx) == strings{"a", "b", "f:f0", "f:a", "f:b", "a", "b", "c"});
  ctx.set_opt_level(0);  // the whole nested pipeline is below the level
  CHECK(run_trace<outer>(ctx) == strings{"a", "b", "c"});
}

TEST_CASE("text() prints the listed passes, nested pipelines in parentheses") {
  using inner = kiln::named_sequential<"cleanup", 1, b, function_probe<"f">>;
  CHECK(kiln::sequential<inner, c>::text() == "cleanup<1>(b,f),c");  // the opt level when not 0
  CHECK(kiln::sequential<a>::text() == "a");
}

TEST_CASE("stateful passes are given as instances, pulled-in passes are default-constructed") {
  kiln::pass_context ctx;
  kiln::sequential seq(scale{10}, a{});  // class template argument deduction
  toy::module out = seq(toy::make_module(3), ctx);
  CHECK(out.value("f2") == 20);
  CHECK(seq.get<0>().factor == 10);
  seq.get<0>().factor = 100;
  CHECK(seq(toy::make_module(3), ctx).value("f2") == 200);
}

TEST_CASE("function passes leave functions marked SkipOptimization alone") {
  toy::module m({{"f0", 1, false}, {"f1", 1, true}});
  kiln::pass_context ctx;
  trace().clear();
  toy::module out = kiln::run(function_probe<"f">{}, m, ctx);
  CHECK(take_trace() == strings{"f:f0"});
  CHECK(out.value("f0") == 2);
  CHECK(out.value("f1") == 1);
}

TEST_CASE("a pass that changes nothing returns the same module object") {
  auto identity = kiln::function_pass<"identity">([](const toy::function& f) { return f; });
  toy::module m = toy::make_module(3);
  kiln::pass_context ctx;
  CHECK(kiln::module_traits<toy::module>::same(kiln::run(identity, m, ctx), m));
}

TEST_CASE("resolution as a constant expression: cycles are found, requirements ordered") {
  using kiln::detail::resolve;
  constexpr auto ok = [] {
    // 0 requires 1 and 2; 2 requires 1; the user lists 0 then 1.
    auto r = resolve({{1, 2}, {}, {1}}, {0, 1});
    return r.steps.size() == 3 && r.steps[0].node == 1 && r.steps[1].node == 2 && r.steps[2].node == 0 &&
           r.steps[0].user_index == 1 && r.steps[1].user_index == -1 && r.cycle.empty() &&
           r.dependents[0] == std::vector<int>{1, 2};
  }();
  static_assert(ok);
  auto cyc = resolve({{1}, {2}, {0}}, {0});
  CHECK(cyc.cycle == std::vector<int>{0, 1, 2, 0});
  CHECK(cyc.steps.empty());
  CHECK(resolve({{0}}, {0}).cycle == std::vector<int>{0, 0});
}
