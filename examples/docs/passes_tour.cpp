// SPDX-License-Identifier: Apache-2.0
// docs/passes.md shows the region "tour" of this program (tests/docs/check_snippets.py); CTest
// builds and runs it. The passes are placeholders that return what they are given: the tour is
// about how passes are declared, composed, configured and run.
#include <kiln/ir/ir.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/pass/pass.hpp>

#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace ir = kiln::ir;

// [tour]
#include <kiln/pass/pass.hpp>
#include <kiln/ir/pass_traits.hpp>   // kiln's IR as a model of kiln::module_like

struct normalize { static constexpr std::string_view name = "normalize";
                   ir::ir_module operator()(const ir::ir_module& m) const { return m; } };  // a module pass
struct fold_constant {
  static constexpr std::string_view name = "fold_constant";
  static constexpr int opt_level = 1;
  using required = kiln::pass_list<normalize>;                                          // resolved statically
  ir::function operator()(const ir::function& f, const ir::ir_module&, kiln::pass_context&) const { return f; }  // a function pass
};
constexpr auto dce = kiln::function_pass<"dce", 1>([](const ir::function& f) { return f; });  // from a lambda
inline const kiln::pass_config_option<int> unroll_step{"tour.unroll_step", "deepest loop to unroll"};
struct record_passes {                                           // a compile-time instrument policy
  std::vector<std::string> ran;
  void run_after_pass(const ir::ir_module&, const kiln::pass_info& i) { ran.emplace_back(i.name); }
};

using o1 = kiln::sequential<fold_constant, decltype(dce)>;        // runs normalize, fold_constant, dce

std::vector<std::string> tour(const ir::ir_module& module, std::ostream& log) {
  kiln::pass_context ctx(/*opt_level=*/2);
  ctx.disable("dce").set_config(unroll_step, 16);                // a registered pass_config_option<int>
  auto timer = std::make_shared<kiln::pass_timing>();
  ctx.set_instruments({timer, kiln::print_ir(log, kiln::print_ir::after_change)});
  {
    kiln::pass_context_scope scope(ctx);                         // with PassContext(...):
    ir::ir_module out = o1{}(module);                            //   runs in pass_context::current()
  }
  record_passes policy;
  ir::ir_module out = kiln::run(o1{}, module, ctx, policy);      // the policy's hooks are inlined
  kiln::pass_registry<ir::ir_module> registry;
  registry.add<normalize>().add<fold_constant>().add<decltype(dce)>();
  kiln::pass<ir::ir_module> p = kiln::parse_pipeline<ir::ir_module>(o1::text(), registry);  // from text
  return policy.ran;                                             // normalize, fold_constant, sequential
}
// [tour]

int main() {
  ir::var x = ir::make_var("x", ir::tensor_type({4}, kiln::dtype::float32));
  ir::block_builder bb;
  bb.function("main", {x}, [&] { return bb.dataflow([&] { return bb.emit_output(ir::call_op("exp", {x})); }); });
  std::ostringstream log;
  const std::vector<std::string> ran = tour(bb.module(), log);
  std::cout << "o1 = " << o1::text() << "; ran:";
  for (const std::string& name : ran) std::cout << ' ' << name;
  std::cout << '\n';
  // normalize (required by fold_constant), fold_constant, then the pipeline itself; dce is disabled.
  return ran == std::vector<std::string>{"normalize", "fold_constant", "sequential"} ? 0 : 1;
}
