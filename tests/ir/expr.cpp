// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include <limits>

using namespace kiln_test;

TEST_CASE("constants carry their tensor type and bytes") {
  auto c = ir::make_constant(ir::ndarray::from<int>(dtype::int32, {2, 2}, {1, 2, 3, 4}));
  CHECK(ir::to_string(c->checked_type) == "R.Tensor((2, 2), \"int32\")");
  auto& data = static_cast<const ir::constant_node&>(*c).data;
  CHECK(data.numel() == 4);
  CHECK(data.element_int(3) == 4);
  CHECK(ir::to_string(ir::make_constant(1.5, dtype::float16)->checked_type) == "R.Tensor((), \"float16\")");
}

TEST_CASE("ndarray rejects inconsistent data and converts out-of-range values safely") {
  CHECK(message_of([] { ir::ndarray::from<float>(dtype::float32, {3}, {1.0f, 2.0f}); }).find("2 values given for a shape of 3") != std::string::npos);
  CHECK(message_of([] { ir::ndarray(dtype::float32, {2}, std::vector<std::byte>(7)); }).find("7 bytes given") != std::string::npos);
  CHECK(message_of([] { ir::ndarray(dtype::void_, {}, {}); }).find("known dtype") != std::string::npos);
  CHECK(message_of([] { ir::ndarray(dtype::int8, {-1}, {}); }).find("negative dimension") != std::string::npos);
  auto a = ir::ndarray::from<double>(dtype::int8, {3}, {1e10, -1e10, std::numeric_limits<double>::quiet_NaN()});
  CHECK(a.element_int(0) == 127);
  CHECK(a.element_int(1) == -128);
  CHECK(a.element_int(2) == 0);
}

TEST_CASE("tuples and element access type-check the index") {
  auto a = ir::make_var("a", f32({2}));
  auto b = ir::make_var("b", ir::shape_type_of_rank(1));
  auto t = ir::make_tuple({a, b});
  CHECK(ir::to_string(t->checked_type) == "R.Tuple(R.Tensor((2,), \"float32\"), R.Shape(ndim=1))");
  CHECK(ir::make_tuple_get_item(t, 1)->checked_type == b->checked_type);
  CHECK(message_of([&] { ir::make_tuple_get_item(t, 2); }) ==
        "kiln::ir: tuple element access: index 2 is out of range for a tuple of 2 fields");
  CHECK(message_of([&] { ir::make_tuple_get_item(a, 0); }).find("which is not a tuple") != std::string::npos);
}

TEST_CASE("if needs a bool condition and joins its branch types") {
  auto c = ir::make_var("c", ir::prim_type(dtype::bool_));
  auto x = ir::make_var("x", f32({2, 3}));
  auto y = ir::make_var("y", f32({2, 4}));
  auto i = ir::make_if(c, x, y);
  CHECK(ir::to_string(i->checked_type) == "R.Tensor(\"float32\", ndim=2)");
  CHECK(ir::isa<ir::seq_expr_node>(static_cast<const ir::if_node&>(*i).then_branch));
  auto scalar_tensor = ir::make_var("s", ir::tensor_type({}, dtype::bool_));
  CHECK_NOTHROW(ir::make_if(scalar_tensor, x, x));
  CHECK(message_of<ir::type_error>([&] { ir::make_if(x, x, x); }).find("must be a bool scalar") != std::string::npos);
}

TEST_CASE("sequence expressions are canonical: no empty blocks, adjacent plain blocks merged") {
  auto x = ir::make_var("x", f32({2}));
  auto v1 = ir::make_var("v1", f32({2}));
  auto v2 = ir::make_var("v2", f32({2}));
  auto d1 = ir::make_dataflow_var("d1", f32({2}));
  auto s = ir::make_seq({{false, {{v1, x, {}}}}, {false, {}}, {false, {{v2, v1, {}}}}, {true, {{d1, v2, {}}}}, {false, {}}}, v2);
  auto& seq = static_cast<const ir::seq_expr_node&>(*s);
  REQUIRE(seq.blocks.size() == 2);
  CHECK(seq.blocks[0].bindings.size() == 2);
  CHECK(seq.blocks[1].dataflow);
  CHECK(s->checked_type == v2->checked_type);
}

TEST_CASE("primitive values hold integer expressions or floats") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(ir::to_string(ir::make_prim_value(n * 2)->checked_type) == "R.Prim(\"int64\")");
  CHECK(ir::to_string(ir::make_float_prim_value(0.5, dtype::float16)->checked_type) == "R.Prim(\"float16\")");
  CHECK(message_of([] { ir::make_prim_value(1, dtype::float32); }).find("integer primitive value cannot have dtype float32") != std::string::npos);
  CHECK(message_of([] { ir::make_float_prim_value(1.0, dtype::int32); }).find("float primitive value cannot have dtype int32") != std::string::npos);
}

TEST_CASE("functions check the declared return type against the body") {
  auto x = ir::make_var("x", f32({2}));
  auto f = ir::make_function({x}, x);
  CHECK(ir::isa<ir::seq_expr_node>(f->body));
  CHECK(ir::to_string(f->signature()) == "R.Callable((R.Tensor((2,), \"float32\"),), R.Tensor((2,), \"float32\"))");
  CHECK_NOTHROW(ir::make_function({x}, x, ir::object_type()));
  CHECK(message_of<ir::type_error>([&] { ir::make_function({x}, x, f32({3})); }) ==
        "kiln::ir: function body has type R.Tensor((2,), \"float32\"), which does not match the declared return type R.Tensor((3,), \"float32\")");
}

TEST_CASE("kernel functions validate parameters, outputs and body") {
  auto a = ir::make_var("a", f32({4}));
  auto out = ir::make_var("out", f32({4}));
  auto s = ir::make_var("s", ir::shape_type_of_rank(1));
  auto k = ir::make_prim_func({a, out}, 1, ir::call_op("exp", {a}));
  CHECK(k->num_inputs() == 1);
  CHECK(ir::to_string(k->signature()) == "R.Callable((R.Tensor((4,), \"float32\"),), R.Tensor((4,), \"float32\"))");
  CHECK(message_of([&] { ir::make_prim_func({a, s}, 1); }).find("kernel parameters must be tensors or primitive values") != std::string::npos);
  CHECK(message_of([&] { ir::make_prim_func({a, out}, 3); }).find("cannot have 3 outputs") != std::string::npos);
  auto p = ir::make_var("p", ir::prim_type(dtype::int64));
  CHECK(message_of([&] { ir::make_prim_func({a, p}, 1); }).find("output parameter 'p' must be a tensor") != std::string::npos);
  CHECK(message_of([&] { ir::make_prim_func({a, out}, 1, ir::call_op("sum", {a})); }).find("does not match its output buffers") != std::string::npos);
}

TEST_CASE("with_attr copies a function with one attribute changed") {
  auto x = ir::make_var("x", f32({2}));
  ir::base_func f = ir::make_function({x}, x);
  ir::base_func g = ir::with_attr(f, ir::attr::skip_optimization, true);
  CHECK(g != f);
  CHECK(g->attrs.get_or(ir::attr::skip_optimization, false));
  CHECK_FALSE(f->attrs.contains(ir::attr::skip_optimization));
  CHECK(static_cast<const ir::function_node&>(*g).body == static_cast<const ir::function_node&>(*f).body);
}

TEST_CASE("attribute maps are typed") {
  ir::attr_map a{{"n", 3}, {"name", "x"}, {"flags", ir::int_array{1, 2}}};
  CHECK(a.get_or<std::int64_t>("n", 0) == 3);
  CHECK(a.get_or<std::int64_t>("missing", 7) == 7);
  CHECK(a.find("flags")->as<ir::int_array>() == ir::int_array{1, 2});
  CHECK(message_of([&] { a.find("name")->as<std::int64_t>(); }) == "kiln::ir::attr_value: expected int, but the value is string");
}
