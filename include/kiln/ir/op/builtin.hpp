// SPDX-License-Identifier: Apache-2.0
/// \file
/// Registers kiln's built-in operators (included by `op.hpp`; see `op_registry::global`).
#pragma once

#include <kiln/ir/op_registry.hpp>
#include <kiln/ir/op/elementwise.hpp>
#include <kiln/ir/op/linalg.hpp>
#include <kiln/ir/op/manipulate.hpp>
#include <kiln/ir/op/nn.hpp>
#include <kiln/ir/op/reduce.hpp>

namespace kiln::ir::detail {

/// `call_tir(kernel, (args...))` with the output type as its single type argument.
inline type infer_call_tir(const call_context& ctx) {
  auto* gv = dyn_cast<global_var_node>(ctx.args()[0]);
  if (!gv) ctx.fail_arg(0, "must name a kernel function of the module (cls.name)");
  if (!isa<tuple_type_node>(ctx.arg_type(1))) ctx.fail_arg(1, "must be a tuple of the kernel's inputs");
  const type& out = ctx.type_args()[0];
  if (!isa<tensor_type_node>(out) && !isa<tuple_type_node>(out))
    ctx.fail("the output type must be a tensor or a tuple of tensors, not " + to_string(out));
  if (isa<func_type_node>(gv->checked_type)) {
    std::vector<expr> inputs;
    if (auto* literal = dyn_cast<tuple_node>(ctx.args()[1])) inputs = literal->fields;
    else  // a tuple-typed value: read its fields
      for (std::size_t i = 0; i < static_cast<const tuple_type_node&>(*ctx.arg_type(1)).fields.size(); ++i)
        inputs.push_back(make_tuple_get_item(ctx.args()[1], static_cast<int>(i)));
    type computed = infer_call_result(gv->checked_type, inputs, "call_tir to '" + gv->name + "'");
    std::string why;
    std::vector<std::pair<const size_var_node*, prim_expr>> binds;
    if (!bind_dims(computed, out, binds, why))
      ctx.fail("the output type " + to_string(out) + " does not match what kernel '" + gv->name + "' writes, " + to_string(computed) +
               ": " + why);
  }
  return out;
}

inline void register_builtin_ops(op_registry& r) {
  register_elementwise_ops(r);
  register_linalg_ops(r);
  register_reduce_ops(r);
  register_manipulate_ops(r);
  register_nn_ops(r);
  op_node::info tir{"call_tir", {"kernel", "args"}, {}, infer_call_tir, op_pattern::opaque,
                    "calls a kernel function in destination-passing style; the result type is given explicitly"};
  tir.num_type_args = 1;
  r.add(std::move(tir));
}

}  // namespace kiln::ir::detail
