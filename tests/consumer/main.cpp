// SPDX-License-Identifier: Apache-2.0
// Builds, prints, parses and verifies a module through the installed headers.
#include <kiln/kiln.hpp>

#include <iostream>

int main() {
  using namespace kiln::ir;
  block_builder bb;
  auto x = make_var("x", tensor_type({2, 3}, kiln::dtype::float32));
  bb.function("main", {x}, [&] { return bb.emit(call_op("nn.relu", {x})); });
  ir_module back = parse_module(print(bb.module()));
  verify_or_throw(back);
  if (!structural_equal(bb.module(), back)) return 1;
  std::cout << "consumer: kiln " << kiln::version << " works\n";
  return 0;
}
