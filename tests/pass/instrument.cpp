// SPDX-License-Identifier: Apache-2.0
// Instruments: the design's call sequence and exception rules (one test per bullet of its Pass
// Instrument section), kiln's extra hooks, compile-time policies and hook detection.
#include "probes.hpp"

#include <kiln/pass/instrument.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>

using namespace kiln_test;
using kiln::pass_list;

namespace {

using p1 = module_probe<"p1">;
using p2 = module_probe<"p2">;
using pipeline = kiln::sequential<p1, p2>;

/// Logs like logging_instrument, and throws from the hook named in `throw_in`.
struct throwing_instrument {
  std::string label;
  std::string throw_in;
  void hit(const std::string& hook) {
    trace().push_back(label + "." + hook);
    if (hook == throw_in) throw std::runtime_error(label + " failed in " + hook);
  }
  void enter_pass_ctx() { hit("enter"); }
  void exit_pass_ctx() { hit("exit"); }
  bool should_run(const kiln::pass_info& i) {
    hit("should_run(" + std::string(i.name) + ")");
    return true;
  }
  void run_before_pass(const kiln::pass_info& i) { hit("before(" + std::string(i.name) + ")"); }
  void run_after_pass(const kiln::pass_info& i) { hit("after(" + std::string(i.name) + ")"); }
};

/// Vetoes the pass named `veto`.
struct veto_instrument {
  std::string veto;
  bool should_run(const kiln::pass_info& i) { return i.name != veto; }
};

/// Only one hook: the others are absent and never called.
struct after_only {
  int calls = 0;
  void run_after_pass(const kiln::pass_info&) { ++calls; }
};

}  // namespace

TEST_CASE("within a context, each pass is framed by should_run, run_before_pass and run_after_pass") {
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"pi"}});
  trace().clear();
  {
    kiln::pass_context_scope scope(ctx);
    (void)pipeline{}(toy::make_module(1));  // the current context
  }
  CHECK(take_trace() == strings{"pi.enter",
                                "pi.should_run(sequential)", "pi.before(sequential)",
                                "pi.should_run(p1)", "pi.before(p1)", "p1", "pi.after(p1)",
                                "pi.should_run(p2)", "pi.before(p2)", "p2", "pi.after(p2)",
                                "pi.after(sequential)",
                                "pi.exit"});
}

TEST_CASE("enter_pass_ctx runs in the order of the instruments") {
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"A"}, logging_instrument{"B"}});
  trace().clear();
  { kiln::pass_context_scope scope(ctx); }
  CHECK(take_trace() == strings{"A.enter", "B.enter", "A.exit", "B.exit"});
}

TEST_CASE("when enter_pass_ctx throws, instruments are cleared and only those that entered exit") {
  kiln::pass_context ctx;
  ctx.set_instruments({throwing_instrument{"A", ""}, throwing_instrument{"B", "enter"}, throwing_instrument{"C", ""}});
  trace().clear();
  CHECK(message_of<std::runtime_error>([&] { kiln::pass_context_scope scope(ctx); }) == "B failed in enter");
  CHECK(take_trace() == strings{"A.enter", "B.enter", "A.exit"});  // C never entered; A exited
  CHECK(ctx.instruments().empty());
  CHECK(&kiln::pass_context::current() != &ctx);  // the scope was not entered
  (void)pipeline{}(toy::make_module(1), ctx);     // and the context still works, uninstrumented
  CHECK(take_trace() == strings{"p1", "p2"});
}

TEST_CASE("exit_pass_ctx runs in order, when one throws, instruments are cleared and later ones do not exit") {
  kiln::pass_context ctx;
  ctx.set_instruments({throwing_instrument{"A", ""}, throwing_instrument{"B", "exit"}, throwing_instrument{"C", ""}});
  trace().clear();
  CHECK(message_of<std::runtime_error>([&] { kiln::pass_context_scope scope(ctx); }) == "B failed in exit");
  CHECK(take_trace() == strings{"A.enter", "B.enter", "C.enter", "A.exit", "B.exit"});
  CHECK(ctx.instruments().empty());
  CHECK(&kiln::pass_context::current() != &ctx);  // the scope was left
}

TEST_CASE("should_run is not consulted for passes the context requires") {
  kiln::pass_context ctx;
  ctx.require("p2").set_instruments({logging_instrument{"pi"}});
  trace().clear();
  (void)kiln::run(p2{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"pi.before(p2)", "p2", "pi.after(p2)"});
}

TEST_CASE("run_before_pass runs in instrument order, unless should_run blocks the pass") {
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"A"}, veto_instrument{"p1"}, logging_instrument{"B"}});
  trace().clear();
  toy::module out = kiln::run(p1{}, toy::make_module(1), ctx);
  // Every instrument is asked, as in TVM (no short-circuit after the veto); then everyone hears why
  // the pass was skipped.
  CHECK(take_trace() == strings{"A.should_run(p1)", "B.should_run(p1)", "A.skipped(p1, should_run)", "B.skipped(p1, should_run)"});
  CHECK(out.functions->size() == 1);
  (void)kiln::run(p2{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"A.should_run(p2)", "B.should_run(p2)", "A.before(p2)", "B.before(p2)", "p2",
                                "A.after(p2)", "B.after(p2)"});
}

TEST_CASE("an exception in run_before_pass is thrown at once, and the scope still exits cleanly") {
  kiln::pass_context ctx;
  ctx.set_instruments({throwing_instrument{"A", "before(p1)"}, logging_instrument{"B"}});
  trace().clear();
  CHECK(message_of<std::runtime_error>([&] {
          kiln::pass_context_scope scope(ctx);
          (void)kiln::run(p1{}, toy::make_module(1));
        }) == "A failed in before(p1)");
  CHECK(take_trace() == strings{"A.enter", "B.enter", "A.should_run(p1)", "B.should_run(p1)", "A.before(p1)", "A.exit",
                                "B.exit"});
}

TEST_CASE("an exception in run_after_pass is thrown at once, and the scope still exits cleanly") {
  kiln::pass_context ctx;
  ctx.set_instruments({throwing_instrument{"A", "after(p1)"}, logging_instrument{"B"}});
  trace().clear();
  CHECK(message_of<std::runtime_error>([&] {
          kiln::pass_context_scope scope(ctx);
          (void)kiln::run(pipeline{}, toy::make_module(1));
        }) == "A failed in after(p1)");
  auto t = take_trace();
  CHECK(std::find(t.begin(), t.end(), "p2") == t.end());  // the pipeline stopped
  CHECK(t.back() == "B.exit");
}

TEST_CASE("after a pass throws, run_after_pass_failed is told and the scope exits cleanly") {
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"pi"}});
  trace().clear();
  toy::module in = toy::make_module(1);
  std::string what = message_of<kiln::pass_error>([&] {
    kiln::pass_context_scope scope(ctx);
    (void)kiln::run(kiln::sequential<p1, failing_probe<"bad", true>, p2>{}, in);
  });
  CHECK(what.starts_with("kiln: pass 'bad' (in 'sequential') failed: boom"));
  CHECK(take_trace() == strings{"pi.enter", "pi.should_run(sequential)", "pi.before(sequential)", "pi.should_run(p1)",
                                "pi.before(p1)", "p1", "pi.after(p1)", "pi.should_run(bad)", "pi.before(bad)", "bad",
                                "pi.failed(bad)", "pi.failed(sequential)", "pi.exit"});
  CHECK(in.functions->size() == 1);  // untouched
}

TEST_CASE("override_instruments exits the old instruments, then enters the new ones") {
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"old"}});
  trace().clear();
  {
    kiln::pass_context_scope scope(ctx);
    ctx.override_instruments({logging_instrument{"new1"}, logging_instrument{"new2"}});
    (void)kiln::run(p1{}, toy::make_module(1));
  }
  CHECK(take_trace() == strings{"old.enter", "old.exit", "new1.enter", "new2.enter", "new1.should_run(p1)",
                                "new2.should_run(p1)", "new1.before(p1)", "new2.before(p1)", "p1", "new1.after(p1)",
                                "new2.after(p1)", "new1.exit", "new2.exit"});
}

TEST_CASE("run_before_skipped_pass says why a pass did not run") {
  using heavy = module_probe<"heavy", 3>;
  using needs_heavy_late = module_probe<"late", 3, pass_list<heavy>>;
  kiln::pass_context ctx;
  ctx.disable("p1").set_instruments({logging_instrument{"pi"}});
  trace().clear();
  (void)kiln::run(kiln::sequential<p1, heavy, needs_heavy_late>{}, toy::make_module(1), ctx);
  auto t = take_trace();
  auto has = [&](const char* s) { return std::find(t.begin(), t.end(), s) != t.end(); };
  CHECK(has("pi.skipped(p1, disabled)"));
  CHECK(has("pi.skipped(heavy, opt level)"));
  CHECK(has("pi.skipped(late, opt level)"));

  trace().clear();
  (void)kiln::run(kiln::sequential<needs_heavy_late>{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"pi.should_run(sequential)", "pi.before(sequential)", "pi.skipped(heavy, not needed)",
                                "pi.skipped(late, opt level)", "pi.after(sequential)"});
}

TEST_CASE("instruments may be shared, referenced or owned, hooks they lack are never called") {
  auto shared = std::make_shared<after_only>();
  after_only referenced;
  kiln::pass_context ctx;
  ctx.set_instruments({shared, std::ref(referenced), after_only{}});
  (void)kiln::run(pipeline{}, toy::make_module(1), ctx);
  CHECK(shared->calls == 3);  // p1, p2 and the pipeline
  CHECK(referenced.calls == 3);
  CHECK(ctx.instruments()[2].target<after_only>()->calls == 3);
  CHECK(ctx.instruments()[0].target<logging_instrument>() == nullptr);
  CHECK(ctx.instruments()[0].hooks() == unsigned(kiln::hook::run_after_pass));
  CHECK(ctx.instruments()[0].name().find("after_only") != std::string_view::npos);
}

TEST_CASE("compile-time policies run before the context's instruments, with the typed module") {
  struct typed_policy {
    int runs = 0;
    long last_size = 0;
    void enter_pass_ctx() { trace().push_back("policy.enter"); }
    void exit_pass_ctx() { trace().push_back("policy.exit"); }
    void run_before_pass(const toy::module&, const kiln::pass_info& i) { trace().push_back("policy.before(" + std::string(i.name) + ")"); }
    void run_after_pass(const toy::module& m, const kiln::pass_info&) {
      ++runs;
      last_size = static_cast<long>(m.functions->size());
    }
  };
  typed_policy policy;
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"pi"}});
  trace().clear();
  (void)kiln::run(p1{}, toy::make_module(1), ctx, policy);
  CHECK(take_trace() == strings{"policy.enter", "pi.should_run(p1)", "policy.before(p1)", "pi.before(p1)", "p1",
                                "pi.after(p1)", "policy.exit"});
  CHECK(policy.runs == 1);
  CHECK(policy.last_size == 2);
}

TEST_CASE("hooks are detected at compile time from their signatures") {
  static_assert(kiln::instrument_like<after_only>);
  static_assert(kiln::instrument_like<logging_instrument>);
  static_assert(kiln::instrument_like<std::shared_ptr<after_only>>);
  static_assert(!kiln::instrument_like<int>);
  struct nothing {};
  static_assert(!kiln::instrument_like<nothing>);
  constexpr unsigned all = kiln::detail::hooks_of<logging_instrument, kiln::module_view>();
  CHECK(all == 0x7fu);
  CHECK(kiln::detail::hooks_of<veto_instrument, kiln::module_view>() == unsigned(kiln::hook::should_run));
}
