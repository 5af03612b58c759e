// SPDX-License-Identifier: Apache-2.0
// The reference evaluator: the oracle of the compiler tests must itself be right. It is checked
// against the kernels called by hand, and on its errors.
#include <kiln/interpreter/reference_evaluator.hpp>
#include <kiln/kernels/kernels.hpp>
#include <kiln/transform/default_pipeline.hpp>

#include "../ir/models.hpp"
#include "../transform/helpers.hpp"

using namespace kiln;
using namespace kiln_test;
using runtime::tensor;

namespace {
tensor pattern(runtime::shape_vector shape, float scale) {
  tensor t = tensor::empty(shape, dtype::float32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * float((i * 7919) % 13 - 6);
  return t;
}
}  // namespace

TEST_CASE("the evaluator runs the MLP as the kernels called by hand do") {
  const ir::ir_module m = make_mlp();
  const tensor x = pattern({3, 784}, 0.01f), w1 = pattern({784, 128}, 0.02f), b1 = pattern({128}, 0.1f), w2 = pattern({128, 10}, -0.03f);
  interpreter::reference_evaluator eval(m);
  const tensor got = eval("main", x, w1, b1, w2).as_tensor();
  const tensor bias2 = tensor::from_values<float>({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  const tensor h = kernels::relu(kernels::add(kernels::matmul(x, w1), b1));
  const tensor want = kernels::log_softmax(kernels::add(kernels::matmul(h, w2), bias2), -1);
  CHECK(got.shape() == want.shape());
  CHECK(got.to_vector<float>() == want.to_vector<float>());
}

TEST_CASE("the evaluator checks arguments as compiled code does") {
  const ir::ir_module m = make_mlp();
  interpreter::reference_evaluator eval(m);
  const tensor w1 = pattern({784, 128}, 0.02f), b1 = pattern({128}, 0.1f), w2 = pattern({128, 10}, -0.03f);
  CHECK(message_of<interpreter::evaluation_error>([&] { eval("main", pattern({3, 783}, 1), w1, b1, w2); }) ==
        "kiln::interpreter::reference_evaluator: in function 'main': parameter 'x' dimension 1 is 783, expected 784");
  CHECK(message_of<interpreter::evaluation_error>([&] { eval("main", tensor::zeros({3, 784}, dtype::float64), w1, b1, w2); }) ==
        "kiln::interpreter::reference_evaluator: in function 'main': parameter 'x' has dtype float64, expected float32");
  CHECK(message_of<interpreter::evaluation_error>([&] { eval("nothing"); }) == "kiln::interpreter::reference_evaluator: the module has no function 'nothing'");
}

TEST_CASE("the evaluator stops runaway recursion with an error") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        y: R.Tensor((), "int64") = cls.f(x)
        return y
)");
  interpreter::reference_evaluator eval(m);
  eval.max_call_depth = 50;
  CHECK(message_of<interpreter::evaluation_error>([&] { eval("f", tensor::zeros({}, dtype::int64)); }) ==
        "kiln::interpreter::reference_evaluator: calls nested deeper than 50 (in 'f')");
}

TEST_CASE("the evaluator runs lowered IR too: each pass's output can be compared with its input") {
  const ir::ir_module m = make_cnn();
  const auto lowered = kiln::run(kiln::sequential<transform::legalize_ops, transform::to_non_dataflow, transform::call_tir_rewrite,
                                                  transform::static_plan_block_memory>{},
                                 m);
  const tensor x = pattern({2, 3, 32, 32}, 0.1f), w1 = pattern({16, 3, 3, 3}, 0.05f), w2 = pattern({16, 1, 3, 3}, 0.05f), fc = pattern({16, 10}, 0.1f);
  const vm::value a = interpreter::reference_evaluator(m)("main", x, w1, w2, fc);
  const vm::value b = interpreter::reference_evaluator(lowered)("main", x, w1, w2, fc);
  CHECK(a.as_tuple()[0].as_tensor().to_vector<float>() == b.as_tuple()[0].as_tensor().to_vector<float>());
  CHECK(a.as_tuple()[1].as_tensor().to_vector<std::int64_t>() == b.as_tuple()[1].as_tensor().to_vector<std::int64_t>());
}

TEST_CASE("one evaluator folding many short-lived constants reads each one's own value") {
  // The ONNX importer folds with one evaluator and drops the constants in between: a constant made
  // where a dropped one was must not be read as the dropped one (it was, through a cache keyed
  // by the node's address: OneHot's take read a folded bool mask as its index).
  interpreter::reference_evaluator eval(ir::ir_module{});
  for (int i = 0; i < 200; ++i) {
    CAPTURE(i);
    const ir::expr mask = ir::call_op("less", {ir::make_constant(ir::ndarray::from<double>(dtype::int64, {3}, {double(i), -1.0, 2.0})),
                                               ir::make_constant(double(i) - 0.5, dtype::int64)});
    (void)eval.evaluate(mask);  // its constants are dropped here
    const ir::expr index = ir::make_constant(double(i % 2), dtype::int64);
    const ir::expr pick = ir::call_op("take", {ir::make_constant(ir::ndarray::from<double>(dtype::int64, {2}, {10.0, 20.0})), index}, {{"axis", std::int64_t{0}}});
    CHECK(eval.evaluate(pick).as_tensor().to_vector<std::int64_t>() == std::vector<std::int64_t>{i % 2 ? 20 : 10});
  }
}
