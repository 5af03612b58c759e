// SPDX-License-Identifier: Apache-2.0
// crash_reproducer: the file a failing run leaves (full and local forms, pass failures and
// verifier failures), and its replay to the same failure; the reader's errors.
#include "handle_ir.hpp"

#include "../common/message_of.hpp"

#include <kiln/pass/instruments/crash_reproducer.hpp>
#include <kiln/pass/pass_config.hpp>
#include <kiln/pass/pipeline.hpp>
#include <kiln/pass/registry.hpp>
#include <kiln/pass/run.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <unistd.h>

using kiln_test::message_of;

namespace {

/// Appends 'x' to every body.
struct grow {
  static constexpr std::string_view name = "grow";
  handle::function operator()(const handle::function& f) const { return handle::make_function(f->body + "x"); }
};

/// Fails when a body is longer than the `repro.limit` config option (default 3).
inline const kiln::pass_config_option<std::int64_t> limit_option{"repro.limit", "longest body reject_long accepts"};
struct reject_long {
  static constexpr std::string_view name = "reject_long";
  handle::module operator()(const handle::module& m, kiln::pass_context& ctx) const {
    const auto limit = ctx.config(limit_option, std::int64_t{3});
    for (const auto& [n, f] : *m.functions)
      if (std::int64_t(f->body.size()) > limit) throw std::invalid_argument(n + " is longer than " + std::to_string(limit));
    return m;
  }
};

/// Empties f1's body: the module is no longer well formed.
struct empty_f1 {
  static constexpr std::string_view name = "empty_f1";
  handle::function operator()(const handle::function& f, const handle::module& m, kiln::pass_context&) const {
    return f == m.get("f1") ? handle::make_function("") : f;
  }
};

kiln::pass_registry<handle::module>& registry() {
  static kiln::pass_registry<handle::module> r;
  static const bool filled = [] {
    r.add<grow>();
    r.add<reject_long>();
    r.add<empty_f1>();
    return true;
  }();
  (void)filled;
  return r;
}

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// A file name no other test process uses at the same time (CTest runs test cases in parallel
/// processes; an unseeded std::rand() gave them all the same name).
struct temp_file {
  static std::string unique_name() {
    static std::atomic<int> counter{0};
    return "kiln-repro-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(std::random_device{}()) + ".txt";
  }
  std::string path = (std::filesystem::temp_directory_path() / unique_name()).string();
  ~temp_file() { std::remove(path.c_str()); }
};

/// Runs `pipeline` on `input` with a reproducer; returns the failure's message.
std::string run_failing(const std::string& pipeline, const std::string& input, kiln::crash_reproducer::options o,
                        kiln::pass_context& ctx) {
  o.pipeline = pipeline;
  ctx.set_instruments({kiln::instrument(kiln::crash_reproducer(o, ctx))});
  const auto p = kiln::parse_pipeline<handle::module>(pipeline, registry());
  try {
    (void)p(handle::parse(input), ctx);
  } catch (const std::exception& e) {
    return e.what();
  }
  FAIL("the pipeline did not fail");
  return {};
}

std::string replay_failure(const std::string& file_text) {
  const kiln::reproducer r = kiln::reproducer::parse(file_text);
  try {
    (void)kiln::replay_reproducer<handle::module>(r, handle::parse, registry());
  } catch (const std::exception& e) {
    return e.what();
  }
  FAIL("the replay did not fail");
  return {};
}

}  // namespace

TEST_CASE("the full form holds the pipeline's input, the pipeline and the context, and replays to the same failure") {
  temp_file file;
  kiln::pass_context ctx(1);
  ctx.disable("nothing_by_this_name");
  ctx.set_config(limit_option, std::int64_t{4});
  const std::string failure = run_failing("grow,grow,grow,reject_long", "handle { f0=ab f1=c }", {.path = file.path}, ctx);
  CHECK(failure == "kiln: pass 'reject_long' (in 'sequential') failed: f0 is longer than 4");
  const std::string text = read(file.path);
  CHECK(text == "# kiln crash reproducer: kiln-opt --replay FILE\n"
                "# failed: kiln: pass 'reject_long' failed: f0 is longer than 4\n"
                "# pipeline: grow,grow,grow,reject_long\n"
                "# opt_level: 1\n"
                "# disabled: nothing_by_this_name\n"
                "# config: repro.limit=4\n"
                "handle { f0=ab f1=c }\n");
  CHECK(replay_failure(text) == failure);
  const kiln::reproducer r = kiln::reproducer::parse(text);
  CHECK(r.opt_level == 1);
  CHECK(r.disabled == std::vector<std::string>{"nothing_by_this_name"});
  CHECK(r.make_context().config(limit_option, std::int64_t{0}) == 4);
}

TEST_CASE("the local form holds the failing pass's input and that pass alone") {
  temp_file file;
  kiln::pass_context ctx;
  const std::string failure = run_failing("grow,grow,reject_long", "handle { f0=ab f1=c }", {.path = file.path, .local = true}, ctx);
  const std::string text = read(file.path);
  CHECK(text.find("# pipeline: reject_long\n") != std::string::npos);
  CHECK(text.find("handle { f0=abxx f1=cxx }\n") != std::string::npos);
  CHECK(replay_failure(text) == failure);
}

TEST_CASE("with verify_each, a pass that breaks the module leaves a reproducer whose replay verifies the same") {
  for (bool local : {false, true}) {
    CAPTURE(local);
    temp_file file;
    kiln::pass_context ctx;
    const std::string failure =
        run_failing("grow,empty_f1,grow", "handle { f0=a f1=b }", {.path = file.path, .local = local, .verify_each = true}, ctx);
    CHECK(failure == "kiln::verify_ir: pass 'empty_f1' left the module not well formed:\n  function 'f1' has an empty body");
    const std::string text = read(file.path);
    CHECK(text.find("# verify_each: true\n") != std::string::npos);
    CHECK(text.find(local ? "# pipeline: empty_f1\n" : "# pipeline: grow,empty_f1,grow\n") != std::string::npos);
    CHECK(text.find(local ? "handle { f0=ax f1=bx }" : "handle { f0=a f1=b }") != std::string::npos);
    CHECK(replay_failure(text) == failure);
  }
}

TEST_CASE("a run that does not fail writes nothing, one whose file cannot be written still fails as it did") {
  temp_file file;
  kiln::pass_context ctx;
  ctx.set_instruments({kiln::instrument(kiln::crash_reproducer({.path = file.path}, ctx))});
  (void)kiln::parse_pipeline<handle::module>("grow", registry())(handle::parse("handle { f0=a }"), ctx);
  CHECK(!std::filesystem::exists(file.path));
  CHECK(ctx.instruments()[0].target<kiln::crash_reproducer>()->written().empty());

  kiln::pass_context bad;
  const std::string failure = run_failing("grow,grow,grow,reject_long", "handle { f0=a }", {.path = "/nonexistent-dir/repro.txt"}, bad);
  CHECK(failure == "kiln: pass 'reject_long' (in 'sequential') failed: f0 is longer than 3");
  const auto* r = bad.instruments()[0].target<kiln::crash_reproducer>();
  CHECK(r->written().empty());
  CHECK(r->write_error() == "kiln::crash_reproducer: cannot write '/nonexistent-dir/repro.txt': No such file or directory");
}

TEST_CASE("reading a reproducer: what is wrong, and on which line") {
  CHECK(message_of([] { (void)kiln::reproducer::parse("handle { }"); }) ==
        "kiln::reproducer::parse: line 1: not a kiln crash reproducer (it must start with '# kiln crash reproducer')");
  CHECK(message_of([] { (void)kiln::reproducer::parse("# kiln crash reproducer\n# opt_level: 2\nhandle { }"); }) ==
        "kiln::reproducer::parse: the header has no '# pipeline:' line");
  CHECK(message_of([] { (void)kiln::reproducer::parse("# kiln crash reproducer\n# pipeline: grow\n# opt_level: two\n"); }) ==
        "kiln::reproducer::parse: line 3: opt_level must be a number 0 or more, not 'two'");
  CHECK(message_of([] { (void)kiln::reproducer::parse("# kiln crash reproducer\n# pipeline: grow\n# config: =4\n"); }) ==
        "kiln::reproducer::parse: line 3: a config line is 'key=value', not '=4'");
  CHECK(message_of([] { (void)kiln::reproducer::parse("# kiln crash reproducer\n# pipeline: grow\n# verify_each: yes\n"); }) ==
        "kiln::reproducer::parse: line 3: verify_each must be true or false, not 'yes'");
  // An unknown config key is the context's error, naming the key.
  const kiln::reproducer r = kiln::reproducer::parse("# kiln crash reproducer\n# pipeline: grow\n# config: no.such.key=1\nhandle { }");
  CHECK(message_of([&] { (void)r.make_context(); }).find("unknown config option 'no.such.key'") != std::string::npos);
  CHECK(message_of([] { (void)kiln::crash_reproducer({}, kiln::pass_context()); }) == "kiln::crash_reproducer: the file path is empty");
}
