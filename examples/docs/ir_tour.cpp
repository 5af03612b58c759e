// SPDX-License-Identifier: Apache-2.0
// docs/ir.md shows this program (tests/docs/check_snippets.py); CTest builds and runs it.
#include <kiln/ir/ir.hpp>

#include <iostream>

int main() {
  namespace ir = kiln::ir;

  ir::size_var n = ir::make_size_var("n");                      // a dynamic batch size
  ir::var x = ir::make_var("x", ir::tensor_type({n, ir::make_int(784)}, kiln::dtype::float32));
  ir::var w = ir::make_var("w", ir::tensor_type({784, 10}, kiln::dtype::float32));

  ir::block_builder bb;
  bb.function("main", {x, w}, [&] {
    return bb.dataflow([&] {
      ir::var h = bb.emit(ir::call_op("matmul", {x, w}));        // type inferred: (n, 10)
      return bb.emit_output(ir::call_op("nn.softmax", {h}));
    });
  });
  ir::verify_or_throw(bb.module());
  std::string text = ir::print(bb.module());
  ir::ir_module back = ir::parse_module(text);                 // structurally equal to the original

  std::cout << text;
  return ir::structural_equal(back, bb.module()) ? 0 : 1;
}
