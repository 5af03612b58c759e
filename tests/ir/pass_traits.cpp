// SPDX-License-Identifier: Apache-2.0
// kiln's reference IR as a model of the pass infrastructure: function and kernel-function passes,
// SkipOptimization, "changed?" by identity, printing and verifying through the instruments.
#include "helpers.hpp"

#include <kiln/ir/pass_traits.hpp>
#include <kiln/pass/instruments/print_ir.hpp>
#include <kiln/pass/instruments/verify_ir.hpp>
#include <kiln/pass/make_pass.hpp>
#include <kiln/pass/pipeline.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <sstream>

using namespace kiln_test;

namespace {

std::vector<std::string>& visited() {
  static std::vector<std::string> v;
  return v;
}

constexpr auto record_functions = kiln::function_pass<"record_functions">([](const ir::function& f, const ir::ir_module&, kiln::pass_context&) {
  visited().push_back("function");
  return f;
});
constexpr auto record_kernels = kiln::kernel_function_pass<"record_kernels">([](const ir::prim_func& f) {
  visited().push_back(f->body ? "kernel" : "extern kernel");
  return f;
});
constexpr auto mark_inlined = kiln::function_pass<"mark_inlined">([](const ir::function& f) {
  return ir::ref_cast<ir::function_node>(ir::with_attr(f, "inlined", true));
});

/// main(x) { return x }, as a module.
ir::ir_module tiny() {
  auto x = ir::make_var("x", f32({2}));
  return ir::with_function(ir::make_module(), "main", ir::make_function({x}, x));
}

/// Replaces each function's body with a use of a variable it never defines.
constexpr auto break_it = kiln::function_pass<"break_it">([](const ir::function& f) {
  auto ghost = ir::make_var("ghost", f32({2}));
  auto y = ir::make_var("y", f32({2}));
  auto body = ir::make_seq({{false, {{y, ir::call_op("add", {f->params[0], ghost}), {}}}}}, y);
  return ir::make_function(f->params, body);
});

}  // namespace

TEST_CASE("the reference IR models module_like, with kernel functions and a verifier") {
  static_assert(kiln::module_like<ir::ir_module>);
  static_assert(kiln::has_kernel_functions<ir::ir_module>);
  static_assert(kiln::verifiable_module<ir::ir_module>);
  static_assert(kiln::pass_info_of<decltype(record_kernels), ir::ir_module>.kind == kiln::pass_kind::kernel_function);
}

TEST_CASE("function passes see Relax functions, kernel-function passes see prim_funcs, SkipOptimization is honoured") {
  ir::ir_module m = make_misc();  // kernels fused_add_relu and extern_kernel; helper (SkipOptimization) and main
  kiln::pass_context ctx;
  visited().clear();
  ir::ir_module out = kiln::run(kiln::sequential<decltype(record_functions), decltype(record_kernels)>{}, m, ctx);
  CHECK(visited() == std::vector<std::string>{"function", "kernel", "extern kernel"});
  CHECK(out.get() == m.get());  // nothing changed: the same module object
}

TEST_CASE("a function pass that changes functions rebuilds the module and shares what it did not touch") {
  ir::ir_module m = make_misc();
  kiln::pass_context ctx;
  ir::ir_module out = kiln::run(mark_inlined, m, ctx);
  REQUIRE(out.get() != m.get());
  CHECK(out->size() == m->size());
  CHECK(out->lookup("main")->attrs.contains("inlined"));
  CHECK(!out->lookup("helper")->attrs.contains("inlined"));                    // skipped
  CHECK(out->lookup("fused_add_relu").get() == m->lookup("fused_add_relu").get());  // shared
  CHECK(out->get_global_var("main").get() == m->get_global_var("main").get());      // same signature, same global
  CHECK(ir::verify(out).empty());
}

TEST_CASE("verify_ir names the pass that broke the IR") {
  kiln::pass_context ctx;
  ctx.set_instruments({kiln::verify_ir{}});
  ir::ir_module m = tiny();
  CHECK(message_of<kiln::ir_verify_error>([&] { (void)kiln::run(kiln::sequential<decltype(mark_inlined), decltype(break_it)>{}, m, ctx); }) ==
        "kiln::verify_ir: pass 'break_it' left the module not well formed:\n"
        "  in function 'main', binding 'y': variable 'ghost' is used but not defined");
  CHECK(ir::verify(m).empty());  // the input is untouched
}

TEST_CASE("verify_ir reports an input that was broken before any pass ran") {
  ir::ir_module broken = kiln::run(break_it, tiny());  // no instruments in the default context
  kiln::verify_ir verifier;
  kiln::pass_context ctx;
  CHECK(message_of<kiln::ir_verify_error>([&] { (void)kiln::run(mark_inlined, broken, ctx, verifier); })
            .starts_with("kiln::verify_ir: the module given to the pipeline is not well formed (found before pass "
                         "'mark_inlined'):"));
}

TEST_CASE("print_ir prints the reference IR in its text format") {
  std::ostringstream out;
  kiln::print_ir printer(out, kiln::print_ir::after_change);
  kiln::pass_context ctx;
  (void)kiln::run(kiln::sequential<decltype(record_functions), decltype(mark_inlined)>{}, tiny(), ctx, printer);
  std::string text = out.str();
  CHECK(text.starts_with("// pass 'record_functions' did not change the module\n// IR after function pass 'mark_inlined'\n"));
  CHECK(text.find("\"inlined\": True") != std::string::npos);
  CHECK(text.find("def main(") != std::string::npos);
}

TEST_CASE("run-time pipelines work on the reference IR") {
  kiln::pass_registry<ir::ir_module> reg;
  reg.add<decltype(mark_inlined)>().add<decltype(record_kernels)>();
  kiln::pass<ir::ir_module> p = kiln::parse_pipeline<ir::ir_module>("record_kernels,mark_inlined", reg);
  visited().clear();
  ir::ir_module out = p(make_misc());
  CHECK(visited().size() == 2);
  CHECK(out->lookup("main")->attrs.contains("inlined"));
}
