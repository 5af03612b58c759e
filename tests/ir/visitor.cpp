// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include <map>

using namespace kiln_test;

namespace {
struct op_counter final : ir::expr_visitor {
  std::map<std::string, int> calls;
  int defs = 0;
  void visit_call(const ir::call_node& c) override {
    if (auto* o = ir::dyn_cast<ir::op_node>(c.callee)) ++calls[o->name()];
    expr_visitor::visit_call(c);
  }
  void visit_var_def(const ir::var&) override { ++defs; }
};

/// `e` as a call to operator `name`, or nullptr.
const ir::call_node* op_call(const ir::expr& e, const char* name) {
  auto* call = ir::dyn_cast<ir::call_node>(e);
  auto* o = call ? ir::dyn_cast<ir::op_node>(call->callee) : nullptr;
  return o && o->name() == name ? call : nullptr;
}

/// Replaces nn.relu(x) by maximum(x, 0).
struct relu_to_maximum final : ir::expr_mutator {
  ir::expr mutate_call(const ir::call_node& c, const ir::expr& self) override {
    ir::expr e = expr_mutator::mutate_call(c, self);
    auto* relu = op_call(e, "nn.relu");
    return relu ? ir::call_op("maximum", {relu->args[0], ir::make_constant(0.0, dtype::float32)}) : e;
  }
};

/// Replaces matmul(a, b) by sum(a) (changing the binding's type).
struct matmul_to_sum final : ir::expr_mutator {
  ir::expr mutate_call(const ir::call_node& c, const ir::expr& self) override {
    ir::expr e = expr_mutator::mutate_call(c, self);
    auto* mm = op_call(e, "matmul");
    return mm ? ir::call_op("sum", {mm->args[0]}, {{"axis", ir::int_array{1}}, {"keepdims", true}}) : e;
  }
};
}  // namespace

TEST_CASE("the visitor reaches every call and every definition") {
  op_counter c;
  c.visit_module(make_transformer_layer());
  CHECK(c.calls["matmul"] == 6);
  CHECK(c.calls["reshape"] == 4);
  CHECK(c.calls["nn.layer_norm"] == 1);
  CHECK(c.defs == 8 + 25);  // parameters + bindings
  op_counter k;
  k.visit_module(make_misc());  // visits kernel bodies and if branches too
  CHECK(k.calls["maximum"] == 1);
  CHECK(k.calls["negative"] == 1);
  CHECK(k.calls["call_tir"] == 2);
}

TEST_CASE("post_order_visit sees children before parents") {
  auto x = ir::make_var("x", f32({2}));
  std::vector<ir::node_kind> order;
  ir::post_order_visit(ir::call_op("exp", {ir::call_op("log", {x})}), [&](const ir::expr& e) { order.push_back(e->kind); });
  // exp's callee, log's callee, x, the log call, the exp call
  CHECK(order == std::vector<ir::node_kind>{ir::node_kind::op, ir::node_kind::op, ir::node_kind::var, ir::node_kind::call, ir::node_kind::call});
}

TEST_CASE("a mutator that changes nothing returns the very same module") {
  ir::expr_mutator identity;
  for (auto& entry : corpus()) {
    const auto& [name_, m] = entry;
    const std::string& name = name_;
    CAPTURE(name);
    CHECK(identity.mutate_module(m) == m);
  }
}

TEST_CASE("a mutator rebuilds only the changed path and keeps the rest shared") {
  ir::ir_module m = make_mlp();
  ir::ir_module both = ir::with_function(m, "other", make_misc()->lookup("helper"));
  relu_to_maximum pass;
  ir::ir_module out = pass.mutate_module(both);
  REQUIRE(out != both);
  CHECK(out->lookup("other") == both->lookup("other"));  // untouched function: same object
  op_counter c;
  c.visit_module(out);
  CHECK(c.calls["nn.relu"] == 0);
  CHECK(c.calls["maximum"] == 1);
  auto& before = static_cast<const ir::seq_expr_node&>(*static_cast<const ir::function_node&>(*both->lookup("main")).body);
  auto& after = static_cast<const ir::seq_expr_node&>(*static_cast<const ir::function_node&>(*out->lookup("main")).body);
  CHECK(after.blocks[0].bindings[0].value == before.blocks[0].bindings[0].value);  // matmul before relu is shared
  CHECK(after.blocks[0].bindings[2].value != before.blocks[0].bindings[2].value);
  CHECK(ir::verify(out).empty());
}

TEST_CASE("a binding whose type changes gets a new variable, and later uses follow it") {
  matmul_to_sum pass;
  ir::ir_module out = pass.mutate_module(make_mlp());
  CHECK(ir::verify(out).empty());
  auto& seq = static_cast<const ir::seq_expr_node&>(*static_cast<const ir::function_node&>(*out->lookup("main")).body);
  const auto& b = seq.blocks[0].bindings;
  CHECK(ir::to_string(b[0].variable->checked_type) == "R.Tensor((n, 1), \"float32\")");
  auto& next_use = static_cast<const ir::call_node&>(*b[1].value);
  CHECK(next_use.args[0] == ir::expr(b[0].variable));  // the add now reads the renewed variable
}
