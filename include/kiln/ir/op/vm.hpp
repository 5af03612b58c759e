// SPDX-License-Identifier: Apache-2.0
/// \file
/// Operators the VM code generator reads directly (Relax's `R.vm.*` and friends):
///
///     R.call_builtin_with_ctx(R.ExternFunc("vm.builtin.x"), (args...), type_args=T)
///         calls a VM built-in with the VM itself (`%vm`) as its first argument
///     R.null_value()       the null value (an absent optional argument of a kernel)
///     R.vm.kill_object(x)  clears the register holding x, releasing what it references
#pragma once

#include <kiln/ir/op/infer.hpp>

namespace kiln::ir::detail {

inline void register_vm_ops(op_registry& r) {
  op_node::info with_ctx{"call_builtin_with_ctx",
                         {"func", "args"},
                         {},
                         [](const call_context& ctx) {
                           if (!isa<extern_func_node>(ctx.args()[0])) ctx.fail_arg(0, "must name a built-in (R.ExternFunc(\"vm.builtin....\"))");
                           if (!isa<tuple_type_node>(ctx.arg_type(1))) ctx.fail_arg(1, "must be a tuple of the built-in's arguments");
                           return ctx.type_args()[0];
                         },
                         op_pattern::opaque,
                         "calls a VM built-in, passing the VM context first; the result type is given explicitly"};
  with_ctx.num_type_args = 1;
  r.add(std::move(with_ctx));
  r.add({"null_value", {}, {}, [](const call_context&) { return object_type(); }, op_pattern::opaque, "the null value"});
  r.add({"vm.kill_object", {"x"}, {}, [](const call_context&) { return tuple_type({}); }, op_pattern::opaque,
         "clears the register holding the value"});
}

}  // namespace kiln::ir::detail
