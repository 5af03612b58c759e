// SPDX-License-Identifier: Apache-2.0
/// \file
/// What both code generators (`vm_codegen`, `cpp_codegen`) read from a lowered module, in one
/// place: which expressions are literals (and what value each is), what kind of call a binding
/// is, and the constant pool that shares tensors with equal contents. The generators differ only
/// in what they write for each.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/ir/printer.hpp>
#include <kiln/support/error.hpp>
#include <kiln/transform/tensor_conversion.hpp>
#include <kiln/vm/value.hpp>

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::codegen {

class codegen_error : public error {
public:
  using error::error;
};

/// How a generator reports a module it cannot handle (the message without the place; the
/// generator adds the function and binding).
using fail_fn = std::function<void(const std::string&)>;

namespace detail {

/// Reports `msg` through `fail`, which must throw; throws itself if it does not.
[[noreturn]] inline void raise(const fail_fn& fail, const std::string& msg) {
  fail(msg);
  throw codegen_error(msg);
}

}  // namespace detail

/// A literal operand of lowered IR.
struct literal {
  enum kind_t {
    constant,  ///< a constant tensor: `tensor`
    value,     ///< a shape, an integer, a float, a bool, a string or null: `v`
    function,  ///< a graph-level function of the module as a value: `name`
    native,    ///< a native function (`R.ExternFunc`) as a value: `name`
  } kind;
  const ir::constant_node* tensor = nullptr;
  vm::value v;
  std::string name;
};

/// `e` as a literal, if it is one. A shape or number that still has size variables, or a kernel
/// function used as a value, is an error (reported through `fail`, which must throw).
inline std::optional<literal> as_literal(const ir::expr& e, const ir::ir_module& m, const fail_fn& fail) {
  switch (e->kind) {
    case ir::node_kind::constant: return literal{literal::constant, static_cast<const ir::constant_node*>(e.get()), {}, {}};
    case ir::node_kind::shape_expr: {
      const auto& values = static_cast<const ir::shape_expr_node&>(*e).values;
      vm::shape_vector dims;
      for (auto& d : values) {
        auto c = ir::as_int(d);
        if (!c)
          detail::raise(fail, "the shape " + ir::to_string(values, [](const ir::size_var_node& v) { return v.name; }, "[", "]") +
               " uses size variables; run vm_shape_lower first");
        dims.push_back(*c);
      }
      return literal{literal::value, nullptr, vm::value::shape(std::move(dims)), {}};
    }
    case ir::node_kind::prim_value: {
      auto& p = static_cast<const ir::prim_value_node&>(*e);
      if (!p.int_value) return literal{literal::value, nullptr, vm::value(p.float_value), {}};
      auto c = ir::as_int(p.int_value);
      if (!c) detail::raise(fail, "the value " + ir::to_string(p.int_value) + " uses size variables; run vm_shape_lower first");
      if (p.dt == dtype::bool_) return literal{literal::value, nullptr, vm::value(*c != 0), {}};
      return literal{literal::value, nullptr, vm::value(*c), {}};
    }
    case ir::node_kind::string_imm:
      return literal{literal::value, nullptr, vm::value(static_cast<const ir::string_imm_node&>(*e).value), {}};
    case ir::node_kind::global_var: {
      const std::string& n = static_cast<const ir::global_var_node&>(*e).name;
      if (!ir::isa<ir::function_node>(m->lookup(n))) detail::raise(fail, "'" + n + "' is a kernel function; it cannot be used as a value");
      return literal{literal::function, nullptr, {}, n};
    }
    case ir::node_kind::extern_func: return literal{literal::native, nullptr, {}, static_cast<const ir::extern_func_node&>(*e).symbol};
    case ir::node_kind::call:
      if (auto* o = ir::dyn_cast<ir::op_node>(static_cast<const ir::call_node&>(*e).callee); o && o->name() == "null_value")
        return literal{literal::value, nullptr, vm::value(), {}};
      return std::nullopt;
    default: return std::nullopt;
  }
}

/// A call of lowered IR, by what the generators make of it.
struct lowered_call {
  enum kind_t {
    builtin_with_ctx,  ///< `R.call_builtin_with_ctx(f, (args...))`: native `symbol` with the VM first
    kill,              ///< `R.vm.kill_object(x)`: `args[0]` is x
    null_value,        ///< `R.null_value()`
    native,            ///< `R.call_packed(symbol, args...)`, a call of an `R.ExternFunc`
    function,          ///< a call of the module's graph-level function `symbol`
    closure,           ///< a call of a function value (`callee`)
  } kind;
  std::string symbol;
  std::span<const ir::expr> args;
  const ir::expr* callee = nullptr;
};

/// What kind of call `c` is. An operator other than the few the VM lowering leaves, or a call of a
/// kernel function, is an error (reported through `fail`, which must throw).
inline lowered_call classify_call(const ir::call_node& c, const ir::ir_module& m, const fail_fn& fail) {
  if (auto* o = ir::dyn_cast<ir::op_node>(c.callee)) {
    const std::string& n = o->name();
    if (n == "call_builtin_with_ctx") {
      auto* t = c.args.size() == 2 ? ir::dyn_cast<ir::tuple_node>(c.args[1]) : nullptr;
      auto* x = c.args.empty() ? nullptr : ir::dyn_cast<ir::extern_func_node>(c.args[0]);
      if (!t || !x) detail::raise(fail, "R.call_builtin_with_ctx takes an R.ExternFunc and a tuple literal of arguments");
      return {lowered_call::builtin_with_ctx, x->symbol, t->fields, nullptr};
    }
    if (n == "vm.kill_object") {
      if (c.args.size() != 1) detail::raise(fail, "R.vm.kill_object takes one argument");
      return {lowered_call::kill, {}, c.args, nullptr};
    }
    if (n == "null_value") return {lowered_call::null_value, {}, {}, nullptr};
    detail::raise(fail, "operator R." + n + " reached code generation; the pipeline must lower it first (legalize_ops, call_tir_rewrite, vm_builtin_lower)");
  }
  if (auto* x = ir::dyn_cast<ir::extern_func_node>(c.callee)) return {lowered_call::native, x->symbol, c.args, nullptr};
  if (auto* g = ir::dyn_cast<ir::global_var_node>(c.callee)) {
    if (!ir::isa<ir::function_node>(m->lookup(g->name))) detail::raise(fail, "'" + g->name + "' is a kernel function; call it through R.call_tir before lowering");
    return {lowered_call::function, g->name, c.args, nullptr};
  }
  return {lowered_call::closure, {}, c.args, &c.callee};
}

/// The constant tensors of an executable being made: each constant node is converted once, and
/// nodes with equal contents share one entry of the pool.
class constant_pool {
public:
  /// The pool index of `c`'s tensor; `add(value)` appends a new one to the executable's pool and
  /// returns its index.
  template <class Add>
  std::int64_t index(const ir::constant_node& c, Add&& add) {
    if (auto it = by_node_.find(&c); it != by_node_.end()) return it->second;
    for (auto& [a, idx] : by_content_)
      if (a == c.data) return by_node_[&c] = idx;
    const std::int64_t idx = add(vm::value(transform::to_tensor(c.data)));
    by_content_.emplace_back(c.data, idx);
    return by_node_[&c] = idx;
  }

private:
  std::unordered_map<const ir::constant_node*, std::int64_t> by_node_;
  std::vector<std::pair<ir::ndarray, std::int64_t>> by_content_;
};

}  // namespace kiln::codegen
