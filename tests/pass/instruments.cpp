// SPDX-License-Identifier: Apache-2.0
// The built-in instruments: pass timing, print IR, bisect limit (verify_ir is tested on kiln's IR,
// which has a verifier, in tests/ir/pass_traits.cpp).
#include "probes.hpp"

#include <kiln/pass/instruments/bisect.hpp>
#include <kiln/pass/instruments/pass_timing.hpp>
#include <kiln/pass/instruments/print_ir.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <sstream>

using namespace kiln_test;
using kiln::pass_list;

namespace {

using a = module_probe<"a">;
using b = function_probe<"b">;
using identity = decltype(kiln::function_pass<"identity">([](const toy::function& f) { return f; }));
using cleanup = kiln::named_sequential<"cleanup", 0, a, b>;
using pipeline = kiln::sequential<cleanup, a, cleanup>;

strings lines_of(const std::string& s) {
  strings out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("pass_timing records a tree that mirrors the pipelines, merging repeated runs") {
  auto timer = std::make_shared<kiln::pass_timing>();
  kiln::pass_context ctx;
  ctx.set_instruments({timer});
  (void)pipeline{}(toy::make_module(2), ctx);
  const auto& roots = timer->report();
  REQUIRE(roots.size() == 1);
  CHECK(roots[0].name == "sequential");
  CHECK(roots[0].kind == kiln::pass_kind::sequential);
  REQUIRE(roots[0].children.size() == 2);  // cleanup (twice) and a
  const auto& c = roots[0].children[0];
  CHECK(c.name == "cleanup");
  CHECK(c.calls == 2);
  REQUIRE(c.children.size() == 2);
  CHECK(c.children[0].name == "a");
  CHECK(c.children[0].calls == 2);
  CHECK(roots[0].children[1].name == "a");
  CHECK(roots[0].children[1].calls == 1);
  CHECK(timer->total() == roots[0].total);
  CHECK(c.total >= c.children[0].total + c.children[1].total);
  CHECK(roots[0].self().count() >= 0);
}

TEST_CASE("pass_timing prints an aligned table and a tree") {
  kiln::pass_timing timer;
  kiln::pass_context ctx;
  (void)kiln::run(pipeline{}, toy::make_module(2), ctx, timer);  // as a compile-time policy
  strings table = lines_of(timer.table());
  REQUIRE(table.size() == 6);
  CHECK(table[0].starts_with("pass         calls     total ms      self ms   share"));
  CHECK(table[1].starts_with("sequential       1"));
  CHECK(table[1].ends_with("100.0%"));
  CHECK(table[2].starts_with("  cleanup        2"));
  CHECK(table[3].starts_with("    a            2"));
  CHECK(table[4].starts_with("    b            2"));
  CHECK(table[5].starts_with("  a              1"));
  strings tree = lines_of(timer.tree());
  REQUIRE(tree.size() == 5);
  CHECK(tree[0].starts_with("sequential: "));
  CHECK(tree[0].ends_with("(100.00%; 100.00%)"));
  CHECK(tree[1].starts_with("\tcleanup: "));  // one tab per level, as TVM's render()
  CHECK(tree[2].starts_with("\t\ta: "));
  timer.reset();
  CHECK(timer.report().empty());
}

TEST_CASE("pass_timing counts a failed pass and closes its timer") {
  kiln::pass_timing timer;
  kiln::pass_context ctx;
  CHECK_THROWS_AS((void)kiln::run(kiln::sequential<a, failing_probe<"bad">>{}, toy::make_module(1), ctx, timer), kiln::pass_error);
  REQUIRE(timer.report().size() == 1);
  CHECK(timer.report()[0].children[1].name == "bad");
  CHECK(timer.report()[0].children[1].failures == 1);
  CHECK(lines_of(timer.table())[3].ends_with("(failed)"));
}

TEST_CASE("print_ir prints before and after each pass, filtered by name") {
  std::ostringstream out;
  kiln::pass_context ctx;
  ctx.set_instruments({kiln::print_ir(out, kiln::print_ir::before | kiln::print_ir::after, {"a"})});
  (void)kiln::run(kiln::sequential<a, b>{}, toy::make_module(1), ctx);
  CHECK(out.str() ==
        "// IR before module pass 'a'\ntoy { f0=0 }\n"
        "// IR after module pass 'a'\ntoy { f0=0 a=0 }\n");
}

TEST_CASE("print_ir after_change prints only changed modules and says which passes changed nothing") {
  std::ostringstream out;
  kiln::pass_context ctx;
  ctx.set_instruments({kiln::print_ir(out, kiln::print_ir::after_change)});
  (void)kiln::run(kiln::sequential<identity, b>{}, toy::make_module(1), ctx);
  CHECK(out.str() ==
        "// pass 'identity' did not change the module\n"
        "// IR after function pass 'b'\ntoy { f0=1 }\n");
}

TEST_CASE("bisect_limit runs the first N passes, skips the rest, and names the N-th") {
  std::ostringstream log;
  auto bisect = std::make_shared<kiln::bisect_limit>(3, &log);
  kiln::pass_context ctx;
  ctx.set_instruments({bisect, logging_instrument{"pi"}});
  trace().clear();
  (void)pipeline{}(toy::make_module(1), ctx);
  CHECK(bisect->last_run() == "a");
  CHECK(bisect->passes_seen() == 5);
  CHECK(log.str() ==
        "BISECT: running pass (1) a\nBISECT: running pass (2) b\nBISECT: running pass (3) a\n"
        "BISECT: NOT running pass (4) a\nBISECT: NOT running pass (5) b\n");
  auto t = take_trace();
  CHECK(std::count(t.begin(), t.end(), "pi.skipped(a, bisect limit)") == 1);
  CHECK(std::count(t.begin(), t.end(), "pi.skipped(b, bisect limit)") == 1);
}

TEST_CASE("bisect_limit is not consulted for passes the context requires") {
  auto bisect = std::make_shared<kiln::bisect_limit>(0);
  kiln::pass_context ctx;
  ctx.require("b").set_instruments({bisect});
  trace().clear();
  (void)kiln::run(kiln::sequential<a, b>{}, toy::make_module(1), ctx);
  CHECK(take_trace() == strings{"b:f0"});
  CHECK(bisect->last_run().empty());
}
