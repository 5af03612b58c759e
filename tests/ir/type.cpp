// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

using namespace kiln_test;

TEST_CASE("types print in the text format") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(ir::to_string(f32({n, dim(4)})) == "R.Tensor((n, 4), \"float32\")");
  CHECK(ir::to_string(f32({7})) == "R.Tensor((7,), \"float32\")");
  CHECK(ir::to_string(ir::tensor_type_of_rank(dtype::int64, 2)) == "R.Tensor(\"int64\", ndim=2)");
  CHECK(ir::to_string(ir::tensor_type_of_rank(dtype::void_, 3)) == "R.Tensor(ndim=3)");
  CHECK(ir::to_string(ir::tensor_type_of_rank(dtype::void_, -1)) == "R.Tensor");
  CHECK(ir::to_string(ir::tensor_type({}, dtype::bool_)) == "R.Tensor((), \"bool\")");
  CHECK(ir::to_string(ir::shape_type({n, dim(2)})) == "R.Shape([n, 2])");
  CHECK(ir::to_string(ir::shape_type_of_rank(2)) == "R.Shape(ndim=2)");
  CHECK(ir::to_string(ir::tuple_type({ir::object_type(), ir::prim_type(dtype::int64)})) == "R.Tuple(R.Object, R.Prim(\"int64\"))");
  CHECK(ir::to_string(ir::func_type({f32({2})}, ir::object_type())) == "R.Callable((R.Tensor((2,), \"float32\"),), R.Object)");
}

TEST_CASE("is_base_of orders types from general to specific") {
  ir::prim_expr n = ir::make_size_var("n");
  ir::type exact = f32({n, dim(4)});
  CHECK(ir::is_base_of(ir::object_type(), exact));
  CHECK(ir::is_base_of(ir::tensor_type_of_rank(dtype::void_, -1), exact));
  CHECK(ir::is_base_of(ir::tensor_type_of_rank(dtype::float32, 2), exact));
  CHECK(ir::is_base_of(f32({n, dim(2) * 2}), exact));  // provably equal dimensions
  CHECK_FALSE(ir::is_base_of(exact, ir::tensor_type_of_rank(dtype::float32, 2)));
  CHECK_FALSE(ir::is_base_of(ir::tensor_type_of_rank(dtype::float32, 3), exact));
  CHECK_FALSE(ir::is_base_of(ir::tensor_type({n, dim(4)}, dtype::int32), exact));
  CHECK_FALSE(ir::is_base_of(f32({ir::make_size_var("m"), dim(4)}), exact));
  CHECK(ir::is_base_of(ir::tuple_type({ir::object_type()}), ir::tuple_type({exact})));
  CHECK_FALSE(ir::is_base_of(ir::tuple_type({exact}), ir::tuple_type({exact, exact})));
  // functions: contravariant parameters, covariant result
  ir::type general = ir::func_type({exact}, ir::object_type());
  ir::type specific = ir::func_type({ir::object_type()}, exact);
  CHECK(ir::is_base_of(general, specific));
  CHECK_FALSE(ir::is_base_of(specific, general));
}

TEST_CASE("join finds the least general common type") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(ir::to_string(ir::join(f32({n, dim(4)}), f32({n, dim(5)}))) == "R.Tensor(\"float32\", ndim=2)");
  CHECK(ir::to_string(ir::join(f32({4}), ir::tensor_type({4}, dtype::int32))) == "R.Tensor((4,))");  // shape kept, dtype unknown
  CHECK(ir::to_string(ir::join(f32({4}), f32({4, 4}))) == "R.Tensor(\"float32\")");
  CHECK(ir::to_string(ir::join(f32({4}), ir::shape_type({dim(4)}))) == "R.Object");
  CHECK(ir::types_equal(ir::join(f32({4}), f32({4})), f32({4})));
}

TEST_CASE("substitute on types rebuilds only what changes") {
  ir::size_var n = ir::make_size_var("n");
  ir::type t = ir::tuple_type({f32({n, dim(3)}), ir::object_type()});
  ir::type r = ir::substitute(t, [&](const ir::size_var_node&) { return dim(8); });
  CHECK(ir::to_string(r) == "R.Tuple(R.Tensor((8, 3), \"float32\"), R.Object)");
  ir::type same = ir::substitute(t, [](const ir::size_var_node&) { return ir::prim_expr(); });
  CHECK(same == t);
}
