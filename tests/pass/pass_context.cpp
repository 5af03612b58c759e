// SPDX-License-Identifier: Apache-2.0
// pass_context: opt level, typed config, diagnostics and pass failures, current() and scopes.
#include "probes.hpp"

#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <doctest/doctest.h>

#include <thread>

using namespace kiln_test;

namespace {

inline const kiln::pass_config_option<int> unroll_step{"test.unroll.max_step", "deepest loop to unroll"};
inline const kiln::pass_config_option<bool> fast_math{"test.fast_math"};
inline const kiln::pass_config_option<std::string> target{"test.target"};
inline const kiln::pass_config_option<double> ratio{"test.ratio"};

/// Reads the unroll step into the module (as a function's value).
struct reads_config {
  static constexpr std::string_view name = "reads_config";
  toy::module operator()(const toy::module& m, kiln::pass_context& ctx) const {
    return m.with({"step", ctx.config(unroll_step, 8), false});
  }
};

struct warns {
  static constexpr std::string_view name = "warns";
  toy::module operator()(const toy::module& m, kiln::pass_context& ctx) const {
    ctx.warning("slow path");
    return m;
  }
};

}  // namespace

TEST_CASE("a context starts at opt level 2 with nothing required, disabled, configured or instrumented") {
  kiln::pass_context ctx;
  CHECK(ctx.opt_level() == 2);
  CHECK(ctx.required_passes().empty());
  CHECK(ctx.disabled_passes().empty());
  CHECK(ctx.instruments().empty());
  CHECK(ctx.diagnostics().empty());
  CHECK(message_of<kiln::usage_error>([] { kiln::pass_context bad(-1); }) ==
        "kiln::pass_context: opt_level must be 0 or more, not -1");
}

TEST_CASE("config: registered keys take values of their type, and passes read them with a default") {
  kiln::pass_context ctx;
  CHECK(kiln::run(reads_config{}, toy::module(), ctx).value("step") == 8);
  ctx.set_config(unroll_step, 16);
  CHECK(kiln::run(reads_config{}, toy::module(), ctx).value("step") == 16);
  ctx.set_config("test.fast_math", true).set_config("test.target", "avx512").set_config(ratio, 2);  // 2 -> 2.0
  CHECK(ctx.config(fast_math, false));
  CHECK(ctx.config(target, std::string()) == "avx512");
  CHECK(ctx.config(ratio, 0.0) == 2.0);
  CHECK(ctx.has_config("test.ratio"));
}

TEST_CASE("config: an unknown key is an error that suggests and lists the registered keys") {
  kiln::pass_context ctx;
  std::string what = message_of<kiln::usage_error>([&] { ctx.set_config("test.unrol.max_step", 4); });
  CHECK(what.starts_with("kiln::pass_context::set_config: unknown config option 'test.unrol.max_step' (did you mean "
                         "'test.unroll.max_step'?); registered options: "));
  CHECK(what.find("test.fast_math (bool)") != std::string::npos);
  CHECK(what.find("test.unroll.max_step (int)") != std::string::npos);
  CHECK(message_of<kiln::usage_error>([&] { (void)ctx.config<int>("nope", 1); })
            .starts_with("kiln::pass_context::config: unknown config option 'nope'; registered options: "));
}

TEST_CASE("config: a value of the wrong type is an error, and the context keeps its old value") {
  kiln::pass_context ctx;
  ctx.set_config(unroll_step, 4);
  CHECK(message_of<kiln::usage_error>([&] { ctx.set_config(unroll_step, 2.5); }) ==
        "kiln::pass_context::set_config: config option 'test.unroll.max_step' takes int, not double");
  CHECK(message_of<kiln::usage_error>([&] { ctx.set_config(unroll_step, 1LL << 40); }) ==
        "kiln::pass_context::set_config: config option 'test.unroll.max_step' takes int, not int64");
  CHECK(message_of<kiln::usage_error>([&] { ctx.set_config("test.fast_math", 1); }) ==
        "kiln::pass_context::set_config: config option 'test.fast_math' takes bool, not int");
  CHECK(message_of<kiln::usage_error>([&] { (void)ctx.config<std::string>("test.unroll.max_step", ""); }) ==
        "kiln::pass_context::config: config option 'test.unroll.max_step' is registered as int, and its value does not fit string");
  CHECK(ctx.config(unroll_step, 0) == 4);
}

TEST_CASE("config: values from text are parsed as the registered type") {
  kiln::pass_context ctx;
  ctx.set_config_from_text("test.unroll.max_step", "32").set_config_from_text("test.fast_math", "true");
  CHECK(ctx.config(unroll_step, 0) == 32);
  CHECK(ctx.config(fast_math, false));
  CHECK(message_of<kiln::usage_error>([&] { ctx.set_config_from_text("test.unroll.max_step", "3x"); }) ==
        "kiln::pass_context::set_config_from_text: config option 'test.unroll.max_step' takes int, and '3x' is not one");
}

TEST_CASE("config: registering a key again with another type is an error") {
  CHECK_NOTHROW(kiln::pass_config_registry::global().add<int>("test.unroll.max_step"));
  CHECK(message_of<kiln::usage_error>([] { kiln::pass_config_registry::global().add<double>("test.unroll.max_step"); }) ==
        "kiln::pass_config_registry: config key 'test.unroll.max_step' is already registered as int, cannot register it "
        "again as double");
}

TEST_CASE("a pass that reports an error fails with a pass_error naming it and carrying its diagnostics") {
  kiln::pass_context ctx;
  toy::module in = toy::make_module(2);
  kiln::sequential<module_probe<"p1">, failing_probe<"fold">, module_probe<"p2">> seq;
  trace().clear();
  try {
    (void)seq(in, ctx);
    FAIL("expected a pass_error");
  } catch (const kiln::pass_error& e) {
    CHECK(std::string(e.what()) ==
          "kiln: pass 'fold' (in 'sequential') failed: cannot fold this\n"
          "  warning in 'fold' at @f0: looked at it\n"
          "  error in 'fold' at @f1: cannot fold this");
    CHECK(e.pass_name() == "fold");
    CHECK(e.pipeline() == strings{"sequential"});
    REQUIRE(e.diagnostics().size() == 2);
    CHECK(e.diagnostics()[1].severity == kiln::severity::error);
  }
  CHECK(take_trace() == strings{"p1", "fold"});  // p2 never ran
  CHECK(in.functions->size() == 2);               // the module given to the pipeline is untouched
  CHECK(ctx.error_count() == 1);
  CHECK(ctx.diagnostics()[0].pass == "fold");
}

TEST_CASE("a pass that throws fails with a pass_error that says what it threw") {
  kiln::pass_context ctx;
  using inner = kiln::named_sequential<"inner", 0, failing_probe<"explode", true>>;
  std::string what = message_of<kiln::pass_error>([&] { (void)kiln::run(kiln::named_sequential<"outer", 0, inner>{}, toy::module(), ctx); });
  CHECK(what == "kiln: pass 'explode' (in 'outer' > 'inner') failed: boom\n  warning in 'explode' at @f0: looked at it");
}

TEST_CASE("warnings do not fail a pass and are kept in the context, stamped with the pass") {
  kiln::pass_context ctx;
  (void)kiln::run(warns{}, toy::module(), ctx);
  REQUIRE(ctx.diagnostics().size() == 1);
  CHECK(ctx.diagnostics()[0].to_string() == "warning in 'warns': slow path");
  ctx.clear_diagnostics();
  CHECK(ctx.diagnostics().empty());
}

TEST_CASE("current() is the innermost scope's context, a scope's end restores the outer one") {
  kiln::pass_context& fallback = kiln::pass_context::current();
  kiln::pass_context outer(1), inner(3);
  {
    kiln::pass_context_scope s1(outer);
    CHECK(&kiln::pass_context::current() == &outer);
    {
      kiln::pass_context_scope s2(inner);
      CHECK(kiln::pass_context::current().opt_level() == 3);
    }
    CHECK(&kiln::pass_context::current() == &outer);
  }
  CHECK(&kiln::pass_context::current() == &fallback);
}

TEST_CASE("each thread has its own default context and scope stack") {
  kiln::pass_context mine(0);
  kiln::pass_context_scope scope(mine);
  kiln::pass_context* seen_default = nullptr;
  int seen_level = -1;
  std::thread t([&] {
    seen_default = &kiln::pass_context::current();
    seen_level = kiln::pass_context::current().opt_level();
    kiln::pass_context theirs(3);
    kiln::pass_context_scope s(theirs);
    (void)kiln::run(module_probe<"in_thread", 3>{}, toy::module());  // uses their context
  });
  t.join();
  CHECK(seen_default != &mine);
  CHECK(seen_level == 2);
  CHECK(&kiln::pass_context::current() == &mine);
}

TEST_CASE("threads running pipelines concurrently do not see each other's contexts") {
  std::vector<std::thread> threads;
  std::vector<long> results(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([i, &results] {
      kiln::pass_context ctx(i);
      kiln::pass_context_scope scope(ctx);
      long ran = 0;
      for (int k = 0; k < 200; ++k)
        ran += static_cast<long>(kiln::run(kiln::sequential<module_probe<"l1", 1>, module_probe<"l3", 3>>{}, toy::module())
                                     .functions->size());
      results[static_cast<std::size_t>(i)] = ran;
    });
  for (auto& t : threads) t.join();
  CHECK(results == std::vector<long>{0, 200, 200, 400});
}
