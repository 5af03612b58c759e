// SPDX-License-Identifier: Apache-2.0
// Pass-manager features beyond the design's core: the PrintIR pass, the fixed-point combinator,
// statistics, TVM's testing.immutable_module check, and the text forms of passes.
#include "probes.hpp"

#include <kiln/pass/erased_pass.hpp>
#include <kiln/pass/instruments/pass_timing.hpp>
#include <kiln/pass/print_ir_pass.hpp>
#include <kiln/pass/repeat.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <doctest/doctest.h>

#include <sstream>

using namespace kiln_test;

namespace {

using low_probe = module_probe<"low_probe">;

/// Adds one to f0 while it is below `Limit`; returns its input unchanged otherwise.
template <long Limit>
struct count_up {
  static constexpr std::string_view name = "count_up";
  toy::module operator()(const toy::module& m, kiln::pass_context& ctx) const {
    trace().push_back("count_up");
    if (m.value("f0") >= Limit) return m;
    ++ctx.statistic(name, "incremented");
    auto fns = *m.functions;
    ++fns[0].value;
    return toy::module(std::move(fns));
  }
};

/// Never converges: a new module every time.
struct restless {
  static constexpr std::string_view name = "restless";
  toy::module operator()(const toy::module& m) const { return toy::module(*m.functions); }
};

/// Breaks the rule that a pass never modifies its input: writes through the shared list.
struct vandal {
  static constexpr std::string_view name = "vandal";
  toy::module operator()(const toy::module& m) const {
    const_cast<std::vector<toy::function>&>(*m.functions)[0].value = 99;
    return m;
  }
};

/// A module type whose traits have no structural hash.
struct bare {
  std::shared_ptr<int> id = std::make_shared<int>(0);
};

}  // namespace

template <>
struct kiln::module_traits<bare> {
  struct function_type {};
  template <class Fn>
  static bare map_functions(const bare& m, Fn&&) {
    return m;
  }
  static bool skip_optimization(const function_type&) { return false; }
  static bool same(const bare& a, const bare& b) { return a.id == b.id; }
  static void print(std::ostream& os, const bare&) { os << "bare"; }
};

namespace {
struct bare_pass {
  static constexpr std::string_view name = "bare_pass";
  bare operator()(const bare& m) const { return m; }
};
}  // namespace

TEST_CASE("PrintIR prints the module with its header and returns it unchanged, at opt level 0") {
  std::ostringstream out;
  toy::module m = toy::make_module(2);
  kiln::pass_context ctx(0);
  toy::module r = kiln::run(kiln::print_ir_pass(out, "here"), m, ctx);
  CHECK(out.str() == "// PrintIR(here):\ntoy { f0=0 f1=1 }");
  CHECK(kiln::module_traits<toy::module>::same(r, m));
  CHECK(kiln::print_ir_pass::opt_level == 0);
  CHECK(kiln::print_ir_pass::name == "PrintIR");
}

TEST_CASE("repeat_until_fixed runs its pipeline until nothing changes, and counts the iterations") {
  kiln::pass_context ctx;
  trace().clear();
  toy::module out = kiln::run(kiln::repeat_until_fixed<10, count_up<3>>{}, toy::make_module(1), ctx);
  CHECK(out.value("f0") == 3);
  CHECK(take_trace() == strings{"count_up", "count_up", "count_up", "count_up"});  // the 4th changes nothing
  CHECK(ctx.statistics().at("repeat_until_fixed").at("iterations") == 4);
  CHECK(ctx.statistics().at("count_up").at("incremented") == 3);
  CHECK(ctx.statistics().at("repeat_until_fixed").count("hit_limit") == 0);
}

TEST_CASE("repeat_until_fixed stops at its limit, and the timing report counts each iteration") {
  auto timer = std::make_shared<kiln::pass_timing>();
  kiln::pass_context ctx;
  ctx.set_instruments({timer});
  (void)kiln::run(kiln::named_repeat_until_fixed<"canonicalize", 3, restless>{}, toy::make_module(1), ctx);
  CHECK(ctx.statistics().at("canonicalize").at("iterations") == 3);
  CHECK(ctx.statistics().at("canonicalize").at("hit_limit") == 1);
  REQUIRE(timer->report().size() == 1);
  CHECK(timer->report()[0].name == "canonicalize");
  REQUIRE(timer->report()[0].children.size() == 1);
  CHECK(timer->report()[0].children[0].name == "sequential");
  CHECK(timer->report()[0].children[0].calls == 3);
}

TEST_CASE("statistics add up over runs and print as LLVM's -stats does") {
  kiln::pass_context ctx;
  CHECK(ctx.statistics_report().empty());
  ctx.statistic("fold_constant", "folded") += 12;
  ctx.statistic("dce", "removed") += 3;
  ++ctx.statistic("fold_constant", "folded");
  CHECK(ctx.statistics_report() ==
        "===-------------------------------------------------------------------------===\n"
        "                          ... Statistics Collected ...\n"
        "===-------------------------------------------------------------------------===\n\n"
        "  3 dce           - removed\n"
        " 13 fold_constant - folded\n");
  ctx.clear_statistics();
  CHECK(ctx.statistics().empty());
}

TEST_CASE("testing.immutable_module: a pass that modifies its input fails, named") {
  kiln::pass_context ctx;
  toy::module m = toy::make_module(2);
  (void)kiln::run(vandal{}, m, ctx);  // unchecked: nobody notices
  CHECK(m.value("f0") == 99);
  ctx.set_config("testing.immutable_module", true);
  CHECK(ctx.checks_immutable_module());
  toy::module m2 = toy::make_module(2);
  CHECK(message_of<kiln::pass_error>([&] { (void)kiln::run(kiln::sequential<low_probe, vandal>{}, m2, ctx); }) ==
        "kiln: pass 'vandal' (in 'sequential') failed: it modified the module it was given (testing.immutable_module: the "
        "structural hash of its input changed)");
  (void)kiln::run(kiln::sequential<low_probe>{}, m2, ctx);  // a well-behaved pass passes the check
  ctx.set_config("testing.immutable_module", false);
  CHECK_FALSE(ctx.checks_immutable_module());
  CHECK_FALSE(ctx.has_instruments());
}

TEST_CASE("testing.immutable_module on an IR without a structural hash is a usage error") {
  kiln::pass_context ctx;
  ctx.set_config(kiln::immutable_module_option, true);
  CHECK(message_of<kiln::usage_error>([&] { (void)kiln::run(bare_pass{}, bare{}, ctx); }) ==
        "kiln: testing.immutable_module is set, but module_traits<module> has no structural_hash to check it with");
}

TEST_CASE("passes and pass infos print their text forms") {
  using requires_low = module_probe<"needs", 2, kiln::pass_list<module_probe<"low_probe">>>;
  std::ostringstream os;
  os << kiln::pass_info_of<requires_low, toy::module>;
  CHECK(os.str() == "needs: module pass, opt level 2, requires [low_probe]");
  kiln::pass<toy::module> p = kiln::named_sequential<"pipe", 1, requires_low>{};
  std::ostringstream ps;
  ps << p;
  CHECK(ps.str() == p.text());
  CHECK(kiln::to_string(p.info()) == "pipe: sequential, opt level 1, requires []");
}
