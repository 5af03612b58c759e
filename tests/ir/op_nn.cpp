// SPDX-License-Identifier: Apache-2.0
// matmul, reductions, normalisation, convolution, pooling and padding.
#include "helpers.hpp"

using namespace kiln_test;

TEST_CASE("matmul follows numpy: 1-D operands, broadcast batch dimensions") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(type_of(ir::call_op("matmul", {v("a", f32({n, dim(8)})), v("b", f32({8, 3}))})) == "R.Tensor((n, 3), \"float32\")");
  CHECK(type_of(ir::call_op("matmul", {v("a", f32({8})), v("b", f32({8, 3}))})) == "R.Tensor((3,), \"float32\")");
  CHECK(type_of(ir::call_op("matmul", {v("a", f32({2, 8})), v("b", f32({8}))})) == "R.Tensor((2,), \"float32\")");
  CHECK(type_of(ir::call_op("matmul", {v("a", f32({8})), v("b", f32({8}))})) == "R.Tensor((), \"float32\")");
  CHECK(type_of(ir::call_op("matmul", {v("a", f32({5, 1, 2, 8})), v("b", f32({4, 8, 3}))})) == "R.Tensor((5, 4, 2, 3), \"float32\")");
  CHECK(type_of(ir::call_op("matmul", {v("a", f32({2, 8})), v("b", f32({8, 3}))}, {{"out_dtype", "float64"}})) ==
        "R.Tensor((2, 3), \"float64\")");
  CHECK(type_of(ir::call_op("matmul", {v("a", ir::tensor_type_of_rank(dtype::float32, 3)), v("b", f32({8, 3}))})) ==
        "R.Tensor(\"float32\", ndim=3)");
}

TEST_CASE("matmul errors name the shapes") {
  CHECK(message_of<ir::type_error>([] { ir::call_op("matmul", {v("a", f32({2, 8})), v("b", f32({7, 3}))}); }) ==
        "matmul: reduction dimensions differ: argument 'x1' (#1) has shape (2, 8) and argument 'x2' (#2) has shape (7, 3) (8 vs 7)");
  CHECK(message_of<ir::type_error>([] { ir::call_op("matmul", {v("a", f32({3, 2, 8})), v("b", f32({4, 8, 3}))}); }) ==
        "matmul: cannot broadcast batch dimensions 3 and 4 of shapes (3, 2, 8) and (4, 8, 3)");
  CHECK(message_of<ir::type_error>([] { ir::call_op("matmul", {v("a", f32({})), v("b", f32({4}))}); }) ==
        "matmul: argument 'x1' (#1) must have rank at least 1, but is a scalar");
}

TEST_CASE("reductions drop or keep the reduced axes") {
  ir::prim_expr n = ir::make_size_var("n");
  auto x = v("x", f32({n, dim(4), dim(5)}));
  CHECK(type_of(ir::call_op("sum", {x})) == "R.Tensor((), \"float32\")");
  CHECK(type_of(ir::call_op("mean", {x}, {{"axis", ir::int_array{1, -1}}})) == "R.Tensor((n,), \"float32\")");
  CHECK(type_of(ir::call_op("max", {x}, {{"axis", ir::int_array{0}}, {"keepdims", true}})) == "R.Tensor((1, 4, 5), \"float32\")");
  CHECK(type_of(ir::call_op("min", {x}, {{"axis", ir::int_array{}}})) == "R.Tensor((n, 4, 5), \"float32\")");
  CHECK(type_of(ir::call_op("argmax", {x}, {{"axis", 2}})) == "R.Tensor((n, 4), \"int64\")");
  CHECK(type_of(ir::call_op("argmin", {x})) == "R.Tensor((), \"int64\")");
  CHECK(type_of(ir::call_op("sum", {v("u", ir::tensor_type_of_rank(dtype::float32, 3))}, {{"axis", ir::int_array{0}}})) ==
        "R.Tensor(\"float32\", ndim=2)");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("sum", {x}, {{"axis", ir::int_array{3}}}); }) ==
        "sum: attribute 'axis' has axis 3, which is out of range for a tensor of rank 3");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("sum", {x}, {{"axis", ir::int_array{1, -2}}}); }) ==
        "sum: attribute 'axis' names axis 1 twice");
  CHECK(message_of<ir::type_error>([] { ir::call_op("mean", {v("i", ir::tensor_type({2}, dtype::int32))}); }) ==
        "mean: argument 'x' (#1) must be a floating-point tensor, but its dtype is int32");
}

TEST_CASE("softmax and layer_norm") {
  auto x = v("x", f32({2, 3, 8}));
  CHECK(type_of(ir::call_op("nn.softmax", {x}, {{"axis", 1}})) == "R.Tensor((2, 3, 8), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.log_softmax", {x}, {{"axis", 3}}); }) ==
        "nn.log_softmax: attribute 'axis' has axis 3, which is out of range for a tensor of rank 3");
  CHECK(message_of<ir::type_error>([] { ir::call_op("nn.softmax", {v("s", f32({}))}); }) ==
        "nn.softmax: argument 'x' (#1) must have rank at least 1, but is a scalar");
  CHECK(type_of(ir::call_op("nn.layer_norm", {x, v("g", f32({8})), v("b", f32({8}))})) == "R.Tensor((2, 3, 8), \"float32\")");
  CHECK_NOTHROW(ir::call_op("nn.layer_norm", {x, v("g", f32({3, 8})), v("b", f32({3, 8}))}, {{"axes", ir::int_array{1, 2}}}));
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.layer_norm", {x, v("g", f32({7})), v("b", f32({8}))}); }) ==
        "nn.layer_norm: argument 'gamma' (#2) has shape (7,), which does not match x's normalised dimensions (x has shape (2, 3, 8))");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.layer_norm", {x, v("g", f32({3, 8})), v("b", f32({8}))}); }) ==
        "nn.layer_norm: argument 'gamma' (#2) must have rank 1 (one dimension per normalised axis), but has rank 2");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.layer_norm", {x, v("g", f32({8})), v("b", f32({8}))}, {{"epsilon", -1.0}}); }) ==
        "nn.layer_norm: attribute 'epsilon' must not be negative");
}

TEST_CASE("conv2d computes output sizes, including symbolic ones") {
  // ResNet-18 stem: 7x7 stride 2 pad 3
  CHECK(type_of(ir::call_op("nn.conv2d", {v("x", f32({1, 3, 224, 224})), v("w", f32({64, 3, 7, 7}))},
                            {{"strides", ir::int_array{2, 2}}, {"padding", ir::int_array{3, 3, 3, 3}}})) ==
        "R.Tensor((1, 64, 112, 112), \"float32\")");
  // dilation and asymmetric padding
  CHECK(type_of(ir::call_op("nn.conv2d", {v("x", f32({1, 4, 10, 10})), v("w", f32({8, 4, 3, 3}))},
                            {{"dilation", ir::int_array{2}}, {"padding", ir::int_array{0, 1, 2, 3}}})) ==
        "R.Tensor((1, 8, 8, 10), \"float32\")");
  // depthwise
  CHECK(type_of(ir::call_op("nn.conv2d", {v("x", f32({2, 32, 8, 8})), v("w", f32({32, 1, 3, 3}))}, {{"groups", 32}, {"padding", 1}})) ==
        "R.Tensor((2, 32, 8, 8), \"float32\")");
  ir::prim_expr n = ir::make_size_var("n"), h = ir::make_size_var("h");
  CHECK(type_of(ir::call_op("nn.conv2d", {v("x", f32({n, dim(3), h, h})), v("w", f32({16, 3, 3, 3}))}, {{"strides", ir::int_array{2}}})) ==
        "R.Tensor((n, 16, (h - 3) // 2 + 1, (h - 3) // 2 + 1), \"float32\")");
}

TEST_CASE("conv2d errors") {
  auto x = v("x", f32({1, 3, 8, 8}));
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d", {x, v("w", f32({8, 4, 3, 3}))}); }) ==
        "nn.conv2d: channel mismatch: data has 3 input channels, but weight expects 4 x 1 groups = 4 (data (1, 3, 8, 8), weight (8, 4, 3, 3))");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d", {x, v("w", f32({8, 3, 9, 9}))}); }) ==
        "nn.conv2d: the convolution window (size 9, dilation 1) does not fit the input extent 8 with padding 0");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d", {x, v("w", f32({8, 3, 3, 3}))}, {{"data_layout", "NHWC"}}); }) ==
        "nn.conv2d: attribute 'data_layout' is \"NHWC\", but only \"NCHW\" is supported");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d", {x, v("w", f32({8, 3, 3}))}); }) ==
        "nn.conv2d: argument 'weight' (#2) must have rank 4 (OIHW), but has rank 3");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d", {x, v("w", f32({8, 3, 3, 3}))}, {{"strides", ir::int_array{1, 0}}}); }) ==
        "nn.conv2d: attribute 'strides' must be positive, but has 0");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d", {x, v("w", f32({8, 3, 3, 3}))}, {{"padding", ir::int_array{1, 1, 1}}}); }) ==
        "nn.conv2d: attribute 'padding' must have 1, 2 or 4 values, but has 3");
  CHECK(message_of<ir::type_error>([] { ir::call_op("nn.conv2d", {v("x", f32({1, 4, 8, 8})), v("w", f32({6, 1, 3, 3}))}, {{"groups", 4}}); }) ==
        "nn.conv2d: argument 'weight' (#2) has 6 output channels, which is not divisible by groups = 4");
}

TEST_CASE("pooling, with floor and ceil modes") {
  auto x = v("x", f32({1, 64, 112, 112}));
  CHECK(type_of(ir::call_op("nn.max_pool2d", {x}, {{"pool_size", ir::int_array{3}}, {"strides", ir::int_array{2}}, {"padding", ir::int_array{1}}})) ==
        "R.Tensor((1, 64, 56, 56), \"float32\")");
  auto y = v("y", f32({1, 1, 6, 6}));
  CHECK(type_of(ir::call_op("nn.avg_pool2d", {y}, {{"pool_size", ir::int_array{3}}, {"strides", ir::int_array{2}}})) ==
        "R.Tensor((1, 1, 2, 2), \"float32\")");
  CHECK(type_of(ir::call_op("nn.avg_pool2d", {y}, {{"pool_size", ir::int_array{3}}, {"strides", ir::int_array{2}}, {"ceil_mode", true}})) ==
        "R.Tensor((1, 1, 3, 3), \"float32\")");
  // ceil mode never starts a window in the trailing padding (PyTorch's rule)
  CHECK(type_of(ir::call_op("nn.max_pool2d", {v("z", f32({1, 1, 5, 5}))},
                            {{"pool_size", ir::int_array{2}}, {"strides", ir::int_array{2}}, {"padding", ir::int_array{1}}, {"ceil_mode", true}})) ==
        "R.Tensor((1, 1, 3, 3), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.max_pool2d", {x}); }) == "nn.max_pool2d: attribute 'pool_size' is required");
  CHECK(type_of(ir::call_op("nn.adaptive_avg_pool2d", {x}, {{"output_size", ir::int_array{7, 7}}})) == "R.Tensor((1, 64, 7, 7), \"float32\")");
  CHECK(type_of(ir::call_op("nn.adaptive_avg_pool2d", {x})) == "R.Tensor((1, 64, 112, 112), \"float32\")");
  CHECK(type_of(ir::call_op("nn.global_avg_pool2d", {x})) == "R.Tensor((1, 64, 1, 1), \"float32\")");
  CHECK(message_of<ir::type_error>([] { ir::call_op("nn.global_avg_pool2d", {v("x", f32({2, 3}))}); }) ==
        "nn.global_avg_pool2d: argument 'data' (#1) must have rank 4 (NCHW), but has rank 2");
}

TEST_CASE("pad in its three modes") {
  auto x = v("x", f32({2, 3}));
  CHECK(type_of(ir::call_op("nn.pad", {x}, {{"pad_width", ir::int_array{0, 1, 2, 3}}})) == "R.Tensor((3, 8), \"float32\")");
  CHECK(type_of(ir::call_op("nn.pad", {x}, {{"pad_width", ir::int_array{1, 1, 2, 2}}, {"pad_mode", "reflect"}})) == "R.Tensor((4, 7), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.pad", {x}, {{"pad_width", ir::int_array{2, 0, 0, 0}}, {"pad_mode", "reflect"}}); }) ==
        "nn.pad: reflect padding of axis 0 must be smaller than its extent 2");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.pad", {x}, {{"pad_width", ir::int_array{1, 1}}}); }) ==
        "nn.pad: attribute 'pad_width' must have 2 values per axis (4), but has 2");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.pad", {x}, {{"pad_width", ir::int_array{0, 0, 0, 0}}, {"pad_mode", "wrap"}}); }) ==
        "nn.pad: attribute 'pad_mode' must be \"constant\", \"edge\" or \"reflect\", not \"wrap\"");
}

TEST_CASE("image.resize: the output has the given size, modes, scales and roi are checked") {
  auto x = v("x", f32({1, 3, 4, 4}));
  CHECK(type_of(ir::call_op("image.resize", {x}, {{"size", ir::int_array{1, 3, 8, 6}}})) == "R.Tensor((1, 3, 8, 6), \"float32\")");
  CHECK(type_of(ir::call_op("image.resize", {v("i", ir::tensor_type({dim(2)}, dtype::int64))}, {{"size", ir::int_array{5}}, {"method", "nearest"}})) ==
        "R.Tensor((5,), \"int64\")");
  // integers become floats where floats are wanted
  const ir::expr c = ir::call_op("image.resize", {x}, {{"size", ir::int_array{1, 3, 8, 8}}, {"scales", ir::int_array{1, 1, 2, 2}}});
  CHECK(static_cast<const ir::call_node&>(*c).attrs.find("scales")->as<ir::float_array>() == ir::float_array{1, 1, 2, 2});
  CHECK(message_of<ir::type_error>([&] { ir::call_op("image.resize", {x}, {{"size", ir::int_array{8, 8}}}); }) ==
        "image.resize: argument 'data' (#1) has rank 4, but attribute 'size' gives 2 extents");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("image.resize", {x}, {{"size", ir::int_array{1, 3, 8, 8}}, {"method", "area"}}); }) ==
        "image.resize: attribute 'method' must be one of \"nearest\", \"linear\", \"cubic\", not \"area\"");
  CHECK(message_of<ir::type_error>([&] {
          ir::call_op("image.resize", {x}, {{"size", ir::int_array{1, 3, 8, 8}}, {"scales", ir::float_array{2.0, 2.0}}});
        }) == "image.resize: attribute 'scales' has 2 values for 4 axes");
  CHECK(message_of<ir::type_error>([&] {
          ir::call_op("image.resize", {x}, {{"size", ir::int_array{1, 3, 8, 8}}, {"coordinate_transformation_mode", "tf_crop_and_resize"}});
        }) == "image.resize: tf_crop_and_resize needs attribute 'roi' with 8 values (every axis' start, then every axis' end)");
  CHECK(message_of<ir::type_error>([&] {
          ir::call_op("image.resize", {v("i", ir::tensor_type({dim(2)}, dtype::int32))}, {{"size", ir::int_array{4}}});
        }) == "image.resize: argument 'data' (#1) must be a floating-point tensor to interpolate, but its dtype is int32");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("image.resize", {x}, {{"size", ir::float_array{1.5}}}); }) ==
        "image.resize: attribute 'size' must be list of int, but a list of float was given");
}

TEST_CASE("conv2d_transpose: output sizes with stride, padding, output padding, dilation and groups") {
  ir::prim_expr n = ir::make_size_var("n");
  auto x = v("x", f32({n, dim(4), dim(3), dim(5)}));
  CHECK(type_of(ir::call_op("nn.conv2d_transpose", {x, v("w", f32({4, 2, 3, 3}))})) == "R.Tensor((n, 2, 5, 7), \"float32\")");
  CHECK(type_of(ir::call_op("nn.conv2d_transpose", {x, v("w", f32({4, 3, 3, 2}))},
                            {{"strides", ir::int_array{3, 2}}, {"padding", ir::int_array{1, 0, 1, 2}}, {"output_padding", ir::int_array{2, 1}},
                             {"groups", 2}})) == "R.Tensor((n, 6, 9, 9), \"float32\")");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d_transpose", {x, v("w", f32({3, 2, 3, 3}))}); }) ==
        "nn.conv2d_transpose: channel mismatch: data has 4 input channels, but weight has 3 (data (n, 4, 3, 5), weight (3, 2, 3, 3))");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d_transpose", {x, v("w", f32({4, 2, 3, 3}))}, {{"output_padding", ir::int_array{1, 1}}}); }) ==
        "nn.conv2d_transpose: attribute 'output_padding' (1) must be smaller than the stride or the dilation");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d_transpose", {x, v("w", f32({4, 2, 3, 3}))}, {{"padding", ir::int_array{3, 0, 3, 0}}}); }) ==
        "nn.conv2d_transpose: the padding crops the whole output (-1 along spatial axis 0)");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d_transpose", {x, v("w", f32({4, 2, 3, 3}))}, {{"kernel_layout", "OIHW"}}); }) ==
        "nn.conv2d_transpose: attribute 'kernel_layout' is \"OIHW\", but only \"IOHW\" is supported");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("nn.conv2d_transpose", {x, v("w", f32({4, 2, 3, 3}))}, {{"strides", ir::int_array{std::int64_t(1) << 40, 1}}}); }) ==
        "nn.conv2d_transpose: strides, dilation, padding and output padding must be at most 2^31, got 1099511627776");
}

TEST_CASE("topk returns values and indices with k along the axis") {
  auto x = v("x", f32({3, 7}));
  CHECK(type_of(ir::call_op("topk", {x}, {{"k", 2}})) == "R.Tuple(R.Tensor((3, 2), \"float32\"), R.Tensor((3, 2), \"int64\"))");
  CHECK(type_of(ir::call_op("topk", {x}, {{"k", 1}, {"axis", 0}, {"dtype", "int32"}})) ==
        "R.Tuple(R.Tensor((1, 7), \"float32\"), R.Tensor((1, 7), \"int32\"))");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("topk", {x}, {{"k", 8}}); }) == "topk: attribute 'k' (8) is larger than axis 1's extent 7");
  CHECK(message_of<ir::type_error>([&] { ir::call_op("topk", {x}, {{"k", 1}, {"dtype", "float32"}}); }) ==
        "topk: attribute 'dtype' (of the indices) must be int64 or int32, not float32");
}
