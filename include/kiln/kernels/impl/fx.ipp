// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/fx.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/fx.hpp>

namespace kiln::kernels::detail {

KILN_DECL dims check_fused(std::string_view op, std::span<const tensor> inputs, std::size_t needed, const tensor* out) {
  if (inputs.size() < needed || inputs.empty())
    fail(op, "the expression reads " + std::to_string(needed) + " inputs, " + std::to_string(inputs.size()) + " given");
  if (inputs.size() > max_fused_inputs) fail(op, "at most " + std::to_string(max_fused_inputs) + " inputs, " + std::to_string(inputs.size()) + " given");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) fail(op, "input " + std::to_string(i) + " is undefined");
    if (inputs[i].type() != inputs[0].type())
      fail(op, "input " + std::to_string(i) + " is " + describe_operand(inputs[i]) + " but input 0 is " + describe_operand(inputs[0]) +
                   "; all inputs need one dtype");
  }
  if (!ops::is_floating(inputs[0].type())) fail(op, "inputs must be float32 or float64, got " + describe_operand(inputs[0]));
  const dims shape = broadcast_dims(op, inputs);
  if (out) {
    check_output(op, *out, inputs[0].type(), shape);
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (overlaps_differently(*out, inputs[i]))
        fail(op, "the output " + describe_operand(*out) + " overlaps input " + std::to_string(i) + " in another layout; write into a separate tensor");
  }
  return shape;
}

}  // namespace kiln::kernels::detail
