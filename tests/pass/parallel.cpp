// SPDX-License-Identifier: Apache-2.0
// Function passes on several threads (pass_context::set_num_threads): the result, the diagnostics,
// the failure and the instrument calls are those of the run in order; passes that say they are not
// thread-safe, and passes inside a task, run in order. Part of thread_tests (run under TSan).
#include "../compile/helpers.hpp"
#include "../ir/models.hpp"
#include "handle_ir.hpp"
#include "probes.hpp"

#include <kiln/pass/run.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

using namespace kiln_test;

namespace {

/// Adds 1 to every function, counts the functions in a statistic and reports a note naming each.
constexpr auto bump = kiln::function_pass<"bump">([](const toy::function& f, const toy::module&, kiln::pass_context& ctx) {
  ++ctx.statistic("bump", "functions");
  ctx.note("saw " + f.name, "@" + f.name);
  toy::function g = f;
  g.value += 1;
  return g;
});

/// Fails on the functions whose value is 50 or 120 (with a different exception type each).
constexpr auto picky = kiln::function_pass<"picky">([](const toy::function& f, const toy::module&, kiln::pass_context& ctx) {
  ctx.warning("looked at " + f.name);
  if (f.value == 120) throw std::logic_error("no 120");
  if (f.value == 50) throw std::invalid_argument("no 50");
  return f;
});

/// Records the threads it ran on; not safe to run on several at once, and says so.
struct thread_recorder {
  static constexpr std::string_view name = "thread_recorder";
  static constexpr bool thread_safe = false;
  std::set<std::thread::id>* seen;
  toy::function operator()(const toy::function& f, const toy::module&, kiln::pass_context&) const {
    seen->insert(std::this_thread::get_id());  // unsynchronised: fine only because it runs in order
    return f;
  }
};

/// Counts how many functions the recording pass saw from each thread (thread-safe).
struct shared_counter {
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::atomic<int> calls{0};
};

}  // namespace

TEST_CASE("a function pass on several threads gives the module, statistics and diagnostics of the run in order") {
  const toy::module m = toy::make_module(300);
  kiln::pass_context one;
  const toy::module want = kiln::run(bump, m, one);

  kiln::pass_context ctx;
  ctx.set_num_threads(4);
  const toy::module got = kiln::run(bump, m, ctx);
  REQUIRE(got.functions->size() == 300);
  CHECK(*got.functions == *want.functions);
  CHECK(ctx.statistic("bump", "functions") == 300);
  REQUIRE(ctx.diagnostics().size() == 300);
  for (std::size_t i = 0; i < 300; ++i) {
    CHECK(ctx.diagnostics()[i].message == one.diagnostics()[i].message);  // function order
    CHECK(ctx.diagnostics()[i].pass == "bump");
  }
  CHECK(ctx.error_count() == 0);

  // In a pipeline, with an instrument: called once per pass, on the calling thread.
  kiln::pass_context traced;
  traced.set_num_threads(3).set_instruments({kiln::instrument(logging_instrument{"i"})});
  take_trace();
  using bump_pass = std::remove_const_t<decltype(bump)>;
  kiln::sequential<bump_pass, bump_pass> pipeline;
  const toy::module twice = kiln::run(pipeline, m, traced);
  CHECK(twice.value("f7") == 9);
  CHECK(take_trace() == strings{"i.should_run(sequential)", "i.before(sequential)", "i.should_run(bump)", "i.before(bump)",
                                "i.after(bump)", "i.should_run(bump)", "i.before(bump)", "i.after(bump)", "i.after(sequential)"});
}

TEST_CASE("a function pass on several threads fails as the run in order would: the first failing function's exception") {
  const toy::module m = toy::make_module(200);
  for (std::size_t threads : {1u, 2u, 4u}) {
    CAPTURE(threads);
    kiln::pass_context ctx;
    ctx.set_num_threads(threads);
    try {
      (void)kiln::run(picky, m, ctx);
      FAIL("expected a pass_error");
    } catch (const kiln::pass_error& e) {
      CHECK(std::string(e.what()).starts_with("kiln: pass 'picky' failed: no 50"));
      try {
        std::rethrow_if_nested(e);
        FAIL("expected a nested exception");
      } catch (const std::invalid_argument& original) {
        CHECK(std::string(original.what()) == "no 50");
      }
      // The warnings of f0 ... f50, in order, and none after the failing function.
      REQUIRE(e.diagnostics().size() == 51);
      CHECK(e.diagnostics().front().message == "looked at f0");
      CHECK(e.diagnostics().back().message == "looked at f50");
    }
    CHECK(ctx.diagnostics().size() == 51);
  }
}

TEST_CASE("passes that are not thread-safe, and passes run inside a task, run in order on one thread") {
  const toy::module m = toy::make_module(64);
  kiln::pass_context ctx;
  ctx.set_num_threads(4);
  std::set<std::thread::id> seen;
  (void)kiln::run(thread_recorder{&seen}, m, ctx);
  CHECK(seen == std::set<std::thread::id>{std::this_thread::get_id()});

  // A pass that runs a function pass inside each task: the inner one runs in order there, sees
  // the pipeline's context as current, and its reports join the outer function's.
  shared_counter counter;
  auto outer = kiln::function_pass<"outer">([&](const toy::function& f, const toy::module&, kiln::pass_context& ctx) {
    CHECK(&kiln::pass_context::current() == &ctx);
    const toy::module inner = kiln::run(bump, toy::module({f}), kiln::pass_context::current());
    {
      const std::lock_guard lock(counter.mutex);
      counter.threads.insert(std::this_thread::get_id());
    }
    ++counter.calls;
    return inner.functions->front();
  });
  const toy::module out = kiln::run(outer, m, ctx);
  CHECK(counter.calls == 64);
  CHECK(out.value("f10") == 11);
  REQUIRE(ctx.diagnostics().size() == 64);
  CHECK(ctx.diagnostics()[10].message == "saw f10");
  CHECK(ctx.diagnostics()[10].pass == "outer");  // the task's reports are stamped by the pass the pipeline ran
}

TEST_CASE("the thread count is checked") {
  kiln::pass_context ctx;
  CHECK(ctx.num_threads() == 1);
  CHECK(message_of<kiln::usage_error>([&] { ctx.set_num_threads(0); }) ==
        "kiln::pass_context::set_num_threads: the thread count must be between 1 and 1024, got 0");
  CHECK(ctx.num_threads() == 1);
}

TEST_CASE("a function pass on several threads cannot change the thread count under itself") {
  const toy::module m = toy::make_module(40);
  kiln::pass_context ctx;
  ctx.set_num_threads(2);
  std::atomic<int> refused{0};
  auto resizer = kiln::function_pass<"resizer">([&](const toy::function& f, const toy::module&, kiln::pass_context& c) {
    const std::string message = message_of<kiln::usage_error>([&] { c.set_num_threads(1); });
    if (message == "kiln::pass_context::set_num_threads: cannot be called from inside a task running on a thread pool "
                   "(a function pass on several threads, or a parallel_for task)")
      ++refused;
    return f;
  });
  const toy::module out = kiln::run(resizer, m, ctx);
  CHECK(refused == 40);
  CHECK(ctx.num_threads() == 2);  // unchanged, and the pool still works
  CHECK(kiln::run(bump, out, ctx).value("f7") == 8);

  // Uncaught, the refusal fails the pass like any other exception, and nothing changed.
  auto careless = kiln::function_pass<"careless">([](const toy::function& f, const toy::module&, kiln::pass_context& c) {
    c.set_num_threads(3);
    return f;
  });
  try {
    (void)kiln::run(careless, m, ctx);
    FAIL("expected a pass_error");
  } catch (const kiln::pass_error& e) {
    CHECK(std::string(e.what()).find("cannot be called from inside a task") != std::string::npos);
  }
  CHECK(ctx.num_threads() == 2);
  // At one thread the pass runs on the caller, not in a task: the same call is allowed there.
  kiln::pass_context single;
  auto grow = kiln::function_pass<"grow">([](const toy::function& f, const toy::module&, kiln::pass_context& c) {
    c.set_num_threads(2);
    return f;
  });
  (void)kiln::run(grow, toy::make_module(3), single);
  CHECK(single.num_threads() == 2);
}

TEST_CASE("kiln's compiler with its function passes on two threads gives the same executable") {
  // A module of several functions: the encoder layer, the CNN and the MLP side by side.
  ir::ir_module m = make_transformer_layer();
  const ir::ir_module cnn = make_cnn(), mlp = make_mlp();
  m = ir::with_function(m, "cnn", cnn->functions().front().func);
  m = ir::with_function(m, "mlp", mlp->functions().front().func);
  const std::vector<std::byte> want = vm::serialize(kiln::compile(m));
  kiln::pass_context ctx;
  ctx.set_num_threads(2);
  const kiln::pass_context_scope scope(ctx);
  CHECK(vm::serialize(kiln::compile(m)) == want);
}

TEST_CASE("function passes on several threads share the analysis cache: each result computed once, then hit") {
  const handle::module m = handle::make_module(200);
  kiln::pass_context ctx;
  ctx.set_num_threads(4);
  std::atomic<std::size_t> total{0};
  auto ask = kiln::function_pass<"ask">([&](const handle::function& f, const handle::module&, kiln::pass_context& c) {
    total += *c.analysis<handle::body_length>(f);
    total += *c.analysis<handle::body_length>(f);
    return f;
  });
  handle::body_length::runs = 0;
  CHECK(kiln::module_traits<handle::module>::same(kiln::run(ask, m, ctx), m));
  CHECK(handle::body_length::runs == 200);
  const kiln::analysis_counts c = ctx.analyses().counts();
  CHECK(c.computed == 200);
  CHECK(c.hits == 200);
  std::size_t expected = 0;
  for (int i = 0; i < 200; ++i) expected += 2 * (1 + std::to_string(i).size());
  CHECK(total == expected);
  // A second run hits for every function.
  (void)kiln::run(ask, m, ctx);
  CHECK(handle::body_length::runs == 200);
}

namespace {

// Functions that count their own destruction: `tag` makes them, `untag` replaces every one.
std::atomic<int> counted_alive{0};
struct counted_node : handle::function_node {
  explicit counted_node(std::string b) : handle::function_node{std::move(b)} { ++counted_alive; }
  counted_node(const counted_node&) = delete;
  counted_node& operator=(const counted_node&) = delete;
  ~counted_node() { --counted_alive; }
};
struct tag {
  static constexpr std::string_view name = "tag";
  handle::function operator()(const handle::function& f) const { return std::make_shared<const counted_node>(f->body + "t"); }
};
struct untag {
  static constexpr std::string_view name = "untag";
  handle::function operator()(const handle::function& f) const { return handle::make_function(f->body + "u"); }
};

}  // namespace

TEST_CASE("in a pipeline on several threads, the modules the passes replaced are released before it returns") {
  const handle::module m = handle::make_module(500);
  for (std::size_t threads : {1u, 2u, 4u}) {
    CAPTURE(threads);
    kiln::pass_context ctx;
    ctx.set_num_threads(threads);
    counted_alive = 0;
    const handle::module out = kiln::run(kiln::sequential<tag, untag>{}, m, ctx);
    CHECK(counted_alive.load() == 0);  // tag's 500 functions: made, replaced and released within the run
    CHECK(out.get("f499")->body == "b499tu");
    // With an instrument, and in a pipeline made at run time.
    kiln::pass_context traced;
    traced.set_num_threads(threads).set_instruments({kiln::instrument(logging_instrument{"i"})});
    (void)kiln::run(kiln::sequential<tag, untag, tag, untag>{}, m, traced);
    CHECK(counted_alive.load() == 0);
    take_trace();
    const kiln::pass<handle::module> pipeline = kiln::make_pipeline<handle::module>({tag{}, untag{}, tag{}, untag{}});
    CHECK(pipeline(m, ctx).get("f0")->body == "b0tutu");
    CHECK(counted_alive.load() == 0);
  }
}
