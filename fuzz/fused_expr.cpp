// SPDX-License-Identifier: Apache-2.0
// The fused-expression parser: an expression that parses prints to text that parses to the same
// text, and runs over small float32 and float64 tensors with broadcasting.
#include <kiln/kernels/elementwise.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/transform.hpp>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using kiln::runtime::tensor;
  return kiln_fuzz::guarded([&] {
    const kiln::kernels::fused_expr e = kiln::kernels::fused_expr::parse(kiln_fuzz::text(data, size));
    const std::string printed = e.to_string();
    kiln_fuzz::fuzz_check(kiln::kernels::fused_expr::parse(printed).to_string() == printed, "a printed expression parses back to itself");
    for (kiln::dtype t : {kiln::dtype::float32, kiln::dtype::float64}) {
      std::vector<tensor> inputs;
      for (std::size_t i = 0; i < e.num_inputs(); ++i) {
        const kiln::runtime::shape_vector shape = i % 2 ? kiln::runtime::shape_vector{37} : kiln::runtime::shape_vector{3, 37};
        tensor x = kiln::kernels::cast(tensor::from_values<double>({1}, {0.5 - double(i)}), t);
        inputs.push_back(kiln::kernels::broadcast_to(x, shape));
      }
      (void)e.run(std::span<const tensor>(inputs));
    }
  });
}
