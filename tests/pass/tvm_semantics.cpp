// SPDX-License-Identifier: Apache-2.0
// Where kiln's run-time semantics follow TVM's exactly (src/ir/transform.cc, src/ir/instrument.cc
// and tests/python/ir/test_pass_instrument.py): the enabled rule applies to a pipeline's steps, not
// to a pass called directly; every should_run is asked; the pass's own exception reaches the
// caller; policies enter and exit as instruments do; scopes that end out of order are caught.
#include "probes.hpp"

#include <kiln/pass/erased_pass.hpp>
#include <kiln/pass/registry.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>

using namespace kiln_test;

namespace {

using high = module_probe<"high", 3>;  // above the default opt level 2
using low = module_probe<"low", 0>;

/// Says no to every pass, and logs that it was asked.
struct naysayer {
  bool should_run(const kiln::pass_info& i) {
    trace().push_back("no.should_run(" + std::string(i.name) + ")");
    return false;
  }
};

/// Counts the passes it is asked about.
struct asked_counter {
  int asked = 0;
  bool should_run(const kiln::pass_info&) {
    ++asked;
    return true;
  }
};

/// A module pass that throws `std::invalid_argument`.
struct picky {
  static constexpr std::string_view name = "picky";
  toy::module operator()(const toy::module&) const { throw std::invalid_argument("width must be positive"); }
};

/// A module pass that runs `picky` inside its own body.
struct runs_picky {
  static constexpr std::string_view name = "runs_picky";
  toy::module operator()(const toy::module& m, kiln::pass_context& ctx) const { return kiln::run(picky{}, m, ctx); }
};

/// A policy that logs enter / exit and throws from the one named in `throw_in`.
struct policy_probe {
  std::string label;
  std::string throw_in;
  void enter_pass_ctx() {
    trace().push_back(label + ".enter");
    if (throw_in == "enter") throw std::runtime_error(label + " cannot enter");
  }
  void exit_pass_ctx() {
    trace().push_back(label + ".exit");
    if (throw_in == "exit") throw std::runtime_error(label + " cannot exit");
  }
  void run_before_pass(const kiln::pass_info& i) { trace().push_back(label + ".before(" + std::string(i.name) + ")"); }
};

}  // namespace

// ---- 1. a pass called directly always runs -----------------------------------------------------

TEST_CASE("a pass called directly runs whatever its opt level or a disabled name (TVM: only Sequential gates)") {
  kiln::pass_context ctx(1);
  ctx.disable("low");
  trace().clear();
  toy::module out = kiln::run(high{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"high"});
  CHECK(out.functions->size() == 2);
  (void)kiln::run(low{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"low"});
  // The same through the type-erased pass.
  kiln::pass<toy::module> erased = high{};
  (void)erased(toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"high"});
}

TEST_CASE("a pipeline called directly runs, and applies the enabled rule to its steps") {
  using named = kiln::named_sequential<"named", 3, high, low>;
  kiln::pass_context ctx(1);
  ctx.disable("low");
  trace().clear();
  (void)kiln::run(named{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{});  // its steps: high is above level 1, low is disabled
  ctx.set_opt_level(3);
  (void)kiln::run(named{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"high"});
  kiln::pass<toy::module> erased = named{};
  (void)erased(toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"high"});
}

TEST_CASE("should_run may still veto a pass called directly") {
  kiln::pass_context ctx;
  ctx.set_instruments({naysayer{}, logging_instrument{"B"}});
  trace().clear();
  toy::module out = kiln::run(low{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"no.should_run(low)", "B.should_run(low)", "B.skipped(low, should_run)"});
  CHECK(out.functions->size() == 1);
}

// ---- 2. should_run is asked of every instrument ----------------------------------------------

TEST_CASE("every instrument's should_run is asked, in order, even after one said no") {
  auto counter = std::make_shared<asked_counter>();
  kiln::pass_context ctx;
  ctx.set_instruments({naysayer{}, counter, logging_instrument{"C"}});
  trace().clear();
  (void)kiln::run(kiln::sequential<low, module_probe<"other">>{}, toy::make_module(1), ctx);
  // The pipeline itself, then each step: each asked of all three.
  CHECK(counter->asked == 1);  // the pipeline was vetoed, so its steps never ran
  CHECK(take_trace() ==
        strings{"no.should_run(sequential)", "C.should_run(sequential)", "C.skipped(sequential, should_run)"});
  asked_counter policy;
  (void)kiln::run(low{}, toy::make_module(1), ctx, policy);
  CHECK(policy.asked == 1);  // a policy is asked first, and is asked even though an instrument says no
  CHECK(counter->asked == 2);
}

// ---- 3. the original exception reaches the caller ----------------------------------------------

TEST_CASE("a pass's own exception is nested in the pass_error, so the caller can recover its type") {
  kiln::pass_context ctx;
  try {
    (void)kiln::run(picky{}, toy::make_module(1), ctx);
    FAIL("no exception");
  } catch (const kiln::pass_error& e) {
    CHECK(std::string(e.what()) == "kiln: pass 'picky' failed: width must be positive");
    CHECK(e.pass_name() == "picky");
    CHECK_THROWS_WITH_AS(std::rethrow_if_nested(e), "width must be positive", std::invalid_argument);
  }
}

TEST_CASE("through a pipeline, the pass_error names the failing pass and its path, and still nests the original") {
  kiln::pass_context ctx;
  using outer = kiln::named_sequential<"outer", 0, low, kiln::named_sequential<"inner", 0, picky>>;
  try {
    (void)kiln::run(outer{}, toy::make_module(1), ctx);
    FAIL("no exception");
  } catch (const kiln::pass_error& e) {
    CHECK(std::string(e.what()) == "kiln: pass 'picky' (in 'outer' > 'inner') failed: width must be positive");
    CHECK_THROWS_AS(std::rethrow_if_nested(e), std::invalid_argument);
  }
}

TEST_CASE("a pass that runs another pass inside its body passes the inner failure on, not wrapped twice") {
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"I"}});
  trace().clear();
  try {
    (void)kiln::run(runs_picky{}, toy::make_module(1), ctx);
    FAIL("no exception");
  } catch (const kiln::pass_error& e) {
    CHECK(std::string(e.what()) == "kiln: pass 'picky' (in 'runs_picky') failed: width must be positive");
    CHECK(e.pass_name() == "picky");
    CHECK(e.pipeline() == strings{"runs_picky"});
    CHECK_THROWS_AS(std::rethrow_if_nested(e), std::invalid_argument);
  }
  CHECK(take_trace() == strings{"I.should_run(runs_picky)", "I.before(runs_picky)", "I.should_run(picky)",
                                "I.before(picky)", "I.failed(picky)", "I.failed(runs_picky)"});
}

// ---- 4. compile-time policies enter and exit as instruments do ---------------------------------

TEST_CASE("when a policy's enter fails, the policies that entered exit, in order, and the error propagates") {
  kiln::pass_context ctx;
  policy_probe a{"A", ""}, b{"B", ""}, c{"C", "enter"}, d{"D", ""};
  trace().clear();
  CHECK_THROWS_WITH_AS((void)kiln::run(low{}, toy::make_module(1), ctx, a, b, c, d), "C cannot enter", std::runtime_error);
  CHECK(take_trace() == strings{"A.enter", "B.enter", "C.enter", "A.exit", "B.exit"});
}

TEST_CASE("when a policy's exit throws after a successful run, the exception propagates and later exits are skipped") {
  kiln::pass_context ctx;
  policy_probe a{"A", ""}, b{"B", "exit"}, c{"C", ""};
  trace().clear();
  CHECK_THROWS_WITH_AS((void)kiln::run(low{}, toy::make_module(1), ctx, a, b, c), "B cannot exit", std::runtime_error);
  CHECK(take_trace() == strings{"A.enter", "B.enter", "C.enter", "A.before(low)", "B.before(low)", "C.before(low)", "low",
                                "A.exit", "B.exit"});
}

TEST_CASE("when the run fails, every policy exits and the run's error, not an exit's, reaches the caller") {
  kiln::pass_context ctx;
  policy_probe a{"A", "exit"}, b{"B", ""};
  trace().clear();
  CHECK_THROWS_AS((void)kiln::run(picky{}, toy::make_module(1), ctx, a, b), kiln::pass_error);
  CHECK(take_trace() == strings{"A.enter", "B.enter", "A.before(picky)", "B.before(picky)", "A.exit", "B.exit"});
}

TEST_CASE("a policy may be passed as a temporary") {
  kiln::pass_context ctx;
  trace().clear();
  (void)kiln::run(low{}, toy::make_module(1), ctx, policy_probe{"T", ""});
  CHECK(take_trace() == strings{"T.enter", "T.before(low)", "low", "T.exit"});
}

// ---- 5. scopes that end out of order ------------------------------------------------------------

TEST_CASE("an outer scope ending before an inner one is an error, and leaves no dangling current context") {
  auto outer_ctx = std::make_unique<kiln::pass_context>(3);
  auto inner_ctx = std::make_unique<kiln::pass_context>(1);
  inner_ctx->set_instruments({logging_instrument{"inner"}});
  trace().clear();
  // Scopes on the heap, as a binding to another language holds them (a delete-expression, since
  // std::optional::reset and std::unique_ptr::reset are noexcept and the destructor throws).
  auto* outer = new kiln::pass_context_scope(*outer_ctx);
  auto* inner = new kiln::pass_context_scope(*inner_ctx);
  CHECK(&kiln::pass_context::current() == inner_ctx.get());
  CHECK(message_of<kiln::usage_error>([&] { delete outer; }) ==
        "kiln::pass_context_scope: a scope ended while 1 scope(s) opened after it were still open; scopes must end "
        "innermost first. The inner scopes were closed with it: pass_context::current() is now the context from "
        "before it.");
  CHECK_FALSE(kiln::pass_context::in_scope());
  outer_ctx.reset();  // the outer context is gone: nothing may point at it
  CHECK(kiln::pass_context::current().opt_level() == 2);
  delete inner;  // closed already; it only exits its instruments
  CHECK(take_trace() == strings{"inner.enter", "inner.exit"});
  CHECK_FALSE(kiln::pass_context::in_scope());
}

// ---- 6. the smaller ones -----------------------------------------------------------------------

TEST_CASE("set_instruments on a context whose scope is open is refused, override_instruments is the way") {
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"A"}});
  trace().clear();
  {
    kiln::pass_context_scope scope(ctx);
    CHECK(ctx.open_scopes() == 1);
    CHECK(message_of<kiln::usage_error>([&] { ctx.set_instruments({logging_instrument{"B"}}); })
              .starts_with("kiln::pass_context::set_instruments: a scope of this context is open"));
    CHECK(ctx.instruments().size() == 1);
    ctx.override_instruments({logging_instrument{"B"}});
  }
  CHECK(ctx.open_scopes() == 0);
  CHECK(take_trace() == strings{"A.enter", "A.exit", "B.enter", "B.exit"});
  ctx.set_instruments({});  // no scope open: allowed
}

TEST_CASE("get_pass with no close match lists the registered passes") {
  kiln::pass_registry<toy::module> r;
  r.add<low>().add<high>();
  CHECK(r.unknown_pass_message("zzzzzz") == "no pass is registered as 'zzzzzz'; registered passes: high, low");
  CHECK(r.unknown_pass_message("lov") == "no pass is registered as 'lov' (did you mean 'low'?)");
  CHECK(kiln::pass_registry<toy::module>{}.unknown_pass_message("x") == "no pass is registered as 'x'; no passes are registered");
}

namespace {
inline const kiln::pass_config_option<int> widen_int{"test.semantics.int"};
inline const kiln::pass_config_option<std::int64_t> widen_int64{"test.semantics.int64"};
inline const kiln::pass_config_option<float> widen_float{"test.semantics.float"};
}  // namespace

TEST_CASE("config values are read with the widening conversions set_config accepts") {
  kiln::pass_context ctx;
  CHECK(ctx.config<long>("test.semantics.int", 7) == 7);  // unset: the fallback, as a long
  ctx.set_config(widen_int, 16);
  CHECK(ctx.config<long>("test.semantics.int", 0) == 16);
  CHECK(ctx.config<double>("test.semantics.int", 0) == 16.0);
  ctx.set_config(widen_int64, std::int64_t{1} << 40);
  CHECK(ctx.config<long long>("test.semantics.int64", 0) == (1LL << 40));
  CHECK(message_of<kiln::usage_error>([&] { (void)ctx.config<int>("test.semantics.int64", 0); }) ==
        "kiln::pass_context::config: config option 'test.semantics.int64' is registered as int64, and its value does "
        "not fit int");
  ctx.set_config(widen_int64, std::int64_t{5});
  CHECK(ctx.config<int>("test.semantics.int64", 0) == 5);  // fits: allowed, as set_config(int option, 5L) is
  ctx.set_config(widen_float, 0.5f);
  CHECK(ctx.config<double>("test.semantics.float", 0) == 0.5);
  CHECK(message_of<kiln::usage_error>([&] { (void)ctx.config<std::string>("test.semantics.float", ""); }) ==
        "kiln::pass_context::config: config option 'test.semantics.float' is registered as "
        "float, and its value does not fit string");
  CHECK(message_of<kiln::usage_error>([&] { (void)kiln::pass_context{}.config<bool>("test.semantics.int", false); }) ==
        "kiln::pass_context::config: config option 'test.semantics.int' is registered as int, and cannot be read as bool");
}
