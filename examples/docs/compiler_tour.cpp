// SPDX-License-Identifier: Apache-2.0
// docs/compiler.md shows the regions "tour" and "patterns" of this program
// (tests/docs/check_snippets.py); CTest builds and runs it on a one-layer perceptron.
#include <kiln/kiln.hpp>

#include <iostream>

namespace ir = kiln::ir;
namespace vm = kiln::vm;

/// A pass of the user's own, registered by name so that pipeline text can name it.
struct my_pass {
  static constexpr std::string_view name = "my_pass";
  ir::ir_module operator()(const ir::ir_module& m) const { return ir::with_module_attrs(m, {{"seen_by_my_pass", 1}}); }
};
using my_static_pipeline = kiln::sequential<my_pass, kiln::transform::default_pipeline>;

/// The user's own kernel, destination-passing as kiln's are: out = relu(x w + b), written into
/// its last argument.
void dense_relu(const kiln::runtime::tensor& x, const kiln::runtime::tensor& w, const kiln::runtime::tensor& b, kiln::runtime::tensor out) {
  const std::int64_t n = x.shape()[0], k = x.shape()[1], m = w.shape()[1];
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      float acc = b.data<float>()[j];
      for (std::int64_t p = 0; p < k; ++p) acc += x.data<float>()[i * k + p] * w.data<float>()[p * m + j];
      out.data<float>()[i * m + j] = acc > 0 ? acc : 0;
    }
}

const char* text = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32"), w1: R.Tensor((4, 8), "float32"), b1: R.Tensor((8,), "float32")) -> R.Tensor((n, 8), "float32"):
        with R.dataflow():
            h: R.Tensor((n, 8), "float32") = R.matmul(x, w1)
            y: R.Tensor((n, 8), "float32") = R.nn.relu(R.add(h, b1))
            R.output(y)
        return y
)";

int main() {
  kiln::pass_registry<ir::ir_module>::global().add<my_pass>();
  using kiln::runtime::tensor;
  const tensor x = tensor::from_values<float>({3, 4}, std::vector<float>(12, 0.5f)),
               w1 = tensor::from_values<float>({4, 8}, std::vector<float>(32, 0.25f)),
               b1 = tensor::from_values<float>({8}, std::vector<float>(8, -0.25f));
  // [tour]
  ir::ir_module m = ir::parse_module(text);                       // or built with ir::block_builder
  vm::executable ex = kiln::compile(m);                           // the design's tvm.compile / relax.build
  vm::virtual_machine machine(ex, {}, kiln::vm::kernel_registry());
  vm::value y = machine.invoke("main", x, w1, b1);                // tensors in, tensors out

  kiln::pass_context ctx(0);                                      // opt level, instruments, config as usual
  ctx.set_instruments({kiln::instrument(kiln::pass_timing{}), kiln::instrument(kiln::verify_ir{})});
  kiln::pass_context_scope scope(ctx);
  vm::executable ex0 = kiln::compile(m, {.pipeline = "my_pass,kiln.default"});   // any textual pipeline
  vm::executable ex1 = kiln::compile(m, my_static_pipeline{}, ctx);              // or a static one
  // [tour]

  kiln::vm::kernel_registry().add("my.dense_relu", &dense_relu);
  // [patterns]
  using namespace kiln::transform::patterns;
  const pattern dense = is_op("nn.relu")(is_op("add")(is_op("matmul")("x", "w"), wildcard("b")).commutative());
  std::cout << dense << "\n";  // nn.relu(add(matmul(x, w), b) commutative)
  kiln::transform::rewrite_rule r{"my_dense", dense, [](const kiln::transform::match_result& match, kiln::transform::rewrite_context&) {
    // The replacement (a null expr declines): a call of the kernel my.dense_relu registered above.
    return ir::call_op("call_dps_packed", {ir::make_extern_func("my.dense_relu"), ir::make_tuple({match["x"], match["w"], match["b"]})}, {},
                       {match.root()->checked_type});
  }};
  ir::ir_module mine = kiln::transform::rewrite_bindings(m, {r});
  vm::value y_mine = vm::virtual_machine(kiln::compile(mine), {}, kiln::vm::kernel_registry()).invoke("main", x, w1, b1);
  // [patterns]
  const bool rewritten = ir::print(mine).find("my.dense_relu") != std::string::npos &&
                         y_mine.as_tensor().to_vector<float>() == y.as_tensor().to_vector<float>();
  const std::vector<float> got = y.as_tensor().to_vector<float>();  // relu(4 * 0.5 * 0.25 - 0.25) = 0.25
  std::cout << got.size() << " outputs, the first " << got[0] << "\n";
  return got.size() == 24 && got[0] == 0.25f && ex0.num_instructions() > 0 && ex1.num_instructions() > 0 && rewritten ? 0 : 1;
}
