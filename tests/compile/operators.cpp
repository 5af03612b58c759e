// SPDX-License-Identifier: Apache-2.0
// Every operator with a kernel compiles and runs through the VM, and gives what calling the kernel
// directly gives; the table below must name every operator of the kernel lowering table.
#include <kiln/kernels/kernels.hpp>

#include "helpers.hpp"

#include <set>

using namespace kiln;
using namespace kiln_test;

namespace {

struct op_case {
  std::string op;      ///< the operator this case covers
  std::string params;  ///< the function's parameters
  std::string call;    ///< the call, as text
  std::string result;  ///< its type
};

const std::vector<op_case>& cases() {
  static const std::vector<op_case> all = [] {
    std::vector<op_case> c;
    const std::string xy = R"(x: R.Tensor((3, 5), "float32"), y: R.Tensor((1, 5), "float32"))";
    const std::string f35 = R"(R.Tensor((3, 5), "float32"))", b35 = R"(R.Tensor((3, 5), "bool"))";
    for (const char* n : {"add", "subtract", "multiply", "divide", "floor_divide", "fmod", "power", "maximum", "minimum"})
      c.push_back({n, xy, std::string("R.") + n + "(x, y)", f35});
    for (const char* n : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})
      c.push_back({n, xy, std::string("R.") + n + "(x, y)", b35});
    for (const char* n : {"logical_and", "logical_or"})
      c.push_back({n, R"(a: R.Tensor((3, 5), "bool"), b: R.Tensor((5,), "bool"))", std::string("R.") + n + "(a, b)", b35});
    c.push_back({"logical_not", R"(a: R.Tensor((3, 5), "bool"))", "R.logical_not(a)", b35});
    for (const char* n : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "negative", "abs"})
      c.push_back({n, R"(x: R.Tensor((3, 5), "float32"))", std::string("R.") + n + "(R.abs(x))", f35});
    // The trigonometric and rounding operators, each inside its domain (arguments are in [-1, 1)).
    for (const char* n : {"sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "floor", "ceil", "round"})
      c.push_back({n, R"(x: R.Tensor((3, 5), "float32"))", std::string("R.") + n + "(x)", f35});
    c.push_back({"acosh", R"(x: R.Tensor((3, 5), "float32"))", "R.acosh(R.exp(R.abs(x)))", f35});
    c.push_back({"nn.relu", R"(x: R.Tensor((3, 5), "float32"))", "R.nn.relu(x)", f35});
    c.push_back({"nn.gelu", R"(x: R.Tensor((3, 5), "float32"))", R"(R.nn.gelu(x, approximate="tanh"))", f35});
    c.push_back({"nn.gelu", R"(x: R.Tensor((3, 5), "float32"))", "R.nn.gelu(x)", f35});
    c.push_back({"clip", R"(x: R.Tensor((3, 5), "float32"))", "R.clip(x, min=-0.5, max=0.25)", f35});
    c.push_back({"astype", R"(x: R.Tensor((3, 5), "float32"))", R"(R.astype(x, dtype="int32"))", R"(R.Tensor((3, 5), "int32"))"});
    c.push_back({"where", R"(c: R.Tensor((3, 1), "bool"), x: R.Tensor((3, 5), "float32"), y: R.Tensor((5,), "float32"))", "R.where(c, x, y)", f35});
    for (const char* n : {"sum", "mean", "max", "min", "prod"}) {
      c.push_back({n, R"(x: R.Tensor((3, 5), "float32"))", std::string("R.") + n + "(x, axis=[1], keepdims=True)", R"(R.Tensor((3, 1), "float32"))"});
      c.push_back({n, R"(x: R.Tensor((3, 5), "float32"))", std::string("R.") + n + "(x)", R"(R.Tensor((), "float32"))"});
    }
    for (const char* n : {"argmax", "argmin"}) {
      c.push_back({n, R"(x: R.Tensor((3, 5), "float32"))", std::string("R.") + n + "(x, axis=0)", R"(R.Tensor((5,), "int64"))"});
      c.push_back({n, R"(x: R.Tensor((3, 5), "float32"))", std::string("R.") + n + "(x)", R"(R.Tensor((), "int64"))"});
    }
    c.push_back({"nn.softmax", R"(x: R.Tensor((3, 5), "float32"))", "R.nn.softmax(x, axis=0)", f35});
    c.push_back({"nn.log_softmax", R"(x: R.Tensor((3, 5), "float32"))", "R.nn.log_softmax(x)", f35});
    c.push_back({"nn.layer_norm", R"(x: R.Tensor((3, 5), "float32"), g: R.Tensor((5,), "float32"), b: R.Tensor((5,), "float32"))",
                 "R.nn.layer_norm(x, g, b, epsilon=0.001)", f35});
    c.push_back({"matmul", R"(a: R.Tensor((2, 3, 4), "float32"), b: R.Tensor((4, 5), "float32"))", "R.matmul(a, b)", R"(R.Tensor((2, 3, 5), "float32"))"});
    c.push_back({"nn.conv2d", R"(x: R.Tensor((1, 4, 7, 7), "float32"), w: R.Tensor((6, 2, 3, 3), "float32"))",
                 "R.nn.conv2d(x, w, strides=[2, 2], padding=[1, 0, 1, 2], dilation=[1, 1], groups=2)", R"(R.Tensor((1, 6, 4, 4), "float32"))"});
    c.push_back({"nn.max_pool2d", R"(x: R.Tensor((1, 2, 7, 7), "float32"))", "R.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1], ceil_mode=True)",
                 R"(R.Tensor((1, 2, 4, 4), "float32"))"});
    c.push_back({"nn.avg_pool2d", R"(x: R.Tensor((1, 2, 7, 7), "float32"))", "R.nn.avg_pool2d(x, pool_size=[2, 2], strides=[2, 2], count_include_pad=True)",
                 R"(R.Tensor((1, 2, 3, 3), "float32"))"});
    c.push_back({"nn.adaptive_avg_pool2d", R"(x: R.Tensor((1, 2, 7, 7), "float32"))", "R.nn.adaptive_avg_pool2d(x, output_size=[3, 2])",
                 R"(R.Tensor((1, 2, 3, 2), "float32"))"});
    c.push_back({"nn.global_avg_pool2d", R"(x: R.Tensor((1, 2, 7, 7), "float32"))", "R.nn.global_avg_pool2d(x)", R"(R.Tensor((1, 2, 1, 1), "float32"))"});
    c.push_back({"nn.pad", R"(x: R.Tensor((3, 5), "float32"))", R"(R.nn.pad(x, pad_width=[1, 0, 2, 2], pad_mode="reflect"))", R"(R.Tensor((4, 9), "float32"))"});
    c.push_back({"reshape", R"(x: R.Tensor((3, 5), "float32"))", "R.reshape(x, R.shape([5, -1]))", R"(R.Tensor((5, 3), "float32"))"});
    c.push_back({"permute_dims", R"(x: R.Tensor((3, 5), "float32"))", "R.permute_dims(x, axes=[1, 0])", R"(R.Tensor((5, 3), "float32"))"});
    c.push_back({"broadcast_to", R"(y: R.Tensor((1, 5), "float32"))", "R.broadcast_to(y, R.shape([3, 5]))", f35});
    c.push_back({"concat", xy, "R.concat((x, y, x), axis=0)", R"(R.Tensor((7, 5), "float32"))"});
    c.push_back({"split", R"(x: R.Tensor((3, 5), "float32"))", "R.split(x, indices=[1, 4], axis=1)",
                 R"(R.Tuple(R.Tensor((3, 1), "float32"), R.Tensor((3, 3), "float32"), R.Tensor((3, 1), "float32")))"});
    c.push_back({"strided_slice", R"(x: R.Tensor((3, 5), "float32"))", "R.strided_slice(x, axes=[1], begin=[4], end=[0], strides=[-2])",
                 R"(R.Tensor((3, 2), "float32"))"});
    c.push_back({"take", R"(x: R.Tensor((3, 5), "float32"), i: R.Tensor((4,), "int64"))", "R.take(x, i, axis=1)", R"(R.Tensor((3, 4), "float32"))"});
    c.push_back({"take", R"(x: R.Tensor((3, 5), "float32"), i: R.Tensor((2, 2), "int64"))", "R.take(x, i)", R"(R.Tensor((2, 2), "float32"))"});
    c.push_back({"gather_elements", R"(x: R.Tensor((3, 5), "float32"), i: R.Tensor((3, 4), "int64"))", "R.gather_elements(x, i, axis=1)",
                 R"(R.Tensor((3, 4), "float32"))"});
    c.push_back({"gather_elements", R"(x: R.Tensor((5, 3), "int32"), i: R.Tensor((2, 3), "int32"))", "R.gather_elements(x, i, axis=-2)",
                 R"(R.Tensor((2, 3), "int32"))"});
    c.push_back({"scatter_elements", R"(x: R.Tensor((3, 5), "float32"), i: R.Tensor((3, 2), "int64"), u: R.Tensor((3, 2), "float32"))",
                 R"(R.scatter_elements(x, i, u, axis=1, reduction="add"))", R"(R.Tensor((3, 5), "float32"))"});
    c.push_back({"scatter_elements", R"(x: R.Tensor((5, 3), "int32"), i: R.Tensor((2, 3), "int64"), u: R.Tensor((2, 3), "int32"))",
                 "R.scatter_elements(x, i, u)", R"(R.Tensor((5, 3), "int32"))"});
    c.push_back({"nn.conv2d_transpose", R"(x: R.Tensor((1, 4, 3, 5), "float32"), w: R.Tensor((4, 3, 3, 2), "float32"))",
                 "R.nn.conv2d_transpose(x, w, strides=[3, 2], padding=[1, 0, 1, 2], output_padding=[2, 1], groups=2)",
                 R"(R.Tensor((1, 6, 9, 9), "float32"))"});
    c.push_back({"image.resize", R"(x: R.Tensor((1, 2, 3, 4), "float32"))", R"(R.image.resize(x, size=[1, 2, 6, 7], method="linear"))",
                 R"(R.Tensor((1, 2, 6, 7), "float32"))"});
    c.push_back({"image.resize", R"(x: R.Tensor((2, 5), "float64"))",
                 R"(R.image.resize(x, size=[2, 3], scales=[1.0, 0.7], method="cubic", coordinate_transformation_mode="align_corners"))",
                 R"(R.Tensor((2, 3), "float64"))"});
    c.push_back({"image.resize", R"(x: R.Tensor((3, 4), "int32"))",
                 R"(R.image.resize(x, size=[5, 8], method="nearest", coordinate_transformation_mode="asymmetric", rounding_method="floor"))",
                 R"(R.Tensor((5, 8), "int32"))"});
    c.push_back({"image.resize", R"(x: R.Tensor((4, 4), "float32"))",
                 R"(R.image.resize(x, size=[3, 3], roi=[0.1, 0.2, 0.9, 1.2], coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0))",
                 R"(R.Tensor((3, 3), "float32"))"});
    // indices are random in [0, 5): the indexed axes have at least 5 elements
    c.push_back({"gather_nd", R"(x: R.Tensor((5, 6), "float32"), i: R.Tensor((4, 1), "int64"))", "R.gather_nd(x, i)", R"(R.Tensor((4, 6), "float32"))"});
    c.push_back({"gather_nd", R"(x: R.Tensor((2, 5, 5), "int32"), i: R.Tensor((2, 3, 2), "int32"))", "R.gather_nd(x, i, batch_dims=1)",
                 R"(R.Tensor((2, 3), "int32"))"});
    c.push_back({"scatter_nd", R"(x: R.Tensor((5, 3), "float32"), i: R.Tensor((4, 1), "int64"), u: R.Tensor((4, 3), "float32"))",
                 R"(R.scatter_nd(x, i, u, reduction="add"))", R"(R.Tensor((5, 3), "float32"))"});
    c.push_back({"topk", R"(x: R.Tensor((3, 5), "float32"))", "R.topk(x, k=2)", R"(R.Tuple(R.Tensor((3, 2), "float32"), R.Tensor((3, 2), "int64")))"});
    c.push_back({"topk", R"(x: R.Tensor((3, 5), "int32"))", "R.topk(x, k=3, axis=0, largest=False, dtype=\"int32\")",
                 R"(R.Tuple(R.Tensor((3, 5), "int32"), R.Tensor((3, 5), "int32")))"});
    c.push_back({"cumsum", R"(x: R.Tensor((3, 5), "float32"))", "R.cumsum(x, axis=1)", R"(R.Tensor((3, 5), "float32"))"});
    c.push_back({"cumsum", R"(x: R.Tensor((3, 5), "int64"))", "R.cumsum(x, axis=0, exclusive=True, reverse=True)", R"(R.Tensor((3, 5), "int64"))"});
    c.push_back({"cumsum", R"(x: R.Tensor((3, 5), "float64"))", "R.cumsum(x)", R"(R.Tensor((15,), "float64"))"});
    return c;
  }();
  return all;
}

std::string module_text(const op_case& c) {
  return "@I.ir_module\nclass Module:\n    @R.function\n    def main(" + c.params + ") -> " + c.result + ":\n        r: " + c.result + " = " + c.call + "\n        return r\n";
}

}  // namespace

TEST_CASE("every operator with a kernel is covered by a case below") {
  std::set<std::string> covered;
  for (auto& c : cases()) covered.insert(c.op);
  for (const std::string& op : transform::kernel_lowering::global().names())
    if (op.rfind("test.", 0) != 0) CHECK_MESSAGE(covered.count(op), "no compile test for operator R." << op);
}

TEST_CASE("every operator compiles, runs through the VM and matches the evaluator") {
  for (auto& c : cases()) {
    INFO(c.call);
    const ir::ir_module m = ir::parse_module(module_text(c));
    for (unsigned seed : {1u, 2u}) check_against_evaluator(m, "main", arguments_for(m, "main", {}, seed), 2, 0, modes::bytecode);
  }
}

TEST_CASE("every operator in the compiled mode gives what the bytecode gives") {
  // One module with a function per case: one library to build.
  std::string text = "@I.ir_module\nclass Module:\n";
  for (std::size_t i = 0; i < cases().size(); ++i) {
    const op_case& c = cases()[i];
    text += "    @R.function\n    def case_" + std::to_string(i) + "(" + c.params + ") -> " + c.result + ":\n        r: " + c.result + " = " + c.call +
            "\n        return r\n";
  }
  const ir::ir_module m = ir::parse_module(text);
  const vm::executable ex = kiln::compile(m);
  vm::virtual_machine bytecode(ex, {}, vm::kernel_registry());
  vm::virtual_machine compiled(compiled_mode(m), {}, vm::kernel_registry());
  for (std::size_t i = 0; i < cases().size(); ++i) {
    INFO(cases()[i].call);
    const std::string fn = "case_" + std::to_string(i);
    const auto args = arguments_for(m, fn, {}, 3);
    const vm::value got = compiled.invoke_span(fn, args), want = bytecode.invoke_span(fn, args);
    CHECK_MESSAGE(compiled_agrees(compiled_mode(m), got, want), "difference " << max_difference(got, want, true));
  }
}

TEST_CASE("compiled operators give what calling the kernels directly gives") {
  auto run = [](const std::string& params, const std::string& call, const std::string& result, const std::vector<vm::value>& args) {
    const vm::executable ex = kiln::compile(ir::parse_module(module_text({"", params, call, result})));
    vm::virtual_machine machine(ex, {}, vm::kernel_registry());
    return machine.invoke_span("main", args);
  };
  std::mt19937 gen(7);
  const tensor a = random_tensor({3, 5}, dtype::float32, gen), b = random_tensor({5, 4}, dtype::float32, gen), g = random_tensor({5}, dtype::float32, gen);
  CHECK(max_difference(run(R"(x: R.Tensor((3, 5), "float32"), y: R.Tensor((5,), "float32"))", "R.add(x, y)", R"(R.Tensor((3, 5), "float32"))", {a, g}),
                       vm::value(kernels::add(a, g))) == 0);
  CHECK(max_difference(run(R"(x: R.Tensor((3, 5), "float32"), y: R.Tensor((5, 4), "float32"))", "R.matmul(x, y)", R"(R.Tensor((3, 4), "float32"))", {a, b}),
                       vm::value(kernels::matmul(a, b))) == 0);
  CHECK(max_difference(run(R"(x: R.Tensor((3, 5), "float32"))", "R.nn.softmax(x, axis=1)", R"(R.Tensor((3, 5), "float32"))", {a}),
                       vm::value(kernels::softmax(a, 1))) == 0);
  CHECK(max_difference(run(R"(x: R.Tensor((3, 5), "float32"))", "R.sum(x, axis=[0])", R"(R.Tensor((5,), "float32"))", {a}),
                       vm::value(kernels::sum(a, {0}, false))) == 0);
  const tensor img = random_tensor({1, 3, 8, 8}, dtype::float32, gen), w = random_tensor({4, 3, 3, 3}, dtype::float32, gen);
  kernels::conv2d_params p;
  p.padding = {1, 1, 1, 1};
  CHECK(max_difference(run(R"(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32"))", "R.nn.conv2d(x, w, padding=[1])",
                           R"(R.Tensor((1, 4, 8, 8), "float32"))", {img, w}),
                       vm::value(kernels::conv2d(img, w, tensor(), p))) == 0);
}
