// SPDX-License-Identifier: Apache-2.0
// kiln's first demo: build a two-layer MLP with a dynamic batch size using the block builder,
// verify it, print it in the text format, parse the text back and check that nothing was lost.
#include <kiln/kiln.hpp>

#include <iostream>

int main() {
  namespace ir = kiln::ir;
  using kiln::dtype;

  // Parameters: x is (n, 784) for a batch size n known only at run time.
  ir::size_var n = ir::make_size_var("n");
  ir::var x = ir::make_var("x", ir::tensor_type({n, ir::make_int(784)}, dtype::float32));
  ir::var w1 = ir::make_var("w1", ir::tensor_type({784, 256}, dtype::float32));
  ir::var b1 = ir::make_var("b1", ir::tensor_type({256}, dtype::float32));
  ir::var w2 = ir::make_var("w2", ir::tensor_type({256, 10}, dtype::float32));
  ir::var b2 = ir::make_var("b2", ir::tensor_type({10}, dtype::float32));

  ir::block_builder bb;
  bb.function(
      "main", {x, w1, b1, w2, b2},
      [&] {
        return bb.dataflow([&] {
          ir::var h = bb.emit(ir::call_op("matmul", {x, w1}));
          h = bb.emit(ir::call_op("add", {h, b1}));
          h = bb.emit(ir::call_op("nn.relu", {h}));
          ir::var logits = bb.emit(ir::call_op("matmul", {h, w2}));
          logits = bb.emit(ir::call_op("add", {logits, b2}));
          return bb.emit_output(ir::call_op("nn.softmax", {logits}, {{"axis", -1}}), "probs");
        });
      },
      {{ir::attr::global_symbol, "main"}});
  ir::ir_module mlp = bb.module();

  ir::verify_or_throw(mlp);
  const std::string text = ir::print(mlp);
  std::cout << text << '\n';

  ir::ir_module back = ir::parse_module(text);
  std::cout << "verified; parse(print(m)) is structurally equal to m: " << std::boolalpha
            << ir::structural_equal(mlp, back) << '\n';

  // Shapes are checked as the IR is built: a mismatched weight is reported at once.
  try {
    ir::call_op("matmul", {x, w2});
  } catch (const ir::type_error& e) {
    std::cout << "as expected, a bad matmul is rejected:\n  " << e.what() << '\n';
  }
  return ir::structural_equal(mlp, back) ? 0 : 1;
}
