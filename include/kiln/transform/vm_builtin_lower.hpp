// SPDX-License-Identifier: Apache-2.0
/// \file
/// `vm_builtin_lower`: memory operators and closures become calls of the VM's built-ins (Relax's
/// VMBuiltinLower / LowerRuntimeBuiltin):
///
///     R.memory.alloc_storage(size)                 -> R.call_builtin_with_ctx(R.ExternFunc("vm.builtin.alloc_storage"),
///                                                         (size, R.prim_value(0), R.str("uint8"), R.str("global")))
///     R.memory.alloc_tensor(s, shape, offset=k, dtype=d) -> R.call_packed("vm.builtin.alloc_tensor", s, R.prim_value(k), shape, R.str(d))
///     R.builtin.alloc_tensor(shape, dtype=d)       -> a storage of its own, then a tensor at offset 0 in it
///     R.memory.kill_tensor(x), R.memory.kill_storage(x) -> R.vm.kill_object(x)
///     R.make_closure(cls.f, (c...))                -> R.call_packed("vm.builtin.make_closure", cls.f, c...)
///     f(args...) where f is a closure value         -> R.call_builtin_with_ctx(R.ExternFunc("vm.builtin.invoke_closure"), (f, args...))
#pragma once

#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/properties.hpp>

namespace kiln::transform {

struct vm_builtin_lower {
  static constexpr std::string_view name = "vm_builtin_lower";
  static constexpr std::string_view description =
      "Lowers memory and built-in operators to the VM's built-in functions.";
  static constexpr int opt_level = 0;
  using needs = property_list<properties::explicit_outputs>;
  using establishes = property_list<properties::builtins_lowered>;

  ir::function operator()(const ir::function& f) const {
    auto on_body = [](const ir::expr& e) { return e; };
    auto on_binding = [](const ir::binding& b, std::vector<ir::binding>& out) {
      auto* c = ir::dyn_cast<ir::call_node>(b.value);
      if (!c) return out.push_back(b);
      const ir::op_node* o = ir::dyn_cast<ir::op_node>(c->callee);
      const std::string op = o ? o->name() : std::string();
      auto with = [&](ir::expr v) { out.push_back({b.variable, std::move(v), b.cast_type}); };
      if (op == "builtin.alloc_tensor") {
        const dtype dt = c->attrs.find("dtype")->as<dtype>();
        ir::var s = ir::make_var(b.variable->name_hint + "_storage", ir::object_type());
        out.push_back({s, alloc_storage(c->args[0], c->attrs.get_or<std::int64_t>("device_index", 0), std::string(kiln::name(dt)), "global"), {}});
        with(alloc_tensor(s, 0, c->args[0], dt, b.variable->checked_type));
      } else if (op == "memory.alloc_storage") {
        with(alloc_storage(c->args[0], c->attrs.get_or<std::int64_t>("device_index", 0), "uint8", c->attrs.get_or<std::string>("scope", "global")));
      } else if (op == "memory.alloc_tensor") {
        with(alloc_tensor(c->args[0], c->attrs.get_or<std::int64_t>("offset", 0), c->args[1], c->attrs.find("dtype")->as<dtype>(), b.variable->checked_type));
      } else if (op == "memory.kill_tensor" || op == "memory.kill_storage") {
        with(ir::call_op("vm.kill_object", {c->args[0]}));
      } else if (op == "make_closure") {
        std::vector<ir::expr> args{c->args[0]};
        for (auto& x : static_cast<const ir::tuple_node&>(*c->args[1]).fields) args.push_back(x);
        with(ir::call_extern("vm.builtin.make_closure", std::move(args), c->checked_type));
      } else if (!o && ir::isa<ir::var_node>(c->callee)) {
        std::vector<ir::expr> args{c->callee};
        args.insert(args.end(), c->args.begin(), c->args.end());
        with(detail::call_builtin_with_ctx("vm.builtin.invoke_closure", std::move(args), c->checked_type));
      } else {
        out.push_back(b);
      }
    };
    return detail::with_body(f, detail::rewrite_seq(f->body, on_binding, on_body));
  }

  static ir::expr alloc_storage(const ir::expr& size, std::int64_t device, const std::string& dtype_name, const std::string& scope) {
    return detail::call_builtin_with_ctx("vm.builtin.alloc_storage",
                                         {size, ir::make_prim_value(device), ir::make_string_imm(dtype_name), ir::make_string_imm(scope)},
                                         ir::object_type());
  }
  static ir::expr alloc_tensor(const ir::expr& storage, std::int64_t offset, const ir::expr& shape, dtype dt, const ir::type& t) {
    return ir::call_extern("vm.builtin.alloc_tensor", {storage, ir::make_prim_value(offset), shape, ir::make_string_imm(std::string(kiln::name(dt)))}, t);
  }
};

}  // namespace kiln::transform
