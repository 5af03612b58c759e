// SPDX-License-Identifier: Apache-2.0
// Cached analyses: computed once per IR unit object, kept through passes that leave a unit alone,
// carried through passes that preserve them, dropped otherwise; and what a static pipeline keeps,
// at compile time.
#include "handle_ir.hpp"

#include "../common/message_of.hpp"

#include <kiln/pass/analysis.hpp>
#include <kiln/pass/instruments/pass_timing.hpp>
#include <kiln/pass/make_pass.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/print_ir_pass.hpp>
#include <kiln/pass/repeat.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cctype>
#include <stdexcept>

using kiln_test::message_of;

namespace {

using handle::body_length;

/// A module analysis that asks for another analysis: the total length of every body.
struct total_length {
  static constexpr std::string_view name = "total_length";
  static inline int runs = 0;
  std::size_t run(const handle::module& m, kiln::pass_context& ctx) const {
    ++runs;
    std::size_t n = 0;
    for (const auto& [name, f] : *m.functions) n += *ctx.analysis<body_length>(f);
    return n;
  }
};

/// A function analysis that fails.
struct broken_analysis {
  static constexpr std::string_view name = "broken_analysis";
  int run(const handle::function&) const { throw std::runtime_error("broken_analysis cannot analyse this"); }
};

/// Appends 'x' to f1's body; leaves the other functions alone. Preserves nothing.
struct grow_f1 {
  static constexpr std::string_view name = "grow_f1";
  handle::function operator()(const handle::function& f, const handle::module& m, kiln::pass_context&) const {
    return f == m.get("f1") ? handle::make_function(f->body + "x") : f;
  }
};

/// Upper-cases f1's body: a new function of the same length, so body_length is preserved.
struct shout_f1 {
  static constexpr std::string_view name = "shout_f1";
  using preserves = kiln::preserves<body_length>;
  handle::function operator()(const handle::function& f, const handle::module& m, kiln::pass_context&) const {
    if (f != m.get("f1")) return f;
    std::string b = f->body;
    for (char& c : b) c = char(std::toupper(static_cast<unsigned char>(c)));
    return handle::make_function(b);
  }
};

/// A new module with the same functions, preserving everything.
struct rebuild {
  static constexpr std::string_view name = "rebuild";
  using preserves = kiln::preserves_all;
  handle::module operator()(const handle::module& m) const { return handle::module(*m.functions); }
};

/// A new module with the same functions, preserving nothing it says.
struct rebuild_plain {
  static constexpr std::string_view name = "rebuild_plain";
  handle::module operator()(const handle::module& m) const { return handle::module(*m.functions); }
};

/// Returns its input.
struct nothing {
  static constexpr std::string_view name = "nothing";
  handle::module operator()(const handle::module& m) const { return m; }
};

void reset_runs() {
  body_length::runs = 0;
  total_length::runs = 0;
}

// What a static pipeline keeps is known at compile time.
static_assert(kiln::preserves_analysis<shout_f1, body_length>);
static_assert(!kiln::preserves_analysis<shout_f1, total_length>);
static_assert(!kiln::preserves_analysis<grow_f1, body_length>);
static_assert(kiln::preserves_analysis<rebuild, total_length>);
static_assert(kiln::preserves_analysis<kiln::print_ir_pass, total_length>);
static_assert(kiln::preserves_analysis<kiln::sequential<shout_f1, rebuild, kiln::print_ir_pass>, body_length>);
static_assert(!kiln::preserves_analysis<kiln::sequential<shout_f1, grow_f1>, body_length>);
static_assert(!kiln::preserves_analysis<kiln::sequential<shout_f1, rebuild>, total_length>);
static_assert(kiln::preserves_analysis<kiln::repeat_until_fixed<3, shout_f1>, body_length>);
static_assert(std::is_same_v<kiln::preserved_analyses_of<grow_f1>, kiln::preserves<>>);

}  // namespace

TEST_CASE("an analysis is computed once per unit object, then served from the cache") {
  reset_runs();
  kiln::pass_context ctx;
  const handle::module m = handle::make_module(3);
  auto a = ctx.analysis<body_length>(m.get("f0"));
  auto b = ctx.analysis<body_length>(m.get("f0"));
  CHECK(*a == 2);
  CHECK(a == b);
  CHECK(body_length::runs == 1);
  CHECK(ctx.cached_analysis<body_length>(m.get("f1")) == nullptr);  // never computes
  // An equal function that is another object is another unit.
  CHECK(*ctx.analysis<body_length>(handle::make_function("b0")) == 2);
  CHECK(body_length::runs == 2);
  const kiln::analysis_counts c = ctx.analyses().counts();
  CHECK(c.computed == 2);
  CHECK(c.hits == 1);
  CHECK(ctx.analyses().size() == 2);
}

TEST_CASE("an analysis may ask for others, which are cached on their own units") {
  reset_runs();
  kiln::pass_context ctx;
  const handle::module m = handle::make_module(3);
  CHECK(*ctx.analysis<total_length>(m) == 6);
  CHECK(*ctx.analysis<total_length>(m) == 6);
  CHECK(total_length::runs == 1);
  CHECK(body_length::runs == 3);
  CHECK(ctx.cached_analysis<body_length>(m.get("f2")) != nullptr);
  CHECK(ctx.analyses().size() == 4);
}

TEST_CASE("an analysis that throws caches nothing, and its exception reaches the caller") {
  kiln::pass_context ctx;
  const handle::module m = handle::make_module(1);
  CHECK(message_of<std::runtime_error>([&] { (void)ctx.analysis<broken_analysis>(m.get("f0")); }) == "broken_analysis cannot analyse this");
  CHECK(ctx.analyses().size() == 0);
  CHECK(ctx.analyses().empty());
}

TEST_CASE("a pass that returns its input keeps every result") {
  reset_runs();
  kiln::pass_context ctx;
  const handle::module m = handle::make_module(2);
  (void)ctx.analysis<total_length>(m);
  const handle::module out = kiln::run(nothing{}, m, ctx);
  CHECK(ctx.analyses().size() == 3);
  (void)ctx.analysis<total_length>(out);
  CHECK(total_length::runs == 1);
  CHECK(ctx.analyses().counts().dropped == 0);
}

TEST_CASE("a function pass keeps the results on the functions it left alone, and drops the rest") {
  reset_runs();
  kiln::pass_context ctx;
  const handle::module m = handle::make_module(3);
  CHECK(*ctx.analysis<total_length>(m) == 6);
  auto old_f1 = ctx.analysis<body_length>(m.get("f1"));
  const handle::module out = kiln::run(grow_f1{}, m, ctx);
  CHECK(out.get("f0") == m.get("f0"));
  CHECK(out.get("f1") != m.get("f1"));
  // f0 and f2 are the same objects: their results stay. f1 changed and the module is new: theirs go.
  CHECK(ctx.cached_analysis<body_length>(out.get("f0")) != nullptr);
  CHECK(ctx.cached_analysis<body_length>(out.get("f2")) != nullptr);
  CHECK(ctx.cached_analysis<body_length>(m.get("f1")) == nullptr);
  CHECK(ctx.cached_analysis<total_length>(m) == nullptr);
  CHECK(ctx.analyses().counts().dropped == 2);
  // A holder's result outlives its invalidation.
  CHECK(*old_f1 == 2);
  // The new module's total needs only the new f1's length.
  CHECK(*ctx.analysis<total_length>(out) == 7);
  CHECK(body_length::runs == 4);
}

TEST_CASE("what a pass preserves moves to its output: the module's, and each changed function's by name") {
  reset_runs();
  kiln::pass_context ctx;
  const handle::module m = handle::make_module(2);
  auto f1_length = ctx.analysis<body_length>(m.get("f1"));
  (void)ctx.analysis<total_length>(m);
  const handle::module out = kiln::run(shout_f1{}, m, ctx);
  CHECK(out.get("f1")->body == "B1");
  CHECK(ctx.cached_analysis<body_length>(out.get("f1")) == f1_length);  // carried, not recomputed
  CHECK(ctx.cached_analysis<total_length>(out) == nullptr);             // not preserved
  const kiln::analysis_counts c = ctx.analyses().counts();
  CHECK(c.carried == 1);
  CHECK(c.dropped == 1);
  CHECK(*ctx.analysis<total_length>(out) == 4);
  CHECK(body_length::runs == 2);

  // preserves_all: the module's results move to the new module.
  const handle::module again = kiln::run(rebuild{}, out, ctx);
  CHECK(!kiln::module_traits<handle::module>::same(again, out));
  CHECK(ctx.cached_analysis<total_length>(again) != nullptr);
  CHECK(total_length::runs == 2);
  // ... and a new module that says nothing drops them.
  const handle::module plain = kiln::run(rebuild_plain{}, again, ctx);
  CHECK(ctx.cached_analysis<total_length>(plain) == nullptr);
  CHECK(ctx.cached_analysis<body_length>(plain.get("f0")) != nullptr);  // the functions are the same objects
}

TEST_CASE("the steps of pipelines invalidate, on the direct path and under instruments alike") {
  reset_runs();
  const handle::module m = handle::make_module(2);
  using pipeline = kiln::sequential<shout_f1, grow_f1, nothing>;
  for (bool instrumented : {false, true}) {
    CAPTURE(instrumented);
    kiln::pass_context ctx;
    if (instrumented) ctx.set_instruments({kiln::instrument(kiln::pass_timing{})});
    (void)ctx.analysis<total_length>(m);
    const handle::module out = kiln::run(pipeline{}, m, ctx);
    CHECK(out.get("f1")->body == "B1x");
    CHECK(ctx.cached_analysis<body_length>(out.get("f0")) != nullptr);
    CHECK(ctx.cached_analysis<body_length>(out.get("f1")) == nullptr);
    CHECK(ctx.analyses().size() == 1);
    CHECK(ctx.analyses().counts().carried == 1);  // shout_f1 carried f1's length; grow_f1 dropped it
  }
}

TEST_CASE("make_pass passes take what the callable preserves, clear() drops everything") {
  struct callable {
    using preserves = kiln::preserves<body_length>;
    handle::module operator()(const handle::module& m) const { return handle::module(*m.functions); }
  };
  auto p = kiln::module_pass<"callable_pass">(callable{});
  static_assert(kiln::preserves_analysis<decltype(p), body_length>);
  kiln::pass_context ctx;
  const handle::module m = handle::make_module(2);
  (void)ctx.analysis<total_length>(m);
  (void)kiln::run(p, m, ctx);
  CHECK(ctx.analyses().size() == 2);  // the functions' lengths; the module's total went
  ctx.analyses().clear();
  CHECK(ctx.analyses().empty());
  CHECK(ctx.analyses().size() == 0);
}
