// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

using namespace kiln_test;

namespace {
/// fn(x: (n, 4)) { y = x + x; exp(y) } with fresh variables and the given names.
ir::function add_exp(const char* xn, const char* yn, const char* nn, const char* op = "exp") {
  auto n = ir::make_size_var(nn);
  auto x = ir::make_var(xn, f32({n, dim(4)}));
  auto add = ir::call_op("add", {x, x});
  auto y = ir::make_var(yn, add->checked_type);
  return ir::make_function({x}, ir::make_seq({{false, {{y, add, {}}}}}, ir::call_op(op, {y})));
}
}  // namespace

TEST_CASE("functions that differ only in variable names are equal and hash equally") {
  auto a = add_exp("x", "y", "n"), b = add_exp("p", "q", "m");
  CHECK(ir::structural_equal(a, b));
  CHECK(ir::structural_hash(a) == ir::structural_hash(b));
  CHECK_FALSE(a == b);
}

TEST_CASE("a different operator, shape, attribute or constant makes IR unequal") {
  auto a = add_exp("x", "y", "n");
  CHECK_FALSE(ir::structural_equal(a, add_exp("x", "y", "n", "tanh")));
  auto x = ir::make_var("x", f32({3}));
  CHECK_FALSE(ir::structural_equal(ir::call_op("sum", {x}, {{"keepdims", true}}), ir::call_op("sum", {x})));
  CHECK_FALSE(ir::structural_equal(ir::make_constant(1.0, dtype::float32), ir::make_constant(2.0, dtype::float32)));
  CHECK_FALSE(ir::structural_equal(ir::make_constant(1.0, dtype::float32), ir::make_constant(1.0, dtype::float64)));
  CHECK(ir::structural_equal(ir::make_constant(1.0, dtype::float32), ir::make_constant(1.0, dtype::float32)));
  CHECK(ir::structural_hash(ir::make_constant(1.0, dtype::float32)) == ir::structural_hash(ir::make_constant(1.0, dtype::float32)));
  CHECK_FALSE(ir::structural_equal(ir::make_var("v", f32({3})), ir::make_dataflow_var("v", f32({3}))));
}

TEST_CASE("free variables are equal only to themselves") {
  auto x = ir::make_var("x", f32({2}));
  auto x2 = ir::make_var("x", f32({2}));
  CHECK(ir::structural_equal(ir::call_op("exp", {x}), ir::call_op("exp", {x})));
  CHECK_FALSE(ir::structural_equal(ir::call_op("exp", {x}), ir::call_op("exp", {x2})));
}

TEST_CASE("size variables are matched one-to-one") {
  auto n = ir::make_size_var("n"), m = ir::make_size_var("m"), k = ir::make_size_var("k");
  auto f = [](ir::prim_expr a, ir::prim_expr b) {
    auto x = ir::make_var("x", f32({a, b}));
    return ir::make_function({x}, x);
  };
  CHECK(ir::structural_equal(f(n, m), f(k, n)));
  CHECK_FALSE(ir::structural_equal(f(n, n), f(n, m)));  // (n, n) is not (n, m)
  CHECK_FALSE(ir::structural_equal(f(n, m), f(k, k)));
  CHECK(ir::structural_hash(f(n, n)) == ir::structural_hash(f(m, m)));
  CHECK(ir::structural_hash(f(n, n)) != ir::structural_hash(f(n, m)));
}

TEST_CASE("size variables outside a function are free: equal only to themselves") {
  // In one function's body, values over n and over m differ (common-subexpression elimination
  // compares them so); only a function's parameters define size variables to match.
  auto n = ir::make_size_var("n"), m = ir::make_size_var("m");
  auto ones = [](ir::prim_expr d) { return ir::call_op("broadcast_to", {ir::make_constant(1.0, dtype::int64), ir::make_shape_expr({d})}); };
  CHECK(ir::structural_equal(ones(n), ones(n)));
  CHECK_FALSE(ir::structural_equal(ones(n), ones(m)));
  CHECK(ir::structural_hash(ones(n)) == ir::structural_hash(ones(n)));
  CHECK_FALSE(ir::structural_equal(ir::make_shape_expr({n}), ir::make_shape_expr({m})));
  CHECK_FALSE(ir::structural_equal(f32({n}), f32({m})));
  CHECK(ir::structural_equal(f32({n}), f32({n})));
}

TEST_CASE("modules compare function by function, in order, with attributes") {
  for (auto& entry : corpus()) {
    const auto& [name_, m] = entry;
    const std::string& name = name_;
    CAPTURE(name);
    CHECK(ir::structural_equal(m, m));
  }
  CHECK(ir::structural_equal(make_mlp(), make_mlp()));  // fresh variables each time
  CHECK(ir::structural_hash(make_transformer_layer()) == ir::structural_hash(make_transformer_layer()));
  CHECK_FALSE(ir::structural_equal(make_mlp(), make_cnn()));
  auto m = make_mlp();
  CHECK_FALSE(ir::structural_equal(m, ir::with_module_attrs(m, {{"k", 1}})));
  auto f = m->lookup("main");
  CHECK_FALSE(ir::structural_equal(m, ir::with_function(m, "main", ir::with_attr(f, "k", 1))));
  auto two = ir::with_function(m, "other", f);
  auto swapped = ir::make_module({two->functions()[1], two->functions()[0]});
  CHECK_FALSE(ir::structural_equal(two, swapped));
}

TEST_CASE("structural hashing works as a container key") {
  std::unordered_map<ir::expr, int, ir::structural_hash_fn, ir::structural_equal_fn> table;
  auto x = ir::make_var("x", f32({2}));
  table[ir::call_op("exp", {x})] = 1;
  CHECK(table.count(ir::call_op("exp", {x})) == 1);
  CHECK(table.count(ir::call_op("log", {x})) == 0);
}
