// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

using namespace kiln_test;

TEST_CASE("binary operators broadcast numpy-style") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(type_of(ir::call_op("add", {v("a", f32({4, 1, 3})), v("b", f32({5, 1}))})) == "R.Tensor((4, 5, 3), \"float32\")");
  CHECK(type_of(ir::call_op("multiply", {v("a", f32({n, dim(3)})), v("b", f32({3}))})) == "R.Tensor((n, 3), \"float32\")");
  CHECK(type_of(ir::call_op("subtract", {v("a", f32({n, dim(1)})), v("b", f32({1, 7}))})) == "R.Tensor((n, 7), \"float32\")");
  CHECK(type_of(ir::call_op("divide", {v("a", f32({})), v("b", f32({2, 2}))})) == "R.Tensor((2, 2), \"float32\")");
  // symbolic dimensions that cannot be proven equal: rank known, shape not
  CHECK(type_of(ir::call_op("add", {v("a", f32({n})), v("b", f32({ir::make_size_var("m")}))})) == "R.Tensor(\"float32\", ndim=1)");
  // unknown rank propagates
  CHECK(type_of(ir::call_op("maximum", {v("a", ir::tensor_type_of_rank(dtype::float32)), v("b", f32({2}))})) == "R.Tensor(\"float32\")");
  CHECK(type_of(ir::call_op("power", {v("a", ir::tensor_type_of_rank(dtype::float32, 2)), v("b", f32({2}))})) == "R.Tensor(\"float32\", ndim=2)");
}

TEST_CASE("broadcast errors name both operands and the dimensions") {
  auto msg = message_of<ir::type_error>([] { ir::call_op("add", {v("a", f32({4, 3})), v("b", f32({4}))}); });
  CHECK(msg == "add: cannot broadcast (4, 3) (argument 'x1' (#1)) with (4,) (argument 'x2' (#2)): dimension 3 vs 4");
}

TEST_CASE("operands must agree on dtype") {
  auto msg = message_of<ir::type_error>([] { ir::call_op("add", {v("a", f32({2})), v("b", ir::tensor_type({2}, dtype::int32))}); });
  CHECK(msg == "add: dtype mismatch: argument 'x1' (#1) is float32 but argument 'x2' (#2) is int32");
}

TEST_CASE("comparisons produce bool, logical operators need bool") {
  CHECK(type_of(ir::call_op("less", {v("a", f32({2, 3})), v("b", f32({3}))})) == "R.Tensor((2, 3), \"bool\")");
  for (const char* op : {"equal", "not_equal", "less_equal", "greater", "greater_equal"})
    CHECK(ir::dyn_cast<ir::tensor_type_node>(ir::call_op(op, {v("a", f32({2})), v("b", f32({2}))})->checked_type)->dt == dtype::bool_);
  auto bools = ir::tensor_type({3}, dtype::bool_);
  CHECK(type_of(ir::call_op("logical_and", {v("a", bools), v("b", bools)})) == "R.Tensor((3,), \"bool\")");
  CHECK(type_of(ir::call_op("logical_not", {v("a", bools)})) == "R.Tensor((3,), \"bool\")");
  CHECK(message_of<ir::type_error>([] { ir::call_op("logical_or", {v("a", f32({3})), v("b", f32({3}))}); }) ==
        "logical_or: operands must be bool tensors, but they are float32");
  CHECK(message_of<ir::type_error>([] { ir::call_op("logical_not", {v("a", f32({3}))}); }) ==
        "logical_not: argument 'x' (#1) must be a bool tensor, but its dtype is float32");
}

TEST_CASE("unary math keeps the type, transcendental functions need floats") {
  ir::type t = ir::tensor_type({ir::make_size_var("n"), dim(8)}, dtype::float16);
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "negative", "abs", "nn.relu", "nn.gelu"})
    CHECK(ir::call_op(op, {v("x", t)})->checked_type == t);
  CHECK(message_of<ir::type_error>([] { ir::call_op("exp", {v("x", ir::tensor_type({2}, dtype::int32))}); }) ==
        "exp: argument 'x' (#1) must be a floating-point tensor, but its dtype is int32");
  CHECK_NOTHROW(ir::call_op("abs", {v("x", ir::tensor_type({2}, dtype::int32))}));
  CHECK(message_of<ir::type_error>([] { ir::call_op("nn.relu", {v("x", ir::shape_type_of_rank(2))}); }) ==
        "nn.relu: argument 'x' (#1) must be a tensor, but has type R.Shape(ndim=2)");
}

TEST_CASE("gelu, clip and astype check their attributes") {
  CHECK_NOTHROW(ir::call_op("nn.gelu", {v("x", f32({2}))}, {{"approximate", "tanh"}}));
  CHECK(message_of<ir::type_error>([] { ir::call_op("nn.gelu", {v("x", f32({2}))}, {{"approximate", "fast"}}); }) ==
        "nn.gelu: attribute 'approximate' must be \"none\" or \"tanh\", not \"fast\"");
  CHECK_NOTHROW(ir::call_op("clip", {v("x", f32({2}))}, {{"min", 0}, {"max", 6.0}}));
  CHECK(message_of<ir::type_error>([] { ir::call_op("clip", {v("x", f32({2}))}, {{"min", 1.0}, {"max", 0.0}}); }) ==
        "clip: attribute 'min' is greater than 'max'");
  CHECK(message_of<ir::type_error>([] { ir::call_op("clip", {v("x", f32({2}))}, {{"min", 1.0}}); }) == "clip: attribute 'max' is required");
  CHECK(type_of(ir::call_op("astype", {v("x", f32({2, 2}))}, {{"dtype", "float16"}})) == "R.Tensor((2, 2), \"float16\")");
  CHECK(type_of(ir::call_op("astype", {v("x", f32({2, 2}))}, {{"dtype", dtype::int8}})) == "R.Tensor((2, 2), \"int8\")");
  CHECK(message_of<ir::type_error>([] { ir::call_op("astype", {v("x", f32({2}))}, {{"dtype", "float33"}}); }) ==
        "astype: attribute 'dtype' must be a dtype name, not \"float33\"");
  CHECK(message_of<ir::type_error>([] { ir::call_op("astype", {v("x", f32({2}))}, {{"dtype", "void"}}); }) ==
        "astype: attribute 'dtype' must be a concrete dtype, not void");
}

TEST_CASE("where broadcasts all three operands") {
  auto c = v("c", ir::tensor_type({4, 1}, dtype::bool_));
  CHECK(type_of(ir::call_op("where", {c, v("a", f32({1, 5})), v("b", f32({}))})) == "R.Tensor((4, 5), \"float32\")");
  CHECK(message_of<ir::type_error>([] { ir::call_op("where", {v("c", f32({2})), v("a", f32({2})), v("b", f32({2}))}); }) ==
        "where: argument 'condition' (#1) must be a bool tensor, but its dtype is float32");
}

TEST_CASE("calls check arity, attribute names and attribute kinds") {
  CHECK(message_of<ir::type_error>([] { ir::call_op("add", {v("a", f32({2}))}); }) ==
        "add: expects 2 arguments (x1, x2), but 1 was given");
  CHECK(message_of<ir::type_error>([] { ir::call_op("exp", {v("a", f32({2}))}, {{"axis", 1}}); }) ==
        "exp: unknown attribute 'axis'; it takes no attributes");
  CHECK(message_of<ir::type_error>([] { ir::call_op("sum", {v("a", f32({2}))}, {{"keepdim", true}}); }) ==
        "sum: unknown attribute 'keepdim'; its attributes are: axis, keepdims");
  CHECK(message_of<ir::type_error>([] { ir::call_op("sum", {v("a", f32({2}))}, {{"keepdims", "yes"}}); }) ==
        "sum: attribute 'keepdims' must be bool, but a string was given");
  CHECK(message_of<ir::type_error>([] { ir::call_op("sum", {v("a", f32({2}))}, {{"axis", "0"}}); }) ==
        "sum: attribute 'axis' must be list of int or None, but a string was given");
  CHECK(message_of([] { ir::call_op("softmaxx", {v("a", f32({2}))}); }) == "kiln::ir: unknown operator 'softmaxx' (did you mean 'nn.softmax'?)");
  CHECK(message_of<ir::type_error>([] { ir::call_op("call_tir", {v("a", f32({2})), v("b", f32({2}))}); }) ==
        "call_tir: expects 1 explicit result type(s), but 0 were given");
}

TEST_CASE("attributes are completed with their defaults") {
  auto c = ir::call_op("nn.softmax", {v("a", f32({2, 2}))});
  auto& call = static_cast<const ir::call_node&>(*c);
  CHECK(call.attrs.get_or<std::int64_t>("axis", 0) == -1);
  auto s = ir::call_op("sum", {v("a", f32({2, 2}))}, {{"axis", 1}});  // an int widens to a list
  CHECK(static_cast<const ir::call_node&>(*s).attrs.find("axis")->as<ir::int_array>() == ir::int_array{1});
}

TEST_CASE("user code can register operators, names are unique") {
  auto& reg = ir::op_registry::global();
  ir::op_node::info info{"test.double_rows", {"x"}, {{"factor", ir::attr_kind::integer, std::int64_t{2}}},
                         [](const ir::call_context& ctx) {
                           auto& t = ctx.ranked_tensor(0);
                           if (!t.shape) return ir::tensor_type_of_rank(t.dt, t.ndim);
                           auto dims = *t.shape;
                           dims[0] = dims[0] * ctx.attr<std::int64_t>("factor");
                           return ir::tensor_type(dims, t.dt);
                         },
                         ir::op_pattern::injective, "repeats rows"};
  if (!reg.find("test.double_rows")) reg.add(info);
  CHECK(type_of(ir::call_op("test.double_rows", {v("x", f32({3, 2}))}, {{"factor", 3}})) == "R.Tensor((9, 2), \"float32\")");
  CHECK(message_of([&] { reg.add(info); }) == "kiln::ir::op_registry: operator 'test.double_rows' is already registered");
  ir::op_node::info bad{"test.no_rule", {"x"}, {}, {}, ir::op_pattern::opaque, ""};
  CHECK(message_of([&] { reg.add(bad); }) == "kiln::ir::op_registry: operator 'test.no_rule' needs a type inference rule");
  auto names = reg.names();
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(reg.get("matmul")->pattern() == ir::op_pattern::out_elemwise_fusable);
}
