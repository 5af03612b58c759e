// SPDX-License-Identifier: Apache-2.0
// The ONNX importer on models built here with ONNX's protobuf classes: inputs, initializers,
// symbolic dimensions, shape overrides, opset-dependent semantics, shape subgraphs computed at
// import, and every kind of bad model with its message.
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/interpreter/reference_evaluator.hpp>
#include <kiln/kernels/elementwise.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/vm/vm.hpp>

#include "../../common/message_of.hpp"
#include "../../common/scoped_directory.hpp"
#include "model_builder.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace kiln;
namespace kx = kiln::frontend::onnx;
using kiln_test::message_of;

using kiln_test::floats;
using kiln_test::model_builder;
using kiln_test::run;

TEST_CASE("a Gemm + Relu graph imports with its initializers as constants and runs") {
  model_builder b;
  b.input("x", {"batch", "3"});
  b.initializer("w", {2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f});
  b.initializer("bias", {2}, {0.25f, -10});
  auto& gemm = b.node("Gemm", {"x", "w", "bias"}, {"h"});
  model_builder::attr(gemm, "transB", 1);
  b.node("Relu", {"h"}, {"y"});
  b.output("y", {"batch", "2"});

  const ir::ir_module m = kx::import_model(b.m);
  const auto& f = static_cast<const ir::function_node&>(*m->lookup("main"));
  REQUIRE(f.params.size() == 1);
  CHECK(ir::to_string(f.params[0]->checked_type) == "R.Tensor((batch, 3), \"float32\")");
  CHECK(ir::print(m).find("R.matmul") != std::string::npos);

  const vm::value y = run(m, {floats({2, 3}, {1, 2, 3, 4, 5, 6})});
  // row 0: [1-3, 3] + bias = [-1.75, -7] -> relu [0, 0]; row 1: [4-6, 7.5] + bias = [-1.75, -2.5] -> [0, 0]
  CHECK(y.as_tensor().to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  const vm::value y2 = run(m, {floats({1, 3}, {3, 2, 1})});
  CHECK(y2.as_tensor().to_vector<float>() == std::vector<float>{2.25f, 0});
}

TEST_CASE("keep_params_in_input makes initializers trailing parameters, shapes fixes an input's dimensions") {
  model_builder b;
  b.input("x", {"n", "3"});
  b.initializer("w", {3, 1}, {1, 1, 1});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y", {"n", "1"});
  const ir::ir_module m = kx::import_model(b.m, {.shapes = {{"x", {4, 3}}}, .keep_params_in_input = true});
  const auto& f = static_cast<const ir::function_node&>(*m->lookup("main"));
  REQUIRE(f.params.size() == 2);
  CHECK(f.params[1]->name_hint == "w");
  CHECK(ir::to_string(f.params[0]->checked_type) == "R.Tensor((4, 3), \"float32\")");
  CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m, {.shapes = {{"nope", {1}}}}); }) ==
        "kiln::frontend::onnx: import_options::shapes names 'nope', which is not an input of the graph");
  CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m, {.shapes = {{"x", {1}}}}); }) ==
        "kiln::frontend::onnx: import_options::shapes gives 'x' rank 1, but the model gives rank 2");
}

TEST_CASE("import_file with import_options::shapes, as docs/onnx.md shows it") {
  model_builder b;
  b.input("input", {"batch", "3", "224", "224"});
  b.node("GlobalAveragePool", {"input"}, {"y"});
  b.output("y", {"batch", "3", "1", "1"});
  const kiln_test::scoped_directory dir("onnx_md");
  std::ofstream("model.onnx", std::ios::binary) << b.m.SerializeAsString();
  // [import_file]
  ir::ir_module m = kiln::frontend::onnx::import_file("model.onnx", {.shapes = {{"input", {1, 3, 224, 224}}}});
  vm::executable ex = kiln::compile(m);
  // [import_file]
  const auto& f = static_cast<const ir::function_node&>(*m->lookup("main"));
  CHECK(ir::to_string(f.params[0]->checked_type) == "R.Tensor((1, 3, 224, 224), \"float32\")");
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  runtime::tensor x = runtime::tensor::empty({1, 3, 224, 224}, dtype::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i / (224 * 224));  // channel c holds c
  CHECK(machine.invoke("main", x).as_tensor().to_vector<float>() == std::vector<float>{0, 1, 2});
}

TEST_CASE("a shape subgraph is computed at import: Shape -> Gather -> Unsqueeze -> Concat -> Reshape gives a static reshape") {
  model_builder b;
  b.input("x", {"2", "3", "4"});
  b.node("Shape", {"x"}, {"s"});
  b.ints_initializer("zero", {0});
  auto& gather = b.node("Gather", {"s", "zero"}, {"d0"});
  model_builder::attr(gather, "axis", std::int64_t{0});
  b.ints_initializer("minus_one", {-1});
  auto& concat = b.node("Concat", {"d0", "minus_one"}, {"shape"});
  model_builder::attr(concat, "axis", std::int64_t{0});
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y", {"2", "12"});
  const ir::ir_module m = kx::import_model(b.m);
  const std::string text = ir::print(m);
  CHECK(text.find("R.reshape(x, R.shape([2, -1]))") != std::string::npos);
  CHECK(text.find("R.Tensor((2, 12), \"float32\")") != std::string::npos);

  // PyTorch's recurrent layers size their zero initial states so: a scalar Gather, Unsqueeze (a
  // reshape of a constant, computed at import too), Concat, Expand.
  model_builder e;
  e.input("x", {"5", "3", "4"});
  e.node("Shape", {"x"}, {"s"});
  e.int_scalar_initializer("one", 1);
  e.node("Gather", {"s", "one"}, {"batch"});
  e.ints_initializer("axes", {0});
  e.node("Unsqueeze", {"batch", "axes"}, {"batch1"});
  e.ints_initializer("lead", {1});
  e.ints_initializer("hidden", {6});
  model_builder::attr(e.node("Concat", {"lead", "batch1", "hidden"}, {"shape"}), "axis", std::int64_t{0});
  e.initializer("zero", {1}, {0.0f});
  e.node("Expand", {"zero", "shape"}, {"h0"});
  e.output("h0", {"1", "3", "6"});
  const std::string state = ir::print(kx::import_model(e.m));
  CHECK(state.find("R.Tensor((1, 3, 6), \"float32\")") != std::string::npos);
}

TEST_CASE("shape subgraphs over symbolic dimensions stay symbolic: a dynamic batch and sequence reach Reshape, Expand and ConstantOfShape") {
  // x [batch, seq, 8], as PyTorch exports with dynamic axes: the reshape targets are computed
  // from Shape(x) with Gather, Mul, Div, Unsqueeze, Concat and Slice, and stay expressions in
  // the size variables batch and seq.
  model_builder b;
  b.input("x", {"batch", "seq", "8"});
  b.node("Shape", {"x"}, {"s"});
  b.int_scalar_initializer("i0", 0);
  b.int_scalar_initializer("i1", 1);
  b.int_scalar_initializer("i2", 2);
  b.int_scalar_initializer("two", 2);
  b.ints_initializer("axes", {0});
  b.ints_initializer("two_1d", {2});
  b.node("Gather", {"s", "i0"}, {"n"});
  b.node("Gather", {"s", "i1"}, {"t"});
  b.node("Gather", {"s", "i2"}, {"d"});
  b.node("Mul", {"n", "t"}, {"nt"});
  b.node("Div", {"d", "two"}, {"half"});  // 8 / 2: a constant again
  b.node("Unsqueeze", {"nt", "axes"}, {"nt1"});
  b.node("Unsqueeze", {"half", "axes"}, {"half1"});
  model_builder::attr(b.node("Concat", {"nt1", "two_1d", "half1"}, {"target"}), "axis", std::int64_t{0});
  b.node("Reshape", {"x", "target"}, {"y"});  // [batch * seq, 2, 4]
  b.ints_initializer("flat", {0, -1});
  b.node("Reshape", {"y", "flat"}, {"z"});  // [batch * seq, 8]: -1 is 8, the size variables cancel
  b.initializer("bias", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  b.node("Expand", {"bias", "s"}, {"wide"});
  b.node("Add", {"x", "wide"}, {"shifted"});
  b.ints_initializer("from", {0});
  b.ints_initializer("to", {2});
  b.node("Slice", {"s", "from", "to"}, {"lead"});
  auto& fill = b.node("ConstantOfShape", {"lead"}, {"ones"});
  auto* value = fill.add_attribute();
  value->set_name("value");
  value->set_type(::onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(::onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(1.5f);
  b.output("z", {});
  b.output("shifted", {});
  b.output("ones", {});
  const ir::ir_module m = kx::import_model(b.m);
  const std::string text = ir::print(m);
  CAPTURE(text);
  CHECK(text.find("-> R.Tuple(R.Tensor((batch * seq, 8), \"float32\"), R.Tensor((batch, seq, 8), \"float32\"), R.Tensor((batch, seq), \"float32\"))") !=
        std::string::npos);
  for (const auto& size : {std::pair<std::int64_t, std::int64_t>{2, 3}, {1, 5}}) {
    const std::int64_t n = size.first, t = size.second;  // (not a structured binding: Clang 14's CAPTURE cannot take one)
    CAPTURE(n);
    CAPTURE(t);
    std::vector<float> xs(std::size_t(n * t * 8));
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = float(i) / 4;
    const vm::value r = run(m, {floats({n, t, 8}, xs)});
    const auto z = r.as_tuple()[0].as_tensor(), shifted = r.as_tuple()[1].as_tensor(), ones = r.as_tuple()[2].as_tensor();
    CHECK(z.shape() == runtime::shape_vector{n * t, 8});
    CHECK(z.to_vector<float>() == xs);
    REQUIRE(shifted.shape() == runtime::shape_vector{n, t, 8});
    for (std::size_t i = 0; i < xs.size(); ++i) CHECK(shifted.to_vector<float>()[i] == xs[i] + float(i % 8 + 1));
    CHECK(ones.shape() == runtime::shape_vector{n, t});
    CHECK(ones.to_vector<float>() == std::vector<float>(std::size_t(n * t), 1.5f));
  }
  // Fixed by import_options::shapes, the same subgraphs are constants again.
  CHECK(ir::print(kx::import_model(b.m, {.shapes = {{"x", {2, 3, 8}}}})).find("R.reshape(x, R.shape([6, 2, 4]))") != std::string::npos);

  // PyTorch's cls.expand(b, -1, -1): the -1s of [b, -1, -1] replaced by the input's dimensions
  // with Shape, ConstantOfShape, Mul, Equal and Where over the target, which stays symbolic.
  model_builder ex;
  ex.input("x", {"batch", "5"});
  ex.initializer("cls", {1, 1, 4}, {1, 2, 3, 4});
  ex.node("Shape", {"x"}, {"s"});
  ex.int_scalar_initializer("i0", 0);
  ex.ints_initializer("axes", {0});
  ex.ints_initializer("minus_one", {-1});
  ex.node("Gather", {"s", "i0"}, {"n"});
  ex.node("Unsqueeze", {"n", "axes"}, {"n1"});
  model_builder::attr(ex.node("Concat", {"n1", "minus_one", "minus_one"}, {"target"}), "axis", std::int64_t{0});
  ex.node("Reshape", {"target", "minus_one"}, {"flat"});
  ex.node("Shape", {"flat"}, {"count"});
  auto& ones = ex.node("ConstantOfShape", {"count"}, {"ones"});
  auto* one_value = ones.add_attribute();
  one_value->set_name("value");
  one_value->set_type(::onnx::AttributeProto::TENSOR);
  one_value->mutable_t()->set_data_type(::onnx::TensorProto::INT64);
  one_value->mutable_t()->add_dims(1);
  one_value->mutable_t()->add_int64_data(1);
  ex.node("Mul", {"ones", "minus_one"}, {"negs"});
  ex.node("Equal", {"flat", "negs"}, {"is_neg"});
  ex.node("Where", {"is_neg", "ones", "flat"}, {"fixed"});
  ex.node("Expand", {"cls", "fixed"}, {"y"});
  ex.output("y", {});
  const ir::ir_module em = kx::import_model(ex.m);
  CHECK(ir::print(em).find("R.broadcast_to(R.const([[[1.0, 2.0, 3.0, 4.0]]], \"float32\"), R.shape([batch, 1, 4]))") != std::string::npos);
  const auto expanded = run(em, {floats({3, 5}, std::vector<float>(15, 0))}).as_tensor();
  CHECK(expanded.shape() == runtime::shape_vector{3, 1, 4});
  CHECK(expanded.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});

  // An operator that cannot take a shape value (a dimension cast to float), and a shape value as
  // a graph output.
  model_builder bad;
  bad.input("x", {"batch", "seq"});
  bad.node("Shape", {"x"}, {"s"});
  model_builder::attr(bad.node("Cast", {"s"}, {"f"}, "to_float"), "to", std::int64_t{::onnx::TensorProto::FLOAT});
  bad.output("f", {});
  CHECK(message_of<kx::import_error>([&] { kx::import_model(bad.m); }) ==
        "kiln::frontend::onnx: node 'to_float' (Cast): input 0 is computed at import from the symbolic dimension(s) batch, seq, which this "
        "operator cannot take; fix them with import_options::shapes (kiln-run --shape)");
  model_builder lacking;  // without ONNX's checker a node may lack an operand: an error, not a read out of bounds
  lacking.input("x", {"batch"});
  lacking.node("Shape", {"x"}, {"s"});
  lacking.node("Gather", {"s"}, {"n"}, "g");
  lacking.output("n", {});
  CHECK(message_of<kx::import_error>([&] { kx::import_model(lacking.m, {.check_model = false}); }) ==
        "kiln::frontend::onnx: node 'g' (Gather): input 0 is computed at import from the symbolic dimension(s) batch, which this operator "
        "cannot take; fix them with import_options::shapes (kiln-run --shape)");
  // A Slice takes shape values as its bounds, not as its data: a shape value cut to a symbolic
  // bound is not shape arithmetic kiln computes, and the message names the data's dimensions.
  model_builder cut;
  cut.input("x", {"batch", "seq"});
  cut.node("Shape", {"x"}, {"s"});
  cut.ints_initializer("zero", {0});
  cut.ints_initializer("one", {1});
  cut.ints_initializer("two", {2});
  cut.node("Slice", {"s", "one", "two"}, {"seq_len"});
  cut.node("Slice", {"s", "zero", "seq_len"}, {"head"}, "cut");
  cut.output("head", {"1"}, ::onnx::TensorProto::INT64);
  CHECK(message_of<kx::import_error>([&] { kx::import_model(cut.m); }) ==
        "kiln::frontend::onnx: node 'cut' (Slice): input 0 is computed at import from the symbolic dimension(s) batch, seq, which this operator "
        "cannot take; fix them with import_options::shapes (kiln-run --shape)");
  model_builder out;
  out.input("x", {"batch", "3"});
  out.node("Shape", {"x"}, {"s"});
  out.output("s", {"2"}, ::onnx::TensorProto::INT64);
  CHECK(message_of<kx::import_error>([&] { kx::import_model(out.m); }) ==
        "kiln::frontend::onnx: graph output 's' is computed from the symbolic dimension(s) batch (a shape, not a tensor kiln computes); fix "
        "them with import_options::shapes (kiln-run --shape)");
}

TEST_CASE("a dim_param written as arithmetic over other inputs' dimension names is that expression, checked at the call") {
  // Optimum's decoder with past: the mask is as long as the cache and the new positions together,
  // so it broadcasts against the scores [batch, seq, past + seq] (Concat of past and new).
  model_builder b;
  b.input("past", {"batch", "past_sequence_length", "4"});
  b.input("new", {"batch", "sequence_length", "4"});
  b.input("mask", {"batch", "past_sequence_length + sequence_length"});
  b.input("odd", {"seq-len", "(sequence_length + 1) * 2"});  // a name with a '-', and an expression
  model_builder::attr(b.node("Concat", {"past", "new"}, {"all"}), "axis", std::int64_t{1});
  model_builder::attr(b.node("Transpose", {"all"}, {"allT"}), "perm", std::vector<std::int64_t>{0, 2, 1});
  b.node("MatMul", {"new", "allT"}, {"scores"});  // [batch, seq, past + seq]
  b.ints_initializer("mid", {1});
  b.node("Unsqueeze", {"mask", "mid"}, {"mask3"});
  model_builder::attr(b.node("Cast", {"mask3"}, {"maskf"}), "to", std::int64_t{::onnx::TensorProto::FLOAT});
  b.node("Add", {"scores", "maskf"}, {"y"});
  b.output("y", {});
  b.output("odd", {});
  const ir::ir_module m = kx::import_model(b.m);
  const std::string text = ir::print(m);
  CAPTURE(text);
  CHECK(text.find("mask: R.Tensor((batch, past_sequence_length + sequence_length), \"float32\")") != std::string::npos);
  CHECK(text.find("odd: R.Tensor((seq_len, (sequence_length + 1) * 2), \"float32\")") != std::string::npos);
  CHECK(text.find("R.Tensor((batch, sequence_length, past_sequence_length + sequence_length), \"float32\")") != std::string::npos);
  const auto ones = [](std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return floats(runtime::shape_vector(shape.begin(), shape.end()), std::vector<float>(std::size_t(n), 1.0f));
  };
  const vm::value r = run(m, {ones({1, 3, 4}), ones({1, 2, 4}), ones({1, 5}), ones({7, 6})});
  CHECK(r.as_tuple()[0].as_tensor().shape() == runtime::shape_vector{1, 2, 5});
  CHECK(r.as_tuple()[0].as_tensor().to_vector<float>() == std::vector<float>(10, 5.0f));
  // A mask of another length is refused when the function is called, naming the expression.
  const std::string msg = message_of<kiln::error>([&] { run(m, {ones({1, 3, 4}), ones({1, 2, 4}), ones({1, 6}), ones({7, 6})}); });
  CHECK(msg.find("past_sequence_length + sequence_length") != std::string::npos);
}

TEST_CASE("a slice to a symbolic end and a range to a symbolic limit are made at run time: mask[:t, :t], arange(t)") {
  // mask [6, 6] (0, 1, ..., 35) cut to [t, t] for x [1, t]; arange(1, t, 2) over x's t; and
  // mask[1:t:2] along axis 1 (a step).
  model_builder b(17);
  b.input("x", {"1", "t"});
  std::vector<float> mask(36);
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = float(i);
  b.initializer("mask", {6, 6}, mask);
  b.node("Shape", {"x"}, {"s"});
  b.ints_initializer("one_1d", {1});
  b.ints_initializer("zeros", {0, 0});
  b.ints_initializer("axes01", {0, 1});
  b.ints_initializer("axis1", {1});
  b.ints_initializer("two", {2});
  b.int_scalar_initializer("i1", 1);
  b.int_scalar_initializer("step", 2);
  b.node("Slice", {"s", "one_1d", "two"}, {"t1"});  // [t]
  model_builder::attr(b.node("Concat", {"t1", "t1"}, {"ends"}), "axis", std::int64_t{0});
  b.node("Slice", {"mask", "zeros", "ends", "axes01"}, {"square"});
  b.node("Slice", {"mask", "one_1d", "t1", "axis1", "two"}, {"strided"});
  b.node("Gather", {"s", "i1"}, {"t"});
  b.node("Range", {"i1", "t", "step"}, {"odd"});
  b.output("square", {});
  b.output("strided", {});
  b.output("odd", {});
  const ir::ir_module m = kx::import_model(b.m);
  for (std::int64_t t : {1, 4, 6}) {
    CAPTURE(t);
    const vm::value r = run(m, {floats({1, t}, std::vector<float>(std::size_t(t), 0))});
    std::vector<float> square, strided;
    std::vector<std::int64_t> odd;
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t j = 0; j < t; ++j) square.push_back(mask[std::size_t(i * 6 + j)]);
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t j = 1; j < t; j += 2) strided.push_back(mask[std::size_t(i * 6 + j)]);
    for (std::int64_t v = 1; v < t; v += 2) odd.push_back(v);
    CHECK(r.as_tuple()[0].as_tensor().shape() == runtime::shape_vector{t, t});
    CHECK(r.as_tuple()[0].as_tensor().to_vector<float>() == square);
    CHECK(r.as_tuple()[1].as_tensor().to_vector<float>() == strided);
    CHECK(r.as_tuple()[2].as_tensor().to_vector<std::int64_t>() == odd);
  }
  // Past the buffer's length, the slice's indices are out of range: an error at run time.
  CHECK(message_of<kiln::error>([&] { run(m, {floats({1, 7}, std::vector<float>(7, 0))}); }).find("index 6 (element 6 of the indices) is out of range for axis 0 of extent 6") !=
        std::string::npos);
}

TEST_CASE("a range whose start and limit are both symbolic dimensions: arange(a, t)") {
  model_builder b(17);
  b.input("x", {"a", "t"});
  b.node("Shape", {"x"}, {"s"});
  b.int_scalar_initializer("i0", 0);
  b.int_scalar_initializer("i1", 1);
  b.node("Gather", {"s", "i0"}, {"a"});
  b.node("Gather", {"s", "i1"}, {"t"});
  b.node("Range", {"a", "t", "i1"}, {"r"});
  b.output("r", {});
  const ir::ir_module m = kx::import_model(b.m);
  CHECK(run(m, {floats({2, 5}, std::vector<float>(10, 0))}).as_tensor().to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 3, 4});
  CHECK(run(m, {floats({3, 3}, std::vector<float>(9, 0))}).as_tensor().to_vector<std::int64_t>().empty());
}

TEST_CASE("opset decides semantics: Softmax before 13 flattens at axis 1, from 13 works on the last axis") {
  for (int opset : {11, 13}) {
    model_builder b(opset);
    b.input("x", {"1", "2", "2"});
    b.node("Softmax", {"x"}, {"y"});
    b.output("y", {"1", "2", "2"});
    const vm::value y = run(kx::import_model(b.m), {floats({1, 2, 2}, {0, 0, 0, 0})});
    const float want = opset == 11 ? 0.25f : 0.5f;
    for (float v : y.as_tensor().to_vector<float>()) CHECK(v == doctest::Approx(want));
  }
}

TEST_CASE("opset decides semantics: before 7, Add broadcasts from an axis and PRelu's slope is per channel") {
  // Add-6 with broadcast = 1, axis = 1: B [3] lines up with A's axis 1 of [2, 3, 2].
  model_builder b(6);
  b.input("a", {"2", "3", "2"});
  b.input("b", {"3"});
  auto& add = b.node("Add", {"a", "b"}, {"y"}, "add");
  model_builder::attr(add, "broadcast", std::int64_t{1});
  model_builder::attr(add, "axis", std::int64_t{1});
  b.output("y", {"2", "3", "2"});
  std::vector<float> a(12, 0.f);
  const vm::value y = run(kx::import_model(b.m, {.check_model = false}), {floats({2, 3, 2}, a), floats({3}, {1, 2, 3})});
  CHECK(y.as_tensor().to_vector<float>() == std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  // An axis that puts B past A's last dimension is the node's error.
  b.g().mutable_node(0)->mutable_attribute(1)->set_i(3);
  CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m, {.check_model = false}); }) ==
        "kiln::frontend::onnx: node 'add' (Add): legacy broadcasting: axis 3 does not place the second operand's 1 dimension(s) within the "
        "first operand's 3");

  // PRelu-6: a slope of [C] applies along the channel axis of [N, C, L]; from opset 7 it would
  // broadcast against the last axis instead.
  for (int opset : {6, 9}) {
    model_builder p(opset);
    p.input("x", {"1", "2", "2"});
    p.input("s", {"2"});
    p.node("PRelu", {"x", "s"}, {"y"});
    p.output("y", {"1", "2", "2"});
    const vm::value r = run(kx::import_model(p.m, {.check_model = false}), {floats({1, 2, 2}, {-1, -1, -1, 1}), floats({2}, {2, 3})});
    CHECK(r.as_tensor().to_vector<float>() == (opset == 6 ? std::vector<float>{-2, -2, -3, 1} : std::vector<float>{-2, -3, -2, 1}));
  }
}

TEST_CASE("operators older than kiln's converters are brought up by ONNX's version converter, where it cannot, the error says why") {
  {  // Reshape before opset 5 takes its shape as an attribute; kiln converts Reshape from opset 5
    model_builder b(4);
    b.input("x", {"2", "3"});
    model_builder::attr(b.node("Reshape", {"x"}, {"y"}), "shape", std::vector<std::int64_t>{3, 2});
    b.output("y", {"3", "2"});
    const auto y = run(kx::import_model(b.m), {vm::value(floats({2, 3}, {1, 2, 3, 4, 5, 6}))}).as_tensor();
    CHECK(y.shape() == runtime::shape_vector{3, 2});
    CHECK(y.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
    // The converter runs on models ONNX's checker accepts only; one it rejects is reported as such.
    b.g().mutable_node(0)->set_input(0, "nowhere");
    const std::string msg = message_of<kx::import_error>([&] { kx::import_model(b.m); });
    CAPTURE(msg);
    CHECK(msg.starts_with("kiln::frontend::onnx: the model is not valid ONNX: "));
    CHECK(msg.find("nowhere") != std::string::npos);
  }
  // Pad before opset 2 ('paddings'): ONNX 1.12's converter has no adapter to Pad-2.
  model_builder b(1);
  b.input("x", {"2"});
  model_builder::attr(b.node("Pad", {"x"}, {"y"}, "p"), "paddings", std::vector<std::int64_t>{1, 1});
  b.output("y", {"4"});
  const std::string msg = message_of<kx::import_error>([&] { kx::import_model(b.m); });
  CAPTURE(msg);
  CHECK(msg.starts_with("kiln::frontend::onnx: the model uses 1 operator kiln cannot import:\n  Pad (at opset 1; kiln converts it from opset 2): 1 node "
                        "('p')\nONNX's version converter could not bring the model from opset 1 to 2: "));
}

TEST_CASE("every unsupported operator is listed at once, with the nodes that use it") {
  model_builder b;
  b.input("x", {"2"});
  b.node("Relu", {"x"}, {"a"});
  b.node("Frobnicate", {"a"}, {"b"}, "f1");
  b.node("Frobnicate", {"b"}, {"c"}, "f2");
  b.node("Unique", {"c"}, {"d"}, "u");
  b.output("d", {"2"});
  CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m, {.check_model = false}); }) ==
        "kiln::frontend::onnx: the model uses 2 operators kiln cannot import:\n"
        "  Frobnicate: 2 nodes ('f1', 'f2')\n"
        "  Unique: 1 node ('u')");
}

TEST_CASE("malformed models: not protobuf, truncated, invalid, inconsistent initializers, unknown names, unsupported types") {
  model_builder b;
  b.input("x", {"2"});
  b.initializer("w", {2}, {1, 2});
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y", {"2"});
  const auto good = b.bytes();
  CHECK(kx::import_bytes(good).get() != nullptr);

  // Every truncation either parses to something the checker rejects, or fails to parse: never a crash.
  for (std::size_t n = 0; n < good.size(); ++n) {
    const std::vector<std::byte> cut(good.begin(), good.begin() + std::ptrdiff_t(n));
    const std::string msg = message_of<kx::import_error>([&] { kx::import_bytes(cut, "cut"); });
    CHECK_MESSAGE(msg.rfind("kiln::frontend::onnx: cut", 0) == 0, msg);
  }
  const std::vector<std::byte> junk(64, std::byte{0xff});
  CHECK(message_of<kx::import_error>([&] { kx::import_bytes(junk, "junk"); }) ==
        "kiln::frontend::onnx: junk is not an ONNX model (the protobuf does not parse: truncated or not ONNX)");
  CHECK(message_of<kiln::error>([] { kx::import_file("/nonexistent/m.onnx"); }) == "kiln::frontend::onnx::import_file: cannot open '/nonexistent/m.onnx': No such file or directory");

  model_builder bad = b;
  bad.g().mutable_initializer(0)->add_float_data(3);
  CHECK(message_of<kx::import_error>([&] { kx::import_model(bad.m, {.check_model = false}); }) ==
        "kiln::frontend::onnx: initializer 'w': float_data holds 3 values for 2 elements");

  model_builder dangling = b;
  dangling.g().mutable_node(0)->set_input(1, "nowhere");
  CHECK(message_of<kx::import_error>([&] { kx::import_model(dangling.m, {.check_model = false}); }) ==
        "kiln::frontend::onnx: node 'Add_1' (Add) input 1 refers to 'nowhere', which no input, initializer or earlier node defines");
  CHECK(message_of<kx::import_error>([&] { kx::import_model(dangling.m); }).rfind("kiln::frontend::onnx: the model is not valid ONNX: ", 0) == 0);

  model_builder strings;
  strings.input("s", {"2"}, ::onnx::TensorProto::STRING);
  strings.node("Identity", {"s"}, {"t"});
  strings.output("t", {"2"}, ::onnx::TensorProto::STRING);
  CHECK(message_of<kx::import_error>([&] { kx::import_model(strings.m); }) ==
        "kiln::frontend::onnx: graph input 's' has element type STRING, which kiln does not support (supported: FLOAT, DOUBLE, "
        "FLOAT16, INT8, UINT8, INT32, INT64, BOOL)");
}

TEST_CASE("a converter's error names the node and operator") {
  model_builder b;
  b.input("x", {"2", "3"});
  b.input("shape", {"2"}, ::onnx::TensorProto::INT64);
  b.node("Reshape", {"x", "shape"}, {"y"}, "r");
  b.output("y", {"3", "2"});
  CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }).rfind(
            "kiln::frontend::onnx: node 'r' (Reshape): input 1 (shape) must be known when the model is imported", 0) == 0);
}

TEST_CASE("Conv and pooling attributes and ranks are checked before use (found by fuzz_onnx)") {
  // A rank-2 weight read as rank 4 was a heap overflow; a zero stride a division by zero.
  auto conv = [](std::vector<std::string> weight, std::vector<std::int64_t> strides) {
    model_builder b;
    b.input("x", {"1", "1", "5", "5"});
    b.input("w", weight);
    auto& n = b.node("Conv", {"x", "w"}, {"y"}, "c");
    b.attr(n, "strides", strides);
    auto* pad = n.add_attribute();
    pad->set_name("auto_pad");
    pad->set_type(::onnx::AttributeProto::STRING);
    pad->set_s("SAME_UPPER");
    b.output("y", {});
    return b.m;
  };
  auto fails = [](const ::onnx::ModelProto& m) { return message_of<kx::import_error>([&] { kx::import_model(m); }); };
  CHECK(fails(conv({"1", "1"}, {1, 1})) == "kiln::frontend::onnx: node 'c' (Conv): the weight must have rank 4 (M, C/group, kernel...), it has rank 2");
  CHECK(fails(conv({"1", "1", "3", "3"}, {0, 1})) == "kiln::frontend::onnx: node 'c' (Conv): attribute 'strides' must be between 1 and 2^31 - 1, has 0");
  CHECK(fails(conv({"1", "1", "3", "3"}, {1, -2})).find("attribute 'strides' must be between 1 and 2^31 - 1, has -2") != std::string::npos);
  CHECK_NOTHROW(kx::import_model(conv({"1", "1", "3", "3"}, {1, 1})));
}

TEST_CASE("Trilu keeps a triangle with a constant mask, ArgMax with select_last_index finds the last extreme") {
  const runtime::tensor x = floats({2, 3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  for (const bool upper : {true, false}) {
    CAPTURE(upper);
    model_builder b(14);
    b.input("x", {"2", "3", "4"});
    b.ints_initializer("k", {1});
    model_builder::attr(b.node("Trilu", {"x", "k"}, {"y"}), "upper", std::int64_t(upper));
    b.output("y", {"2", "3", "4"});
    const runtime::tensor y = run(kx::import_model(b.m), {vm::value(x)}).as_tensor();
    // upper, k = 1: j - i >= 1; lower, k = 1: j - i <= 1.
    const std::vector<float> want = upper ? std::vector<float>{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}
                                          : std::vector<float>{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12};
    const std::vector<float> got = y.to_vector<float>();
    CHECK(std::vector<float>(got.begin(), got.begin() + 12) == want);
    CHECK(std::vector<float>(got.begin() + 12, got.end()) == want);
  }
  {
    model_builder b(14);
    b.input("x", {"4"});
    b.node("Trilu", {"x"}, {"y"}, "t");
    b.output("y", {"4"});
    CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) ==
          "kiln::frontend::onnx: node 't' (Trilu): the input must have rank 2 or more, not 1");
  }
  {
    model_builder b(14);
    b.input("x", {"3", "4"});
    b.ints_initializer("k", {1, 2});
    b.node("Trilu", {"x", "k"}, {"y"}, "t");
    b.output("y", {"3", "4"});
    CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) == "kiln::frontend::onnx: node 't' (Trilu): k must be one integer, got 2");
  }
  // ArgMax / ArgMin over axis 1 of [[1, 3, 3, 0], [2, 2, 0, 0]]: first and last extremes.
  const runtime::tensor a = floats({2, 4}, {1, 3, 3, 0, 2, 2, 0, 0});
  struct arg_case {
    std::string op;
    std::int64_t last;
    std::vector<std::int64_t> want;
  };
  for (const arg_case& a_case : {arg_case{"ArgMax", 0, {1, 0}}, arg_case{"ArgMax", 1, {2, 1}}, arg_case{"ArgMin", 0, {3, 2}},
                                 arg_case{"ArgMin", 1, {3, 3}}}) {
    const std::string& op = a_case.op;
    const std::int64_t last = a_case.last;
    const std::vector<std::int64_t>& want = a_case.want;
    CAPTURE(op);
    CAPTURE(last);
    model_builder b(13);
    b.input("x", {"2", "4"});
    auto& n = b.node(op, {"x"}, {"y"});
    model_builder::attr(n, "axis", std::int64_t(1));
    model_builder::attr(n, "keepdims", std::int64_t(0));
    model_builder::attr(n, "select_last_index", std::int64_t(last));
    b.output("y", {"2"}, ::onnx::TensorProto::INT64);
    CHECK(run(kx::import_model(b.m), {vm::value(a)}).as_tensor().to_vector<std::int64_t>() == want);
  }
}

TEST_CASE("NegativeLogLikelihoodLoss: weights, an ignored target that is out of range, the reductions, errors name the node") {
  // x (2, 3) log-probabilities, targets [2, -1] with ignore_index -1, weights [1, 2, 4].
  const runtime::tensor x = floats({2, 3}, {-1, -2, -3, -4, -5, -6});
  const runtime::tensor target = runtime::tensor::from_values<std::int64_t>({2}, {2, -1});
  struct loss_case {
    const char* reduction;
    std::vector<float> want;
  };
  for (const loss_case& lc : {loss_case{"none", {12, 0}}, loss_case{"sum", {12}}, loss_case{"mean", {3}}}) {
    const char* reduction = lc.reduction;
    CAPTURE(reduction);
    model_builder b(13);
    b.input("x", {"2", "3"});
    b.input("t", {"2"}, ::onnx::TensorProto::INT64);
    b.initializer("w", {3}, {1, 2, 4});
    auto& n = b.node("NegativeLogLikelihoodLoss", {"x", "t", "w"}, {"y"});
    model_builder::attr(n, "reduction", reduction);
    model_builder::attr(n, "ignore_index", std::int64_t(-1));
    b.output("y", std::string(reduction) == "none" ? std::vector<std::string>{"2"} : std::vector<std::string>{});
    CHECK(run(kx::import_model(b.m), {vm::value(x), vm::value(target)}).as_tensor().to_vector<float>() == lc.want);
  }
  auto fails = [](const char* reduction, std::vector<std::string> target_dims, std::vector<std::string> x_dims = {"2", "3"}) {
    model_builder b(13);
    b.input("x", x_dims);
    b.input("t", target_dims, ::onnx::TensorProto::INT64);
    model_builder::attr(b.node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"}, "nll"), "reduction", reduction);
    b.output("y", {});
    return message_of<kx::import_error>([&] { kx::import_model(b.m); });
  };
  CHECK(fails("average", {"2"}) ==
        "kiln::frontend::onnx: node 'nll' (NegativeLogLikelihoodLoss): reduction must be 'none', 'sum' or 'mean', not 'average'");
  CHECK(fails("mean", {"2", "3"}) ==
        "kiln::frontend::onnx: node 'nll' (NegativeLogLikelihoodLoss): the input must be (N, C, d1, ...) and the target (N, d1, ...)");
  CHECK(fails("mean", {"2"}, {"2", "c"}) ==
        "kiln::frontend::onnx: node 'nll' (NegativeLogLikelihoodLoss): the number of classes (dimension 1 of the input) must be static");
}

TEST_CASE("Hardmax marks the first maximum, OneHot counts negative indices from the end, DepthToSpace and SpaceToDepth invert each other") {
  {
    model_builder b(13);
    b.input("x", {"2", "3"});
    b.node("Hardmax", {"x"}, {"y"});
    b.output("y", {"2", "3"});
    CHECK(run(kx::import_model(b.m), {vm::value(floats({2, 3}, {1, 5, 5, 7, 0, 7}))}).as_tensor().to_vector<float>() ==
          std::vector<float>{0, 1, 0, 1, 0, 0});
  }
  {
    model_builder b(11);
    b.input("i", {"3"}, ::onnx::TensorProto::INT64);
    b.initializer("depth", {}, {4});
    b.initializer("values", {2}, {-1, 5});
    b.node("OneHot", {"i", "depth", "values"}, {"y"});
    b.output("y", {"3", "4"});
    const runtime::tensor i = runtime::tensor::from_values<std::int64_t>({3}, {0, -1, 2});
    CHECK(run(kx::import_model(b.m), {vm::value(i)}).as_tensor().to_vector<float>() ==
          std::vector<float>{5, -1, -1, -1, -1, -1, -1, 5, -1, -1, 5, -1});
  }
  {
    model_builder b(13);
    b.input("x", {"1", "8", "2", "3"});
    model_builder::attr(b.node("DepthToSpace", {"x"}, {"s"}), "blocksize", std::int64_t(2));
    model_builder::attr(b.node("SpaceToDepth", {"s"}, {"y"}), "blocksize", std::int64_t(2));
    b.output("y", {"1", "8", "2", "3"});
    std::vector<float> v(48);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = float(k);
    CHECK(run(kx::import_model(b.m), {vm::value(floats({1, 8, 2, 3}, v))}).as_tensor().to_vector<float>() == v);
  }
  auto fails = [](const char* op, std::vector<std::string> dims, std::int64_t block, const char* mode = nullptr) {
    model_builder b(13);
    b.input("x", dims);
    auto& n = b.node(op, {"x"}, {"y"}, "r");
    model_builder::attr(n, "blocksize", block);
    if (mode) model_builder::attr(n, "mode", mode);
    b.output("y", {});
    return message_of<kx::import_error>([&] { kx::import_model(b.m); });
  };
  CHECK(fails("DepthToSpace", {"1", "6", "2", "2"}, 2) ==
        "kiln::frontend::onnx: node 'r' (DepthToSpace): the channels must be a multiple of blocksize^2 = 4");
  CHECK(fails("DepthToSpace", {"1", "8", "2", "2"}, 2, "XYZ") == "kiln::frontend::onnx: node 'r' (DepthToSpace): mode must be 'DCR' or 'CRD', not 'XYZ'");
  CHECK(fails("SpaceToDepth", {"1", "1", "3", "4"}, 2) ==
        "kiln::frontend::onnx: node 'r' (SpaceToDepth): the height and width must be multiples of the block size 2");
  CHECK(fails("SpaceToDepth", {"1", "1", "n", "4"}, 2) ==
        "kiln::frontend::onnx: node 'r' (SpaceToDepth): SpaceToDepth needs static dimensions; fix them with import_options::shapes");
  CHECK(fails("DepthToSpace", {"1", "8", "2", "2"}, 0) == "kiln::frontend::onnx: node 'r' (DepthToSpace): blocksize must be at least 1, got 0");
}

TEST_CASE("CumSum's axis is a constant input, GatherElements gathers along its axis") {
  {
    model_builder b(14);
    b.input("x", {"2", "3"});
    b.ints_initializer("axis", {1});
    auto& n = b.node("CumSum", {"x", "axis"}, {"y"});
    model_builder::attr(n, "reverse", std::int64_t(1));
    b.output("y", {"2", "3"});
    CHECK(run(kx::import_model(b.m), {vm::value(floats({2, 3}, {1, 2, 3, 4, 5, 6}))}).as_tensor().to_vector<float>() ==
          std::vector<float>{6, 5, 3, 15, 11, 6});
  }
  {
    model_builder b(14);
    b.input("x", {"2", "3"});
    b.ints_initializer("axis", {0, 1});
    b.node("CumSum", {"x", "axis"}, {"y"}, "cs");
    b.output("y", {"2", "3"});
    CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) == "kiln::frontend::onnx: node 'cs' (CumSum): axis must be one integer, got 2");
  }
  {
    model_builder b(13);
    b.input("x", {"2", "3"});
    b.input("i", {"2", "2"}, ::onnx::TensorProto::INT64);
    model_builder::attr(b.node("GatherElements", {"x", "i"}, {"y"}), "axis", std::int64_t(1));
    b.output("y", {"2", "2"});
    const runtime::tensor i = runtime::tensor::from_values<std::int64_t>({2, 2}, {2, 0, -1, 1});
    CHECK(run(kx::import_model(b.m), {vm::value(floats({2, 3}, {1, 2, 3, 4, 5, 6})), vm::value(i)}).as_tensor().to_vector<float>() ==
          std::vector<float>{3, 1, 6, 5});
  }
  {
    model_builder b(16);
    b.input("x", {"2", "3"});
    b.input("i", {"2", "1"}, ::onnx::TensorProto::INT64);
    b.input("u", {"2", "1"});
    auto& n = b.node("ScatterElements", {"x", "i", "u"}, {"y"}, "s");
    model_builder::attr(n, "axis", std::int64_t(1));
    model_builder::attr(n, "reduction", "sum");
    b.output("y", {"2", "3"});
    CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) ==
          "kiln::frontend::onnx: node 's' (ScatterElements): reduction must be 'none', 'add', 'mul', 'max' or 'min', not 'sum'");
  }
}

TEST_CASE("Resize takes scales or sizes, Upsample is asymmetric nearest, errors name the node") {
  const runtime::tensor x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  {  // scales: linear, half_pixel
    model_builder b(13);
    b.input("x", {"1", "1", "2", "2"});
    b.initializer("scales", {4}, {1, 1, 2, 2});
    model_builder::attr(b.node("Resize", {"x", "", "scales"}, {"y"}), "mode", "linear");
    b.output("y", {"1", "1", "4", "4"});
    CHECK(run(kx::import_model(b.m), {vm::value(x)}).as_tensor().to_vector<float>() ==
          std::vector<float>{1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  }
  {  // sizes, nearest with align_corners and floor
    model_builder b(13);
    b.input("x", {"1", "1", "2", "2"});
    b.ints_initializer("sizes", {1, 1, 2, 3});
    auto& n = b.node("Resize", {"x", "", "", "sizes"}, {"y"});
    model_builder::attr(n, "coordinate_transformation_mode", "align_corners");
    model_builder::attr(n, "nearest_mode", "floor");
    b.output("y", {"1", "1", "2", "3"});
    CHECK(run(kx::import_model(b.m), {vm::value(x)}).as_tensor().to_vector<float>() == std::vector<float>{1, 1, 2, 3, 3, 4});
  }
  {  // Upsample-9: output[i] = input[floor(i / scale)]
    model_builder b(9);
    b.input("x", {"1", "1", "2", "2"});
    b.initializer("scales", {4}, {1, 1, 1, 3});
    b.node("Upsample", {"x", "scales"}, {"y"});
    b.output("y", {"1", "1", "2", "6"});
    CHECK(run(kx::import_model(b.m), {vm::value(x)}).as_tensor().to_vector<float>() == std::vector<float>{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4});
  }
  const auto fails = [](int opset, bool scales, bool sizes, const char* mode) {
    model_builder b(opset);
    b.input("x", {"1", "1", "2", "2"});
    b.initializer("scales", {4}, {1, 1, 2, 2});
    b.ints_initializer("sizes", {1, 1, 4, 4});
    auto& n = b.node("Resize", {"x", "", scales ? "scales" : "", sizes ? "sizes" : ""}, {"y"}, "rs");
    model_builder::attr(n, "mode", mode);
    b.output("y", {"1", "1", "4", "4"});
    return message_of<kx::import_error>([&] { kx::import_model(b.m); });
  };
  CHECK(fails(13, true, true, "linear") == "kiln::frontend::onnx: node 'rs' (Resize): scales and sizes must not both be given");
  CHECK(fails(13, false, false, "linear") == "kiln::frontend::onnx: node 'rs' (Resize): either scales or sizes must be given");
  CHECK(fails(13, true, false, "area").find("kiln::frontend::onnx: node 'rs' (Resize): image.resize: attribute 'method' must be one of") == 0);
}

TEST_CASE("ConvTranspose: 1-D through 2-D, output_shape sets the padding, bias, errors") {
  {  // 1-D with bias: x [1, 1, 3] and ones [1, 2, 3], stride 2, output_shape 8 (one more than the full 7)
    model_builder b(11);
    b.input("x", {"1", "1", "3"});
    b.initializer("w", {1, 2, 3}, std::vector<float>(6, 1.0f));
    b.initializer("bias", {2}, {0.5f, -1.0f});
    auto& n = b.node("ConvTranspose", {"x", "w", "bias"}, {"y"});
    model_builder::attr(n, "strides", std::vector<std::int64_t>{2});
    model_builder::attr(n, "output_shape", std::vector<std::int64_t>{8});
    b.output("y", {"1", "2", "8"});
    const auto y = run(kx::import_model(b.m), {vm::value(floats({1, 1, 3}, {1, 2, 3}))}).as_tensor();
    CHECK(y.shape() == runtime::shape_vector{1, 2, 8});
    CHECK(y.to_vector<float>() == std::vector<float>{1.5, 1.5, 3.5, 2.5, 5.5, 3.5, 3.5, 0.5, 0, 0, 2, 1, 4, 2, 2, -1});
  }
  const auto fails = [](std::vector<std::string> x, const char* attr, std::vector<std::int64_t> v) {
    model_builder b(11);
    b.input("x", x);
    std::vector<std::int64_t> wd{1, 1};
    for (std::size_t i = 2; i < x.size(); ++i) wd.push_back(2);
    b.initializer("w", wd, std::vector<float>(std::size_t(1) << (x.size() - 2), 1.0f));
    auto& n = b.node("ConvTranspose", {"x", "w"}, {"y"}, "ct");
    if (attr) model_builder::attr(n, attr, v);
    b.output("y", {});
    return message_of<kx::import_error>([&] { kx::import_model(b.m); });
  };
  CHECK(fails({"1", "1", "2", "2", "2"}, nullptr, {}) ==
        "kiln::frontend::onnx: node 'ct' (ConvTranspose): only 1-D and 2-D transposed convolution (rank-3 or rank-4 input) are supported, the input has "
        "rank 5");
  CHECK(fails({"1", "1", "2", "2"}, "strides", {2}) == "kiln::frontend::onnx: node 'ct' (ConvTranspose): attribute 'strides' must have 2 values for a 2-D operation, has 1");
  CHECK(fails({"1", "1", "2", "2"}, "kernel_shape", {3, 3}) ==
        "kiln::frontend::onnx: node 'ct' (ConvTranspose): attribute 'kernel_shape' disagrees with the weight's shape");
  CHECK(fails({"1", "1", "n", "2"}, nullptr, {}) ==
        "kiln::frontend::onnx: node 'ct' (ConvTranspose): ConvTranspose needs static dimensions; fix them with import_options::shapes");
}

TEST_CASE("1-D Conv runs as 2-D with a height of 1: strides, dilation, pads, groups, bias, auto_pad on the one axis") {
  {  // x [1, 2, 6], w [2, 1, 2] (groups 2), stride 2, dilation 2, pads (1, 0), bias
    model_builder b(11);
    b.input("x", {"1", "2", "6"});
    b.initializer("w", {2, 1, 2}, {1, 10, -1, 2});
    b.initializer("bias", {2}, {0.5f, 0});
    auto& n = b.node("Conv", {"x", "w", "bias"}, {"y"});
    model_builder::attr(n, "group", std::int64_t(2));
    model_builder::attr(n, "strides", std::vector<std::int64_t>{2});
    model_builder::attr(n, "dilations", std::vector<std::int64_t>{2});
    model_builder::attr(n, "pads", std::vector<std::int64_t>{1, 0});
    b.output("y", {"1", "2", "3"});
    const std::vector<float> xs{1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
    const auto y = run(kx::import_model(b.m), {vm::value(floats({1, 2, 6}, xs))}).as_tensor();
    // Padded row of channel c: [0, x0..x5]; output j reads padded[2j] and padded[2j + 2].
    std::vector<float> want;
    const float w[2][2] = {{1, 10}, {-1, 2}}, bias[2] = {0.5f, 0};
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 3; ++j) {
        auto at = [&](int p) { return p == 0 ? 0.0f : xs[std::size_t(c * 6 + p - 1)]; };
        want.push_back(w[c][0] * at(2 * j) + w[c][1] * at(2 * j + 2) + bias[c]);
      }
    CHECK(y.shape() == runtime::shape_vector{1, 2, 3});
    CHECK(y.to_vector<float>() == want);
  }
  {  // SAME_LOWER on a length-5 row, kernel 2: one padded element at the start
    model_builder b(11);
    b.input("x", {"1", "1", "5"});
    b.initializer("w", {1, 1, 2}, {1, 1});
    model_builder::attr(b.node("Conv", {"x", "w"}, {"y"}), "auto_pad", "SAME_LOWER");
    b.output("y", {"1", "1", "5"});
    const auto y = run(kx::import_model(b.m), {vm::value(floats({1, 1, 5}, {1, 2, 3, 4, 5}))}).as_tensor();
    CHECK(y.to_vector<float>() == std::vector<float>{1, 3, 5, 7, 9});
  }
  model_builder b(11);
  b.input("x", {"1", "1", "5"});
  b.initializer("w", {1, 1, 2, 2}, {1, 1, 1, 1});
  b.node("Conv", {"x", "w"}, {"y"}, "c");
  b.output("y", {});
  CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) ==
        "kiln::frontend::onnx: node 'c' (Conv): the weight must have rank 3 (M, C/group, kernel...), it has rank 4");
}

TEST_CASE("1-D MaxPool and AveragePool run as 2-D with a height of 1, auto_pad on the one axis") {
  for (const bool average : {false, true}) {
    model_builder b(11);
    b.input("x", {"1", "2", "5"});
    auto& n = b.node(average ? "AveragePool" : "MaxPool", {"x"}, {"y"});
    model_builder::attr(n, "kernel_shape", std::vector<std::int64_t>{2});
    model_builder::attr(n, "strides", std::vector<std::int64_t>{2});
    model_builder::attr(n, "auto_pad", "SAME_UPPER");  // 5 -> 3 windows, one padded element at the end
    b.output("y", {"1", "2", "3"});
    const auto y = run(kx::import_model(b.m), {vm::value(floats({1, 2, 5}, {1, 5, 2, 4, 3, 0, -1, -2, -3, -4}))}).as_tensor();
    CHECK(y.shape() == runtime::shape_vector{1, 2, 3});
    CHECK(y.to_vector<float>() == (average ? std::vector<float>{3, 3, 3, -0.5, -2.5, -4} : std::vector<float>{5, 4, 3, 0, -2, -4}));
  }
  model_builder b(11);
  b.input("x", {"1", "2", "5"});
  model_builder::attr(b.node("MaxPool", {"x"}, {"y"}, "mp"), "kernel_shape", std::vector<std::int64_t>{2, 2});
  b.output("y", {});
  CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) ==
        "kiln::frontend::onnx: node 'mp' (MaxPool): attribute 'kernel_shape' must have 1 value for a 1-D operation, has 2");
}

namespace {

/// Numbers for 3-D tests: distinct, both signs, exact in float.
std::vector<float> ramp(std::size_t n, int mod = 23) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(int(i * 7 % std::size_t(mod)) - mod / 2) / 4;
  return v;
}

/// The extent of one output axis: floor mode, or ONNX's ceil mode (the last window starts inside
/// the input or its leading padding).
std::int64_t out_extent(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, std::int64_t p0, std::int64_t p1, bool ceil) {
  const std::int64_t span = in + p0 + p1 - d * (k - 1) - 1;
  std::int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (o - 1) * s >= in + p0) --o;
  return o;
}

}  // namespace

TEST_CASE("3-D Conv runs as one 2-D convolution over stacked depth planes: strides, dilations, pads, groups, bias") {
  // x [2, 4, 5, 4, 5], w [6, 2, 3, 2, 3] (group 2), strides (2, 1, 2), dilations (1, 2, 1),
  // pads (1, 0, 1, 2, 1, 0), bias; checked against the definition, loop by loop.
  const std::int64_t N = 2, C = 4, D = 5, H = 4, W = 5, O = 6, G = 2, KD = 3, KH = 2, KW = 3;
  const std::int64_t s[3] = {2, 1, 2}, dl[3] = {1, 2, 1}, pb[3] = {1, 0, 1}, pe[3] = {2, 1, 0};
  const std::vector<float> xs = ramp(std::size_t(N * C * D * H * W)), ws = ramp(std::size_t(O * C / G * KD * KH * KW), 13);
  const std::vector<float> bias{0.5f, -1, 2, 0, 0.25f, -0.75f};
  model_builder b(11);
  b.input("x", {"2", "4", "5", "4", "5"});
  b.initializer("w", {O, C / G, KD, KH, KW}, ws);
  b.initializer("bias", {O}, bias);
  auto& n = b.node("Conv", {"x", "w", "bias"}, {"y"});
  model_builder::attr(n, "group", G);
  model_builder::attr(n, "strides", std::vector<std::int64_t>{s[0], s[1], s[2]});
  model_builder::attr(n, "dilations", std::vector<std::int64_t>{dl[0], dl[1], dl[2]});
  model_builder::attr(n, "pads", std::vector<std::int64_t>{pb[0], pb[1], pb[2], pe[0], pe[1], pe[2]});
  const std::int64_t in[3] = {D, H, W}, k[3] = {KD, KH, KW};
  std::int64_t od[3];
  for (int a = 0; a < 3; ++a) od[a] = out_extent(in[a], k[a], s[a], dl[a], pb[a], pe[a], false);
  b.output("y", {"2", "6", std::to_string(od[0]), std::to_string(od[1]), std::to_string(od[2])});
  const auto y = run(kx::import_model(b.m), {vm::value(floats({N, C, D, H, W}, xs))}).as_tensor();
  REQUIRE(y.shape() == runtime::shape_vector{N, O, od[0], od[1], od[2]});
  std::vector<float> want;
  for (std::int64_t bn = 0; bn < N; ++bn)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t z = 0; z < od[0]; ++z)
        for (std::int64_t yy = 0; yy < od[1]; ++yy)
          for (std::int64_t xx = 0; xx < od[2]; ++xx) {
            double acc = bias[std::size_t(o)];
            for (std::int64_t cl = 0; cl < C / G; ++cl)
              for (std::int64_t i = 0; i < KD; ++i)
                for (std::int64_t j = 0; j < KH; ++j)
                  for (std::int64_t l = 0; l < KW; ++l) {
                    const std::int64_t c = o / (O / G) * (C / G) + cl;
                    const std::int64_t pz = z * s[0] - pb[0] + i * dl[0], py = yy * s[1] - pb[1] + j * dl[1], px = xx * s[2] - pb[2] + l * dl[2];
                    if (pz < 0 || pz >= D || py < 0 || py >= H || px < 0 || px >= W) continue;
                    acc += double(xs[std::size_t((((bn * C + c) * D + pz) * H + py) * W + px)]) *
                           ws[std::size_t((((o * (C / G) + cl) * KD + i) * KH + j) * KW + l)];
                  }
            want.push_back(float(acc));
          }
  const std::vector<float> got = y.to_vector<float>();
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));

  model_builder bad(11);
  bad.input("x", {"1", "1", "d", "4", "4"});
  bad.initializer("w", {1, 1, 2, 2, 2}, std::vector<float>(8, 1));
  bad.node("Conv", {"x", "w"}, {"y"}, "c3");
  bad.output("y", {});
  CHECK(message_of<kx::import_error>([&] { kx::import_model(bad.m); }) ==
        "kiln::frontend::onnx: node 'c3' (Conv): a 3-D convolution needs a static depth (input dimension 2), has d");
  const auto conv = [](std::vector<std::int64_t> kernel, std::vector<std::int64_t> pads) {
    model_builder m(11);
    m.input("x", {"1", "1", "4", "4", "4"});
    m.initializer("w", {1, 1, 2, 2, 2}, std::vector<float>(8, 1));
    auto& c = m.node("Conv", {"x", "w"}, {"y"}, "c3");
    model_builder::attr(c, "kernel_shape", kernel);
    model_builder::attr(c, "pads", pads);
    m.output("y", {});
    return message_of<kx::import_error>([&] { kx::import_model(m.m); });
  };
  CHECK(conv({3, 2, 2}, {0, 0, 0, 0, 0, 0}) == "kiln::frontend::onnx: node 'c3' (Conv): the weight's depth 2 is not the kernel's, 3");
  CHECK(conv({2, 2, 2}, {-1, 0, 0, 0, 0, 0}) == "kiln::frontend::onnx: node 'c3' (Conv): pads must be between 0 and 2^31 - 1, has -1");
}

TEST_CASE("3-D MaxPool and AveragePool run as two 2-D pools: pads, strides, ceil mode, padding counted or not") {
  // x [1, 2, 5, 4, 6]; window (2, 3, 2), strides (2, 1, 2), pads (1, 1, 0, 0, 1, 1).
  const std::int64_t C = 2, D = 5, H = 4, W = 6;
  const std::int64_t k[3] = {2, 3, 2}, s[3] = {2, 1, 2}, pb[3] = {1, 1, 0}, pe[3] = {0, 1, 1}, in[3] = {D, H, W};
  const std::vector<float> xs = ramp(std::size_t(C * D * H * W), 37);
  struct variant {
    const char* op;
    bool ceil, count_pad;
  };
  for (const variant v : {variant{"MaxPool", false, false}, variant{"MaxPool", true, false}, variant{"AveragePool", false, false},
                          variant{"AveragePool", false, true}}) {
    CAPTURE(v.op);
    CAPTURE(v.ceil);
    CAPTURE(v.count_pad);
    const bool average = std::string(v.op) == "AveragePool";
    std::int64_t od[3];
    for (int a = 0; a < 3; ++a) od[a] = out_extent(in[a], k[a], s[a], 1, pb[a], pe[a], v.ceil);
    model_builder b(11);
    b.input("x", {"1", "2", "5", "4", "6"});
    auto& n = b.node(v.op, {"x"}, {"y"});
    model_builder::attr(n, "kernel_shape", std::vector<std::int64_t>{k[0], k[1], k[2]});
    model_builder::attr(n, "strides", std::vector<std::int64_t>{s[0], s[1], s[2]});
    model_builder::attr(n, "pads", std::vector<std::int64_t>{pb[0], pb[1], pb[2], pe[0], pe[1], pe[2]});
    if (v.ceil) model_builder::attr(n, "ceil_mode", std::int64_t(1));
    if (v.count_pad) model_builder::attr(n, "count_include_pad", std::int64_t(1));
    b.output("y", {"1", "2", std::to_string(od[0]), std::to_string(od[1]), std::to_string(od[2])});
    const auto y = run(kx::import_model(b.m), {vm::value(floats({1, C, D, H, W}, xs))}).as_tensor();
    REQUIRE(y.shape() == runtime::shape_vector{1, C, od[0], od[1], od[2]});
    std::vector<float> want;
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t z = 0; z < od[0]; ++z)
        for (std::int64_t yy = 0; yy < od[1]; ++yy)
          for (std::int64_t xx = 0; xx < od[2]; ++xx) {
            double best = -1e30, sum = 0;
            std::int64_t valid = 0;
            for (std::int64_t i = 0; i < k[0]; ++i)
              for (std::int64_t j = 0; j < k[1]; ++j)
                for (std::int64_t l = 0; l < k[2]; ++l) {
                  const std::int64_t pz = z * s[0] - pb[0] + i, py = yy * s[1] - pb[1] + j, px = xx * s[2] - pb[2] + l;
                  if (pz < 0 || pz >= D || py < 0 || py >= H || px < 0 || px >= W) continue;
                  const double e = xs[std::size_t(((c * D + pz) * H + py) * W + px)];
                  best = std::max(best, e);
                  sum += e;
                  ++valid;
                }
            // Counting padding, every window lies inside the padded input (no ceil mode here): the
            // divisor is the window's size.
            want.push_back(float(!average ? best : sum / double(v.count_pad ? k[0] * k[1] * k[2] : valid)));
          }
    const std::vector<float> got = y.to_vector<float>();
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  }
}

TEST_CASE("GlobalAveragePool and GlobalMaxPool reduce every spatial axis, at any rank") {
  for (const bool average : {false, true}) {
    model_builder b(11);
    b.input("x", {"1", "2", "2", "1", "3"});
    b.node(average ? "GlobalAveragePool" : "GlobalMaxPool", {"x"}, {"y"});
    b.output("y", {"1", "2", "1", "1", "1"});
    const auto y = run(kx::import_model(b.m), {vm::value(floats({1, 2, 2, 1, 3}, {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6}))}).as_tensor();
    CHECK(y.shape() == runtime::shape_vector{1, 2, 1, 1, 1});
    CHECK(y.to_vector<float>() == (average ? std::vector<float>{3.5f, -3.5f} : std::vector<float>{6, -1}));
  }
}

TEST_CASE("LRN sums squares over neighbouring channels, BatchNormalization in training mode, Dropout in training mode with ratio 0") {
  {
    model_builder b(13);
    b.input("x", {"1", "3", "1", "1"});
    auto& n = b.node("LRN", {"x"}, {"y"});
    model_builder::attr(n, "size", std::int64_t(2));  // channels [c, c + 1]
    b.output("y", {"1", "3", "1", "1"});
    const auto y = run(kx::import_model(b.m), {vm::value(floats({1, 3, 1, 1}, {1, 2, 3}))}).as_tensor().to_vector<float>();
    const std::vector<double> sums{1 + 4, 4 + 9, 9};
    for (std::size_t i = 0; i < 3; ++i) CHECK(y[i] == doctest::Approx(double(i + 1) / std::pow(1.0 + 1e-4 / 2 * sums[i], 0.75)));
  }
  {
    model_builder b(15);
    b.input("x", {"2", "1", "2"});
    b.initializer("s", {1}, {2});
    b.initializer("bias", {1}, {1});
    b.initializer("mean", {1}, {10});
    b.initializer("var", {1}, {4});
    auto& n = b.node("BatchNormalization", {"x", "s", "bias", "mean", "var"}, {"y", "m", "v"});
    model_builder::attr(n, "training_mode", std::int64_t(1));
    b.output("y", {"2", "1", "2"});
    b.output("m", {"1"});
    b.output("v", {"1"});
    const vm::value out = run(kx::import_model(b.m), {vm::value(floats({2, 1, 2}, {1, 3, 5, 7}))});
    const auto y = out.as_tuple()[0].as_tensor().to_vector<float>();  // batch mean 4, variance 5
    for (std::size_t i = 0; i < 4; ++i) CHECK(y[i] == doctest::Approx(2 * (double(2 * i + 1) - 4) / std::sqrt(5 + 1e-5) + 1));
    CHECK(out.as_tuple()[1].as_tensor().to_vector<float>()[0] == doctest::Approx(10 * 0.9 + 4 * 0.1));
    CHECK(out.as_tuple()[2].as_tensor().to_vector<float>()[0] == doctest::Approx(4 * 0.9 + 5 * 0.1));
  }
  for (const float ratio : {0.0f, 0.5f}) {
    model_builder b(13);
    b.input("x", {"3"});
    b.initializer("r", {}, {ratio});
    auto* t = b.g().add_initializer();
    t->set_name("t");
    t->set_data_type(::onnx::TensorProto::BOOL);
    t->add_int32_data(1);
    b.node("Dropout", {"x", "r", "t"}, {"y"}, "d");
    b.output("y", {"3"});
    if (ratio == 0)
      CHECK(run(kx::import_model(b.m), {vm::value(floats({3}, {1, 2, 3}))}).as_tensor().to_vector<float>() == std::vector<float>{1, 2, 3});
    else
      CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) ==
            "kiln::frontend::onnx: node 'd' (Dropout): training mode with a nonzero ratio (random dropout) is not supported; inference ignores dropout");
  }
}

TEST_CASE("Einsum: attention's contractions, implicit outputs, ellipsis, diagonals, sums, errors name the equation") {
  const auto einsum = [](const char* eq, std::vector<std::vector<std::string>> shapes) {
    model_builder b(12);
    std::vector<std::string> names;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      b.input(names.back(), shapes[i]);
    }
    model_builder::attr(b.node("Einsum", names, {"y"}, "e"), "equation", eq);
    b.output("y", {});
    return b;
  };
  std::mt19937 gen(3);
  const auto rand = [&](runtime::shape_vector s) {
    std::uniform_real_distribution<float> u(-1, 1);
    runtime::tensor t = runtime::tensor::empty(s, dtype::float32);
    for (std::int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.data())[i] = u(gen);
    return t;
  };
  const auto close = [](const runtime::tensor& got, const runtime::tensor& want) {
    REQUIRE(got.shape() == want.shape());
    const auto g = got.to_vector<float>(), w = want.to_vector<float>();
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(1e-5));
  };
  {  // q k^T per batch and head
    const auto q = rand({2, 3, 4, 5}), k = rand({2, 3, 6, 5});
    auto b = einsum("bhqd,bhkd->bhqk", {{"2", "3", "4", "5"}, {"2", "3", "6", "5"}});
    close(run(kx::import_model(b.m), {vm::value(q), vm::value(k)}).as_tensor(), kernels::matmul(q, k, false, true));
  }
  {  // implicit output (i, k) and an ellipsis of batch axes
    const auto x = rand({3, 4}), y = rand({4, 5});
    auto b = einsum("ij,jk", {{"3", "4"}, {"4", "5"}});
    close(run(kx::import_model(b.m), {vm::value(x), vm::value(y)}).as_tensor(), kernels::matmul(x, y));
    const auto u = rand({2, 3, 4}), v = rand({2, 4, 5});
    auto e = einsum("...ij,...jk->...ik", {{"2", "3", "4"}, {"2", "4", "5"}});
    close(run(kx::import_model(e.m), {vm::value(u), vm::value(v)}).as_tensor(), kernels::matmul(u, v));
  }
  {  // a diagonal, summed: the trace of each matrix
    auto b = einsum("bii->b", {{"2", "2", "2"}});
    CHECK(run(kx::import_model(b.m), {vm::value(floats({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}))}).as_tensor().to_vector<float>() ==
          std::vector<float>{5, 13});
  }
  {  // an outer product, transposed
    auto b = einsum("i,j->ji", {{"2"}, {"3"}});
    CHECK(run(kx::import_model(b.m), {vm::value(floats({2}, {1, 2})), vm::value(floats({3}, {1, 10, 100}))}).as_tensor().to_vector<float>() ==
          std::vector<float>{1, 2, 10, 20, 100, 200});
  }
  const auto fails = [&](const char* eq, std::vector<std::vector<std::string>> shapes) {
    auto b = einsum(eq, shapes);
    return message_of<kx::import_error>([&] { kx::import_model(b.m); });
  };
  CHECK(fails("i,i,i", {{"2"}, {"2"}, {"2"}}) == "kiln::frontend::onnx: node 'e' (Einsum): Einsum of more than two operands is not supported");
  CHECK(fails("ij", {{"2"}}) == "kiln::frontend::onnx: node 'e' (Einsum): the term 'ij' does not match an operand of rank 1");
  CHECK(fails("i,j->k", {{"2"}, {"3"}}) == "kiln::frontend::onnx: node 'e' (Einsum): the output label 'k' is in no operand");
  CHECK(fails("ij,jk", {{"2", "3"}, {"4", "5"}}) == "kiln::frontend::onnx: node 'e' (Einsum): label extents differ between the operands: 3 and 4");
  CHECK(fails("i1", {{"2", "2"}}) == "kiln::frontend::onnx: node 'e' (Einsum): unexpected character '1' in the equation 'i1'");
}

TEST_CASE("external data: tensors read from files beside the model, bad locations, sizes and files are errors naming them") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln_external_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "weights");
  const auto write = [](const std::filesystem::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; };
  const std::vector<float> w{1, 2, 3, 4};
  std::string blob = "pad!";  // 4 bytes before the tensor
  blob.append(reinterpret_cast<const char*>(w.data()), 16);
  write(dir / "weights" / "w.bin", blob);
  const auto model = [&](const std::string& location, const std::string& offset, const std::string& length) {
    model_builder b(13);
    b.input("x", {"2", "2"});
    auto* t = b.g().add_initializer();
    t->set_name("w");
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(2);
    t->add_dims(2);
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    const auto entry = [&](const char* k, const std::string& v) {
      if (v.empty()) return;
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    entry("location", location);
    entry("offset", offset);
    entry("length", length);
    b.node("Add", {"x", "w"}, {"y"});
    b.output("y", {"2", "2"});
    write(dir / "model.onnx", b.m.SerializeAsString());
    return b;
  };
  model("weights/w.bin", "4", "16");
  CHECK(run(kx::import_file(dir / "model.onnx"), {vm::value(floats({2, 2}, {10, 20, 30, 40}))}).as_tensor().to_vector<float>() ==
        std::vector<float>{11, 22, 33, 44});
  const auto b = model("weights/w.bin", "4", "");  // no length: to the end of the file
  CHECK(run(kx::import_file(dir / "model.onnx"), {vm::value(floats({2, 2}, {0, 0, 0, 0}))}).as_tensor().to_vector<float>() == w);
  const auto bytes = b.bytes();
  CHECK(message_of<kx::import_error>([&] { kx::import_bytes(bytes); }) ==
        "kiln::frontend::onnx: model bytes: tensor 'w': its data is stored outside the model file (external data); import the model with "
        "import_file, or give import_options::external_data_dir");
  kx::import_options opts;
  opts.external_data_dir = dir;
  CHECK(run(kx::import_bytes(bytes, "model bytes", opts), {vm::value(floats({2, 2}, {0, 0, 0, 0}))}).as_tensor().to_vector<float>() == w);
  const auto fails = [&](const std::string& location, const std::string& offset, const std::string& length) {
    model(location, offset, length);
    return message_of<kx::import_error>([&] { kx::import_file(dir / "model.onnx"); });
  };
  const std::string at = "kiln::frontend::onnx: '" + (dir / "model.onnx").string() + "': tensor 'w': ";
  CHECK(fails("weights/w.bin", "8", "16") == at + "external data '" + (dir / "weights" / "w.bin").string() + "' has 20 bytes, fewer than offset 8 + length 16");
  CHECK(fails("weights/none.bin", "", "") ==
        at + "cannot open its external data file '" + (dir / "weights" / "none.bin").string() + "': No such file or directory");
  // A link is followed only as far as the model's folder: one that leads out is refused, whatever it points to.
  const std::filesystem::path outside = dir.string() + "_outside.bin";
  write(outside, blob);
  std::filesystem::create_symlink(outside, dir / "weights" / "link.bin");
  CHECK(fails("weights/link.bin", "4", "16") == at + "external data location 'weights/link.bin' is a link to '" +
                                                     std::filesystem::canonical(outside).string() + "', outside the model's folder '" +
                                                     std::filesystem::canonical(dir).string() +
                                                     "'; external data is read only from inside the model's folder");
  std::filesystem::create_symlink("/etc/passwd", dir / "passwd");
  CHECK(fails("passwd", "", "").find("external data location 'passwd' is a link to '/etc/passwd', outside the model's folder") !=
        std::string::npos);
  std::filesystem::create_symlink("w.bin", dir / "weights" / "inside.bin");  // a link within the folder is read
  model("weights/inside.bin", "4", "16");
  CHECK(run(kx::import_file(dir / "model.onnx"), {vm::value(floats({2, 2}, {0, 0, 0, 0}))}).as_tensor().to_vector<float>() == w);
  CHECK(fails(".", "", "") == at + "external data location '.' names a directory ('" + (dir / ".").string() + "')");
  CHECK(fails("weights", "", "") == at + "external data location 'weights' names a directory ('" + (dir / "weights").string() + "')");
  const std::string escaped = fails("weights/\x1b[2J", "", "");  // a terminal escape in the location is shown escaped
  CHECK(escaped.find("weights/\\x1b[2J': No such file or directory") != std::string::npos);
  CHECK(escaped.find('\x1b') == std::string::npos);
  std::filesystem::remove(outside);
  CHECK(fails("../w.bin", "", "") == at + "external data location '../w.bin' leaves the model's folder");
  CHECK(fails("/etc/passwd", "", "") == at + "external data location '/etc/passwd' must be a path relative to the model's folder");
  CHECK(fails("weights/w.bin", "x", "") == at + "external data offset 'x' is not a number");
  CHECK(fails("weights/w.bin", "2", "") == "kiln::frontend::onnx: '" + (dir / "model.onnx").string() +
                                                "': initializer 'w': raw_data holds 18 bytes for 4 elements of 4 bytes");
  std::filesystem::remove_all(dir);
}

TEST_CASE("float16 arithmetic computes in float32 and rounds back, storage operators keep float16") {
  model_builder b(13);
  b.input("x", {"3"}, ::onnx::TensorProto::FLOAT16);
  b.input("y", {"3"}, ::onnx::TensorProto::FLOAT16);
  b.node("Max", {"x", "y"}, {"m"});
  b.node("Reshape", {"m", "shape"}, {"z"});
  b.ints_initializer("shape", {3, 1});
  b.output("z", {"3", "1"}, ::onnx::TensorProto::FLOAT16);
  const ir::ir_module m = kx::import_model(b.m);
  const std::string text = ir::print(m);
  CHECK(text.find("R.maximum(") != std::string::npos);
  CHECK(text.find("dtype=\"float32\"") != std::string::npos);
  CHECK(text.find("R.Tensor((3, 1), \"float16\")") != std::string::npos);
  const auto half = [](std::vector<float> v) {
    return kernels::cast(runtime::tensor::from_values<float>({std::int64_t(v.size())}, v), dtype::float16);
  };
  const runtime::tensor z = run(m, {vm::value(half({1, -2, 3.5})), vm::value(half({0.5, -1, 7}))}).as_tensor();
  CHECK(z.type() == dtype::float16);
  CHECK(kernels::cast(z, dtype::float32).to_vector<float>() == std::vector<float>{1, -1, 7});
}

TEST_CASE("Mod on integers: Python's sign with fmod 0, C's with fmod 1, floating-point Mod needs fmod 1") {
  const runtime::tensor x = runtime::tensor::from_values<std::int32_t>({4}, {7, -7, 7, -7});
  const runtime::tensor y = runtime::tensor::from_values<std::int32_t>({4}, {3, 3, -3, -3});
  for (const std::int64_t fmod : {0, 1}) {
    CAPTURE(fmod);
    model_builder b(13);
    b.input("x", {"4"}, ::onnx::TensorProto::INT32);
    b.input("y", {"4"}, ::onnx::TensorProto::INT32);
    model_builder::attr(b.node("Mod", {"x", "y"}, {"z"}), "fmod", fmod);
    b.output("z", {"4"}, ::onnx::TensorProto::INT32);
    const std::vector<std::int32_t> want = fmod ? std::vector<std::int32_t>{1, -1, 1, -1} : std::vector<std::int32_t>{1, 2, -2, -1};
    CHECK(run(kx::import_model(b.m), {vm::value(x), vm::value(y)}).as_tensor().to_vector<std::int32_t>() == want);
  }
  for (const std::int64_t fmod : {0, 1}) {
    model_builder b(13);
    b.input("x", {"4"});
    b.input("y", {"4"});
    model_builder::attr(b.node("Mod", {"x", "y"}, {"z"}, "m"), "fmod", fmod);
    b.output("z", {"4"});
    if (fmod)
      CHECK(run(kx::import_model(b.m), {vm::value(floats({4}, {7.5, -7.5, 7.5, -7.5})), vm::value(floats({4}, {2, 2, -2, -2}))})
                .as_tensor()
                .to_vector<float>() == std::vector<float>{1.5, -1.5, 1.5, -1.5});
    else
      CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) == "kiln::frontend::onnx: node 'm' (Mod): fmod must be 1 for floating-point inputs");
  }
}

TEST_CASE("an unnamed node is named in messages by its index in the graph") {
  model_builder b(13);
  b.input("x", {"4"});
  b.input("y", {"4"});
  b.node("Add", {"x", "y"}, {"s"}, "add");
  b.node("Mod", {"s", "y"}, {"z"}).clear_name();
  b.output("z", {"4"});
  CHECK(message_of<kx::import_error>([&] { kx::import_model(b.m); }) ==
        "kiln::frontend::onnx: node '#1' (Mod): fmod must be 1 for floating-point inputs");
}
