// SPDX-License-Identifier: Apache-2.0
// Run-time pipelines: kiln::pass, the registry, make_pipeline and textual pipelines.
#include "probes.hpp"

#include <kiln/pass/erased_pass.hpp>
#include <kiln/pass/pipeline.hpp>
#include <kiln/pass/registry.hpp>

#include <doctest/doctest.h>

using namespace kiln_test;
using kiln::pass_list;
using toy_pass = kiln::pass<toy::module>;
using registry = kiln::pass_registry<toy::module>;

namespace {

using fold_constant = module_probe<"fold_constant">;
using normalize = module_probe<"normalize">;
using dead_code_elimination = module_probe<"dead_code_elimination", 1, pass_list<normalize>>;
using fuse_ops = module_probe<"fuse_ops", 3, pass_list<normalize>>;
using count = function_probe<"count">;
struct cyc_b;
struct cyc_a : module_probe<"cyc_a"> {
  using required = pass_list<cyc_b>;
};
struct cyc_b : module_probe<"cyc_b"> {
  using required = pass_list<cyc_a>;
};

/// A registry with the test passes (registering dead_code_elimination also registers normalize).
registry& test_registry() {
  static registry r;
  static const bool filled = (r.add<fold_constant>().add<dead_code_elimination>().add<fuse_ops>().add<count>(), true);
  (void)filled;
  return r;
}

strings names_of(const std::vector<kiln::pipeline_step>& steps) {
  strings out;
  for (const auto& s : steps) out.push_back(std::string(s.name) + (s.pulled_in ? "*" : ""));
  return out;
}

strings trace_of(const toy_pass& p, kiln::pass_context& ctx) {
  trace().clear();
  (void)p(toy::make_module(1), ctx);
  return take_trace();
}

}  // namespace

TEST_CASE("kiln::pass wraps any static pass and runs it under the same protocol") {
  toy_pass p = count{};
  CHECK(p.name() == "count");
  CHECK(p.info().kind == kiln::pass_kind::function);
  CHECK(p.target<count>() != nullptr);
  CHECK(p.target<fold_constant>() == nullptr);
  kiln::pass_context ctx;
  CHECK(p(toy::make_module(2), ctx).value("f1") == 2);
  ctx.disable("count");  // called directly, it still runs (TVM: only a pipeline gates its steps)
  CHECK(p(toy::make_module(2), ctx).value("f1") == 2);
  CHECK(kiln::make_pipeline<toy::module>({p}, "in_a_pipeline", 0)(toy::make_module(2), ctx).value("f1") == 1);
}

TEST_CASE("the registry creates passes by name, registers requirements, and rejects conflicts") {
  registry& reg = test_registry();
  CHECK(reg.names() == strings{"count", "dead_code_elimination", "fold_constant", "fuse_ops", "normalize"});
  CHECK(reg.create("normalize").name() == "normalize");
  CHECK_NOTHROW(reg.add<fold_constant>());  // the same type again
  CHECK(message_of<kiln::usage_error>([&] { reg.add("fold_constant", [] { return toy_pass(normalize{}); }); }) ==
        "kiln::pass_registry::add: a different pass is already registered as 'fold_constant'");
  CHECK(message_of<kiln::usage_error>([&] { (void)reg.create("fold_constnt"); }) ==
        "no pass is registered as 'fold_constnt' (did you mean 'fold_constant'?)");
  CHECK(message_of<kiln::usage_error>([&] { reg.add("bad name", [] { return toy_pass(normalize{}); }); }) ==
        "kiln::pass_registry::add: 'bad name' is not a valid pass name (letters, digits, '_', '.' and '-' only)");
}

TEST_CASE("get_pass finds passes in the global registry (the design's GetPass)") {
  registry::global().add<fold_constant>();
  CHECK(kiln::get_pass<toy::module>("fold_constant").name() == "fold_constant");
  CHECK(message_of<kiln::usage_error>([] { (void)kiln::get_pass<toy::module>("nothing_like_it"); })
            .starts_with("kiln::get_pass: no pass is registered as 'nothing_like_it'"));
}

TEST_CASE("make_pipeline resolves requirements by name, as sequential does by type") {
  toy_pass p = kiln::make_pipeline<toy::module>({dead_code_elimination{}, fold_constant{}, fuse_ops{}}, "o2", 0,
                                                test_registry());
  CHECK(names_of(p.steps()) == strings{"normalize*", "dead_code_elimination", "fold_constant", "fuse_ops"});
  CHECK(names_of(p.steps()) == names_of(kiln::sequential<dead_code_elimination, fold_constant, fuse_ops>::steps()));
  kiln::pass_context ctx;
  CHECK(trace_of(p, ctx) == strings{"normalize", "dead_code_elimination", "fold_constant"});
  ctx.set_opt_level(0);  // dead_code_elimination (1) and fuse_ops (3) are off, so normalize is not needed
  CHECK(trace_of(p, ctx) == strings{"fold_constant"});
  ctx.set_opt_level(2).disable("normalize");
  CHECK(message_of<kiln::usage_error>([&] { (void)trace_of(p, ctx); }) ==
        "kiln::sequential 'o2': pass 'normalize' is disabled in the pass_context, but 'dead_code_elimination', which "
        "runs, requires it; disable 'dead_code_elimination' too, or stop disabling 'normalize'");
}

TEST_CASE("make_pipeline reports unknown requirements and cycles") {
  registry empty;
  CHECK(message_of<kiln::usage_error>([&] { (void)kiln::make_pipeline<toy::module>({dead_code_elimination{}}, "p", 0, empty); }) ==
        "kiln::make_pipeline 'p': pass 'dead_code_elimination' requires 'normalize', but no pass is registered as "
        "'normalize'; no passes are registered");
  registry reg;
  reg.add<cyc_a>();
  CHECK(message_of<kiln::usage_error>([&] { (void)kiln::make_pipeline<toy::module>({cyc_a{}}, "p", 0, reg); }) ==
        "kiln::make_pipeline 'p': 'cyc_a' requires 'cyc_b', which requires 'cyc_a' (cycle)");
}

TEST_CASE("a run-time pipeline shows instruments the same calls as the static one") {
  kiln::pass_context ctx;
  ctx.set_instruments({logging_instrument{"pi"}});
  trace().clear();
  (void)kiln::sequential<dead_code_elimination, count>{}(toy::make_module(1), ctx);
  strings static_trace = take_trace();
  (void)kiln::parse_pipeline<toy::module>("dead_code_elimination,count", test_registry())(toy::make_module(1), ctx);
  CHECK(take_trace() == static_trace);
}

TEST_CASE("parse_pipeline reads names, nested pipelines with opt levels, and spaces") {
  toy_pass p = kiln::parse_pipeline<toy::module>(" fold_constant , cleanup<1>( dead_code_elimination ,count ), fuse_ops ",
                                                 test_registry());
  CHECK(p.text() == "sequential(fold_constant,cleanup<1>(dead_code_elimination,count),fuse_ops)");
  CHECK(names_of(p.steps()) == strings{"fold_constant", "cleanup", "normalize*", "fuse_ops"});
  CHECK(kiln::parse_pipeline<toy::module>("", test_registry()).steps().empty());
  CHECK(kiln::parse_pipeline<toy::module>("inner()", test_registry()).text() == "sequential(inner())");
}

TEST_CASE("a static pipeline prints itself in the textual form, and parsing it gives the same pipeline") {
  using inner = kiln::named_sequential<"cleanup", 1, dead_code_elimination, count>;
  using pipeline = kiln::sequential<fold_constant, inner, fuse_ops>;
  CHECK(pipeline::text() == "fold_constant,cleanup<1>(dead_code_elimination,count),fuse_ops");
  toy_pass parsed = kiln::parse_pipeline<toy::module>(pipeline::text(), test_registry());
  CHECK(parsed.text() == toy_pass(pipeline{}).text());
  CHECK(names_of(parsed.steps()) == names_of(pipeline::steps()));
  for (int level = 0; level <= 3; ++level) {
    kiln::pass_context ctx(level);
    trace().clear();
    toy::module a = pipeline{}(toy::make_module(2), ctx);
    strings static_trace = take_trace();
    toy::module b = parsed(toy::make_module(2), ctx);
    CHECK(take_trace() == static_trace);
    CHECK(a.functions->size() == b.functions->size());
  }
}

TEST_CASE("parse errors say what, point at where, and suggest close names") {
  auto error_of = [](std::string_view text) {
    return message_of<kiln::pipeline_parse_error>([&] { (void)kiln::parse_pipeline<toy::module>(text, test_registry()); });
  };
  CHECK(error_of("fold_constnt,dead_code_elimination") ==
        "kiln::parse_pipeline: unknown pass 'fold_constnt' (did you mean 'fold_constant'?) at column 1\n"
        "  fold_constnt,dead_code_elimination\n"
        "  ^~~~~~~~~~~~");
  CHECK(error_of("count,zzz") ==
        "kiln::parse_pipeline: unknown pass 'zzz'; registered passes: count, dead_code_elimination, fold_constant, "
        "fuse_ops, normalize at column 7\n  count,zzz\n        ^~~");
  CHECK(error_of("count,,fuse_ops") == "kiln::parse_pipeline: expected a pass name at column 7\n  count,,fuse_ops\n        ^");
  CHECK(error_of("count fuse_ops") == "kiln::parse_pipeline: expected ',' between passes at column 7\n  count fuse_ops\n        ^");
  CHECK(error_of("p(count") == "kiln::parse_pipeline: this '(' is not closed at column 2\n  p(count\n   ^");
  CHECK(error_of("count)") == "kiln::parse_pipeline: unbalanced ')' at column 6\n  count)\n       ^");
  CHECK(error_of("p<x>(count)") ==
        "kiln::parse_pipeline: expected an opt level such as <2> after pipeline name 'p' at column 2\n  p<x>(count)\n   ^~");
  try {
    (void)kiln::parse_pipeline<toy::module>("count,zzz", test_registry());
  } catch (const kiln::pipeline_parse_error& e) {
    CHECK(e.column() == 7);
  }
}

TEST_CASE("pipeline text nested deeper than 64 levels is an error, never a stack overflow") {
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "p(";
  text += "count";
  for (int i = 0; i < 50000; ++i) text += ")";
  CHECK(message_of<kiln::pipeline_parse_error>([&] { (void)kiln::parse_pipeline<toy::module>(text, test_registry()); })
            .find("pipelines nested too deeply (limit 64)") != std::string::npos);
}
