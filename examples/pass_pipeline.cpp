// SPDX-License-Identifier: Apache-2.0
// Writing passes for kiln's IR and running them as a pipeline:
//   1. a custom function pass (a class) and a module pass (a lambda);
//   2. a pipeline composed at compile time, whose requirement is resolved automatically;
//   3. running it under a pass_context with the timing and print-after-change instruments;
//   4. the same pipeline built at run time from its textual form.
#include <kiln/ir/ir.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/pass/pass.hpp>

#include <iostream>
#include <memory>

using namespace kiln;

namespace {

/// Tags every function with the number of bindings it has (a function pass with state: it
/// counts the functions it saw).
struct count_bindings {
  static constexpr std::string_view name = "count_bindings";
  static constexpr int opt_level = 1;
  int functions_seen = 0;

  ir::function operator()(const ir::function& f, const ir::ir_module&, pass_context& ctx) {
    ++functions_seen;
    std::int64_t n = 0;
    ir::post_order_visit(f->body, [&](const ir::expr& e) {
      if (auto* seq = ir::dyn_cast<ir::seq_expr_node>(e.get()))
        for (const auto& block : seq->blocks) n += static_cast<std::int64_t>(block.bindings.size());
    });
    if (n == 0) ctx.warning("function has no bindings");
    return ir::ref_cast<ir::function_node>(ir::with_attr(f, "num_bindings", n));
  }
};

/// Requires count_bindings; stamps the module with the pipeline's name (a module pass from a lambda).
constexpr auto stamp_module = module_pass<"stamp_module", 0, pass_list<count_bindings>>([](const ir::ir_module& m) {
  ir::attr_map attrs = m->attrs;
  attrs.set("compiled_by", "kiln example");
  return ir::with_module_attrs(m, attrs);
});
using stamp_module_pass = std::remove_const_t<decltype(stamp_module)>;

/// A two-layer MLP: y = relu(x @ w1) @ w2.
ir::ir_module make_mlp() {
  ir::block_builder bb;
  auto x = ir::make_var("x", ir::tensor_type({4, 8}, dtype::float32));
  auto w1 = ir::make_var("w1", ir::tensor_type({8, 16}, dtype::float32));
  auto w2 = ir::make_var("w2", ir::tensor_type({16, 2}, dtype::float32));
  bb.function("main", {x, w1, w2}, [&] {
    return bb.dataflow([&] {
      auto h = bb.emit(ir::call_op("matmul", {x, w1}), "h");
      auto r = bb.emit(ir::call_op("nn.relu", {h}), "r");
      return bb.emit_output(ir::call_op("matmul", {r, w2}), "y");
    });
  });
  return bb.module();
}

}  // namespace

int main() {
  ir::ir_module mlp = make_mlp();

  // 2. Only stamp_module is listed; its requirement count_bindings is placed before it.
  using pipeline = sequential<stamp_module_pass>;
  std::cout << "pipeline '" << pipeline::text() << "' runs:";
  for (const auto& step : pipeline::steps()) std::cout << " " << step.name << (step.pulled_in ? " (required)" : "");
  std::cout << "\n\n";

  // 3. Under a context, with the timing and print-after-change instruments.
  auto timer = std::make_shared<pass_timing>();
  pass_context ctx;  // opt level 2
  ctx.set_instruments({timer, print_ir(std::cout, print_ir::after_change)});
  ir::ir_module out;
  {
    pass_context_scope scope(ctx);
    pipeline p;
    out = p(mlp);
  }
  std::cout << "\npass timing:\n" << timer->table();

  // 4. The same pipeline from its text, through the registry (quietly this time).
  ctx.set_instruments({});
  pass_registry<ir::ir_module>::global().add<stamp_module_pass>();  // also registers count_bindings
  kiln::pass<ir::ir_module> dynamic = parse_pipeline<ir::ir_module>(pipeline::text());
  ir::ir_module again = dynamic(mlp, ctx);
  std::cout << "\nparsed '" << pipeline::text() << "' into " << dynamic.text() << "; same result: "
            << (ir::structural_equal(out, again) ? "yes" : "no") << "\n";

  // A typo in a textual pipeline is pointed at.
  try {
    (void)parse_pipeline<ir::ir_module>("count_binding,stamp_module");
  } catch (const pipeline_parse_error& e) {
    std::cout << "\n" << e.what() << "\n";
  }
  return ir::structural_equal(out, again) ? 0 : 1;
}
