// SPDX-License-Identifier: Apache-2.0
// Data movement operators and call_tir.
#include "helpers.hpp"

using namespace kiln_test;

TEST_CASE("reshape checks the element count and infers one -1") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(type_of(ir::call_op("reshape", {v("x", f32({2, 3, 4})), ir::make_shape_expr({dim(6), dim(-1)})})) == "R.Tensor((6, 4), \"float32\")");
  CHECK(type_of(ir::call_op("reshape", {v("x", f32({n, dim(12)})), ir::make_shape_expr({n, dim(3), dim(4)})})) == "R.Tensor((n, 3, 4), \"float32\")");
  // -1 cancels the factors the other dimensions share with the input's
  ir::prim_expr m = ir::make_size_var("m");
  CHECK(type_of(ir::call_op("reshape", {v("x", f32({n, dim(12)})), ir::make_shape_expr({dim(-1), dim(4)})})) == "R.Tensor((n * 3, 4), \"float32\")");
  CHECK(type_of(ir::call_op("reshape", {v("x", f32({dim(7), n, dim(2), dim(24)})), ir::make_shape_expr({dim(7), n, dim(-1)})})) ==
        "R.Tensor((7, n, 48), \"float32\")");
  CHECK(type_of(ir::call_op("reshape", {v("x", f32({n, m})), ir::make_shape_expr({m, dim(-1)})})) == "R.Tensor((m, n), \"float32\")");
  CHECK(type_of(ir::call_op("reshape", {v("x", f32({n * m, dim(8)})), ir::make_shape_expr({n * m, dim(2), dim(-1)})})) ==
        "R.Tensor((n * m, 2, 4), \"float32\")");
  CHECK(type_of(ir::call_op("reshape", {v("x", f32({n, dim(12)})), ir::make_shape_expr({m, dim(-1)})})) == "R.Tensor((m, n * 12 // m), \"float32\")");
  CHECK(type_of(ir::call_op("reshape", {v("x", f32({2, 2})), v("s", ir::shape_type_of_rank(3))})) == "R.Tensor(\"float32\", ndim=3)");
  CHECK(message_of<ir::type_error>([] { ir::call_op("reshape", {v("x", f32({2, 3})), ir::make_shape_expr({dim(4), dim(2)})}); }) ==
        "reshape: cannot reshape (2, 3) (6 elements) to (4, 2) (8 elements)");
  CHECK(message_of<ir::type_error>([] { ir::call_op("reshape", {v("x", f32({2, 3})), ir::make_shape_expr({dim(4), dim(-1)})}); }) ==
        "reshape: cannot reshape (2, 3) to (4, -1): 6 elements do not divide into rows of 4");
  CHECK(message_of<ir::type_error>([] { ir::call_op("reshape", {v("x", f32({6})), ir::make_shape_expr({dim(-1), dim(-1)})}); }) ==
        "reshape: argument 'shape' (#2) may contain -1 only once, but has (-1, -1)");
  CHECK(message_of<ir::type_error>([] { ir::call_op("reshape", {v("x", f32({6})), v("s", f32({2}))}); }) ==
        "reshape: argument 'shape' (#2) must be a shape (e.g. R.shape([n, 4])), but has type R.Tensor((2,), \"float32\")");
}

TEST_CASE("permute_dims and broadcast_to") {
  ir::prim_expr n = ir::make_size_var("n");
  auto x = v("x", f32({n, dim(3), dim(5)}));
  CHECK(type_of(ir::call_op("permute_dims", {x})) == "R.Tensor((5, 3, n), \"float32\")");
  CHECK(type_of(ir::call_op("permute_dims", {x}, {{"axes", ir::int_array{0, 2, 1}}})) == "R.Tensor((n, 5, 3), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("permute_dims", {x}, {{"axes", ir::int_array{0, 1}}}); }) ==
        "permute_dims: attribute 'axes' has 2 entries, but the tensor has rank 3");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("permute_dims", {x}, {{"axes", ir::int_array{0, 1, 1}}}); }) ==
        "permute_dims: attribute 'axes' names axis 1 twice");
  CHECK(type_of(ir::call_op("broadcast_to", {v("b", f32({3, 1})), ir::make_shape_expr({n, dim(3), dim(4)})})) == "R.Tensor((n, 3, 4), \"float32\")");
  CHECK(message_of<ir::type_error>([] { ir::call_op("broadcast_to", {v("b", f32({3, 2})), ir::make_shape_expr({dim(3), dim(4)})}); }) ==
        "broadcast_to: cannot broadcast (3, 2) to (3, 4): dimension 2 vs 4");
  CHECK(message_of<ir::type_error>([] { ir::call_op("broadcast_to", {v("b", f32({1, 1, 1})), ir::make_shape_expr({dim(3), dim(4)})}); }) ==
        "broadcast_to: cannot broadcast a tensor of rank 3 to the lower rank 2");
}

TEST_CASE("concat adds up the axis and checks the rest") {
  ir::prim_expr n = ir::make_size_var("n");
  auto t = ir::make_tuple({v("a", f32({n, dim(3)})), v("b", f32({n, dim(5)}))});
  CHECK(type_of(ir::call_op("concat", {t}, {{"axis", 1}})) == "R.Tensor((n, 8), \"float32\")");
  auto u = ir::make_tuple({v("a", f32({n, dim(3)})), v("b", f32({dim(2), dim(3)}))});
  CHECK(type_of(ir::call_op("concat", {u})) == "R.Tensor((n + 2, 3), \"float32\")");
  CHECK(message_of<ir::type_error>([] { ir::call_op("concat", {ir::make_tuple({v("a", f32({2, 3})), v("b", f32({2, 4}))})}); }) ==
        "concat: tuple field 1 has shape (2, 4), which differs from field 0 in dimension 1 (only the concatenation axis 0 may differ)");
  CHECK(message_of<ir::type_error>([] { ir::call_op("concat", {ir::make_tuple({v("a", f32({2})), v("b", f32({2, 4}))})}); }) ==
        "concat: tuple field 1 has rank 2 but earlier fields have rank 1");
  CHECK(message_of<ir::type_error>([] { ir::call_op("concat", {v("a", f32({2}))}); }) ==
        "concat: argument 'tensors' (#1) must be a tuple of tensors, but has type R.Tensor((2,), \"float32\")");
  CHECK(message_of<ir::type_error>([] { ir::call_op("concat", {ir::make_tuple({})}); }) == "concat: argument 'tensors' (#1) must hold at least one tensor");
}

TEST_CASE("split by sections or indices gives a tuple") {
  CHECK(type_of(ir::call_op("split", {v("x", f32({4, 9}))}, {{"sections", 3}, {"axis", 1}})) ==
        "R.Tuple(R.Tensor((4, 3), \"float32\"), R.Tensor((4, 3), \"float32\"), R.Tensor((4, 3), \"float32\"))");
  CHECK(type_of(ir::call_op("split", {v("x", f32({10}))}, {{"indices", ir::int_array{2, 5}}})) ==
        "R.Tuple(R.Tensor((2,), \"float32\"), R.Tensor((3,), \"float32\"), R.Tensor((5,), \"float32\"))");
  CHECK(message_of<ir::type_error>([] { ir::call_op("split", {v("x", f32({10}))}, {{"sections", 3}}); }) ==
        "split: cannot split dimension 10 (axis 0) into 3 equal sections");
  CHECK(message_of<ir::type_error>([] { ir::call_op("split", {v("x", f32({10}))}); }) ==
        "split: exactly one of the attributes 'sections' and 'indices' must be given");
  CHECK(message_of<ir::type_error>([] { ir::call_op("split", {v("x", f32({10}))}, {{"indices", ir::int_array{5, 2}}}); }) ==
        "split: attribute 'indices' must be non-decreasing, but has 2 after 5");
  CHECK(message_of<ir::type_error>([] { ir::call_op("split", {v("x", f32({10}))}, {{"indices", ir::int_array{11}}}); }) ==
        "split: split index 11 is beyond dimension 10 of axis 0");
}

TEST_CASE("strided_slice follows numpy clamping, negative indices and strides") {
  auto x = v("x", f32({10, 8}));
  auto slice = [&](ir::int_array axes, ir::int_array b, ir::int_array e, ir::attr_value s = {}) {
    return type_of(ir::call_op("strided_slice", {x}, {{"axes", axes}, {"begin", b}, {"end", e}, {"strides", s}}));
  };
  CHECK(slice({0}, {2}, {7}) == "R.Tensor((5, 8), \"float32\")");
  CHECK(slice({1}, {-3}, {100}) == "R.Tensor((10, 3), \"float32\")");
  CHECK(slice({0, 1}, {1, 0}, {10, 8}, ir::int_array{3, 2}) == "R.Tensor((3, 4), \"float32\")");
  CHECK(slice({0}, {9}, {-11}, ir::int_array{-1}) == "R.Tensor((10, 8), \"float32\")");
  CHECK(slice({0}, {5}, {2}) == "R.Tensor((0, 8), \"float32\")");
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(type_of(ir::call_op("strided_slice", {v("y", f32({n}))}, {{"axes", ir::int_array{0}}, {"begin", ir::int_array{1}}, {"end", ir::int_array{std::int64_t{1} << 62}}})) ==
        "R.Tensor((n - 1,), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { slice({0}, {0}, {1}, ir::int_array{0}); }) == "strided_slice: attribute 'strides' has a zero stride for axis 0");
  CHECK(message_of<ir::type_error>([&] { slice({0, 1}, {0}, {1}); }).find("must have the same length") != std::string::npos);
}

TEST_CASE("take gathers along an axis") {
  auto x = v("x", f32({5, 7, 3}));
  auto idx = v("i", ir::tensor_type({2, 4}, dtype::int64));
  CHECK(type_of(ir::call_op("take", {x, idx}, {{"axis", 1}})) == "R.Tensor((5, 2, 4, 3), \"float32\")");
  CHECK(type_of(ir::call_op("take", {x, idx})) == "R.Tensor((2, 4), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("take", {x, v("f", f32({2}))}); }) ==
        "take: argument 'indices' (#2) must be an integer tensor, but its dtype is float32");
}

TEST_CASE("gather_elements has the indices' shape, cumsum keeps the shape or flattens") {
  auto x = v("x", f32({5, 7, 3}));
  auto idx = v("i", ir::tensor_type({5, 2, 3}, dtype::int32));
  CHECK(type_of(ir::call_op("gather_elements", {x, idx}, {{"axis", 1}})) == "R.Tensor((5, 2, 3), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("gather_elements", {x, v("j", ir::tensor_type({5, 2}, dtype::int64))}); }) ==
        "gather_elements: argument 'indices' (#2) must have the rank of x (3), but has rank 2");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("gather_elements", {x, v("f", f32({5, 2, 3}))}); }) ==
        "gather_elements: argument 'indices' (#2) must be an integer tensor, but its dtype is float32");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("gather_elements", {x, idx}, {{"axis", 3}}); }).find("axis") != std::string::npos);
  auto upd = v("u", f32({5, 2, 3}));
  CHECK(type_of(ir::call_op("scatter_elements", {x, idx, upd}, {{"axis", 1}, {"reduction", std::string("add")}})) == "R.Tensor((5, 7, 3), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("scatter_elements", {x, idx, upd}, {{"reduction", std::string("sum")}}); }) ==
        "scatter_elements: attribute 'reduction' must be 'update', 'add', 'mul', 'max' or 'min', not 'sum'");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("scatter_elements", {x, idx, v("d", ir::tensor_type({5, 2, 3}, dtype::float64))}); }) ==
        "scatter_elements: argument 'updates' (#3) must have the dtype of x (float32), but has float64");
  CHECK(type_of(ir::call_op("cumsum", {x}, {{"axis", -1}, {"reverse", true}})) == "R.Tensor((5, 7, 3), \"float32\")");
  CHECK(type_of(ir::call_op("cumsum", {x})) == "R.Tensor((105,), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("cumsum", {v("b", ir::tensor_type({2}, dtype::bool_))}, {{"axis", 0}}); }) ==
        "cumsum: argument 'x' (#1) must be a numeric tensor, but its dtype is bool");
}

TEST_CASE("call_tir checks the kernel and its output type") {
  auto m = ir::make_size_var("m");
  auto a = ir::make_var("a", f32({m, dim(4)}));
  auto o = ir::make_var("o", f32({m, dim(4)}));
  auto kernel = ir::make_global_var("k", ir::make_prim_func({a, o}, 1)->signature());
  auto x = v("x", f32({6, 4}));
  CHECK(type_of(ir::call_tir(kernel, {x}, f32({6, 4}))) == "R.Tensor((6, 4), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_tir(kernel, {x}, f32({5, 4})); }) ==
        "call_tir: the output type R.Tensor((5, 4), \"float32\") does not match what kernel 'k' writes, R.Tensor((6, 4), \"float32\"): dimension 0 is 5 but 6 is expected");
  CHECK(message_of<ir::type_error>([&] { ir::call_tir(kernel, {v("y", f32({6, 5}))}, f32({6, 4})); }).find(
            "call_tir to 'k': argument #1 has type R.Tensor((6, 5), \"float32\"), which does not match parameter type R.Tensor((m, 4), \"float32\"): dimension 1 is 5 but 4 is expected") !=
        std::string::npos);
  auto packed = v("args", ir::tuple_type({f32({6, 4})}));  // the inputs as one tuple-typed value
  CHECK(type_of(ir::call_op("call_tir", {kernel, packed}, {}, {f32({6, 4})})) == "R.Tensor((6, 4), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("call_tir", {kernel, packed}, {}, {f32({6, 5})}); }).find("does not match what kernel 'k' writes") !=
        std::string::npos);
  CHECK(message_of<ir::type_error>([&] { ir::call_op("call_tir", {x, ir::make_tuple({})}, {}, {f32({1})}); }) ==
        "call_tir: argument 'kernel' (#1) must name a kernel function of the module (cls.name)");
}

TEST_CASE("calls to module functions bind the callee's size variables") {
  auto n = ir::make_size_var("n");
  auto p = ir::make_var("p", f32({n, dim(2)}));
  auto f = ir::make_function({p}, ir::call_op("sum", {p}, {{"axis", ir::int_array{1}}}));
  auto gv = ir::make_global_var("f", f->signature());
  CHECK(type_of(ir::call_function(gv, {v("x", f32({7, 2}))})) == "R.Tensor((7,), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_function(gv, {v("x", f32({7, 3}))}); }) ==
        "call to 'f': argument #1 has type R.Tensor((7, 3), \"float32\"), which does not match parameter type R.Tensor((n, 2), \"float32\"): dimension 1 is 3 but 2 is expected");
  CHECK(message_of<ir::type_error>([&] { ir::call_function(gv, {}); }) == "call to 'f': expects 1 arguments, but 0 were given");
}

TEST_CASE("gather_nd and scatter_nd: result shapes from the tuples' length, mismatches are errors") {
  auto x = v("x", ir::tensor_type({dim(2), dim(4), dim(5)}, dtype::float32));
  auto i = [](std::vector<std::int64_t> d) {
    std::vector<ir::prim_expr> s;
    for (auto e : d) s.push_back(dim(e));
    return v("i", ir::tensor_type(s, dtype::int64));
  };
  CHECK(type_of(ir::call_op("gather_nd", {x, i({3, 2})})) == "R.Tensor((3, 5), \"float32\")");
  CHECK(type_of(ir::call_op("gather_nd", {x, i({2, 6, 1})}, {{"batch_dims", 1}})) == "R.Tensor((2, 6, 5), \"float32\")");
  CHECK(type_of(ir::call_op("scatter_nd", {x, i({3, 2}), v("u", f32({3, 5}))}, {{"reduction", "add"}})) == "R.Tensor((2, 4, 5), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("gather_nd", {x, i({3, 4})}); }) ==
        "gather_nd: index tuples of length 4 do not fit x (2, 4, 5) after 0 batch axes");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("gather_nd", {x, i({3, 1})}, {{"batch_dims", 1}}); }) ==
        "gather_nd: batch axis 0 differs: indices (3, 1), x (2, 4, 5)");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("scatter_nd", {x, i({3, 2}), v("u", f32({3, 4}))}); }) ==
        "scatter_nd: argument 'updates' (#3) must have shape (3, 5) (the indices' leading axes, then x's after k), but has (3, 4)");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("scatter_nd", {x, i({3, 2}), v("u", f32({3, 5}))}, {{"reduction", "sum"}}); }) ==
        "scatter_nd: attribute 'reduction' must be 'update', 'add', 'mul', 'max' or 'min', not 'sum'");
}
