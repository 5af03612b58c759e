// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/fused_epilogue.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/fused_epilogue.hpp>

namespace kiln::kernels::detail {

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
