// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/fused.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/vm/impl/kernels.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/fused.hpp>

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

KILN_DECL std::optional<std::vector<std::int64_t>> broadcast_strides(const tensor& t, std::span<const std::int64_t> shape) {
  if (t.ndim() > shape.size()) return std::nullopt;
  std::vector<std::int64_t> s(shape.size(), 0);
  for (std::size_t d = 0; d < t.ndim(); ++d) {
    const std::size_t o = shape.size() - t.ndim() + d;
    if (t.shape(d) == shape[o]) s[o] = shape[o] == 1 ? 0 : t.strides()[d];
    else if (t.shape(d) != 1) return std::nullopt;
  }
  return s;
}

KILN_DECL std::vector<std::vector<std::int64_t>> check_epilogue(std::string_view op, const fused_expr& e, std::span<const tensor> operands, const tensor& out) {
  if (operands.size() + 1 < e.num_inputs())
    fail(op, kiln::detail::concat("the epilogue ", e.to_string(), " reads ", e.num_inputs(), " inputs (x0 is the kernel's result), ",
                                  operands.size() + 1, " given"));
  if (operands.size() + 1 > max_fused_inputs)
    fail(op, kiln::detail::concat("an epilogue takes at most ", max_fused_inputs - 1, " operands, ", operands.size(), " given"));
  if (!ops::is_floating(out.type())) fail(op, "a fused epilogue needs a float32 or float64 result, got " + describe_operand(out));
  std::vector<std::vector<std::int64_t>> strides;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const tensor& t = operands[k];
    const std::string which = kiln::detail::concat("epilogue operand x", k + 1);
    if (!t.defined()) fail(op, which + " is undefined");
    if (t.type() != out.type()) fail(op, kiln::detail::concat(which, " is ", describe_operand(t), " but the result is ", name(out.type())));
    std::optional<std::vector<std::int64_t>> s = broadcast_strides(t, out.shape());
    if (!s) fail(op, kiln::detail::concat(which, " ", describe_operand(t), " does not broadcast to the result's shape ", describe_operand(out)));
    strides.push_back(std::move(*s));
  }
  return strides;
}

}  // namespace kiln::kernels::detail

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
