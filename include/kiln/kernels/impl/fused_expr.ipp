// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/fused_expr.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/fused_expr.hpp>

namespace kiln::kernels {

KILN_DECL void fused_expr::run(std::span<const tensor> inputs, const tensor& out) const {
  detail::check_fused("fused", inputs, num_inputs(), &out);
  detail::with_count(inputs.size(), [&]<std::size_t N>() {
    std::array<const tensor*, N + 1> operands;
    operands[0] = &out;
    for (std::size_t i = 0; i < N; ++i) operands[i + 1] = &inputs[i];
    const loop_plan<N + 1> plan(operands);
    visit_dtype("fused", out.type(), [&]<class T>(type_tag<T>) {
      if constexpr (std::is_floating_point_v<T>) evaluate<T, N>(plan);
    });
  });
}

}  // namespace kiln::kernels
