// SPDX-License-Identifier: Apache-2.0
/// \file
/// Registers kiln's built-in operators (included by `op.hpp`; see `op_registry::global`).
#pragma once

#include <kiln/ir/op_registry.hpp>
#include <kiln/ir/op/elementwise.hpp>
#include <kiln/ir/op/image.hpp>
#include <kiln/ir/op/linalg.hpp>
#include <kiln/ir/op/manipulate.hpp>
#include <kiln/ir/op/memory.hpp>
#include <kiln/ir/op/nn.hpp>
#include <kiln/ir/op/reduce.hpp>
#include <kiln/ir/op/vm.hpp>

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

/// `call_dps_packed(R.ExternFunc(name), (args...))` with the output type as its type argument.
inline type infer_call_dps_packed(const call_context& ctx) {
  if (!isa<extern_func_node>(ctx.args()[0])) ctx.fail_arg(0, "must name an external function (R.ExternFunc(\"...\"))");
  if (!isa<tuple_type_node>(ctx.arg_type(1))) ctx.fail_arg(1, "must be a tuple of the function's inputs");
  const type& out = ctx.type_args()[0];
  auto is_tensor = [](const type& t) { return isa<tensor_type_node>(t); };
  bool ok = is_tensor(out);
  if (auto* tt = dyn_cast<tuple_type_node>(out)) ok = !tt->fields.empty() && std::all_of(tt->fields.begin(), tt->fields.end(), is_tensor);
  if (!ok) ctx.fail("the output type must be a tensor or a non-empty tuple of tensors, not " + to_string(out));
  return out;
}

/// `make_closure(cls.f, (captured...))`: f with its last parameters bound to the captured values.
inline type infer_make_closure(const call_context& ctx) {
  auto* gv = dyn_cast<global_var_node>(ctx.args()[0]);
  if (!gv) ctx.fail_arg(0, "must name a function of the module (cls.name)");
  auto* ft = dyn_cast<func_type_node>(gv->checked_type);
  auto* captured = dyn_cast<tuple_type_node>(ctx.arg_type(1));
  if (!ft) ctx.fail_arg(0, "must be a function, but '" + gv->name + "' has type " + to_string(gv->checked_type));
  if (!captured) ctx.fail_arg(1, "must be a tuple of the captured values");
  if (captured->fields.size() > ft->params.size())
    ctx.fail("captures " + std::to_string(captured->fields.size()) + " values, but '" + gv->name + "' takes only " +
             std::to_string(ft->params.size()) + " parameters");
  const std::size_t open = ft->params.size() - captured->fields.size();
  for (std::size_t i = 0; i < captured->fields.size(); ++i)
    if (!is_base_of(ft->params[open + i], captured->fields[i]))
      ctx.fail("captured value #" + std::to_string(i + 1) + " has type " + to_string(captured->fields[i]) + ", but parameter #" +
               std::to_string(open + i + 1) + " of '" + gv->name + "' has type " + to_string(ft->params[open + i]));
  return func_type(std::vector<type>(ft->params.begin(), ft->params.begin() + std::ptrdiff_t(open)), ft->ret);
}

inline void register_builtin_ops(op_registry& r) {
  register_elementwise_ops(r);
  register_linalg_ops(r);
  register_reduce_ops(r);
  register_manipulate_ops(r);
  register_nn_ops(r);
  register_image_ops(r);
  op_node::info tir{"call_tir", {"kernel", "args"}, {}, infer_call_tir, op_pattern::opaque,
                    "calls a kernel function in destination-passing style; the result type is given explicitly"};
  tir.num_type_args = 1;
  r.add(std::move(tir));
  op_node::info dps{"call_dps_packed", {"func", "args"}, {}, infer_call_dps_packed, op_pattern::opaque,
                    "calls an external function in destination-passing style: the outputs, of the given type, are allocated "
                    "by the caller and passed after the inputs"};
  dps.num_type_args = 1;
  r.add(std::move(dps));
  r.add({"make_closure", {"func", "captured"}, {}, infer_make_closure, op_pattern::opaque,
         "a closure: the function with its last parameters bound to the captured values"});
  register_memory_ops(r);
  register_vm_ops(r);
}

}  // namespace kiln::ir::detail
