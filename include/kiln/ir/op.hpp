// SPDX-License-Identifier: Apache-2.0
/// \file
/// Operators: the registry with kiln's built-in operators, and `call_op`.
///
/// An operator is registered once, by name, with its argument names, a schema for its attributes
/// (name, kind, default) and a rule that computes the result type of a call from the argument
/// types and attributes. `call_op` looks the operator up, checks and completes the attributes
/// against the schema, runs the rule, and returns the call with its type. Every failure is a
/// `type_error` whose message starts with the operator's name and names the argument at fault.
///
/// The registry is process-wide and thread-safe; user code registers its own operators through
/// `op_registry::global().add(...)`.
#pragma once

#include <kiln/ir/op/builtin.hpp>
#include <kiln/ir/op_registry.hpp>

namespace kiln::ir {

inline op_registry& op_registry::global() {
  static op_registry* r = [] {
    auto* reg = new op_registry;  // never destroyed: ops may be referenced from static IR
    detail::register_builtin_ops(*reg);
    return reg;
  }();
  return *r;
}

/// A call to operator `o`, with attributes checked against its schema and the type inferred.
inline expr call_op(const op& o, std::vector<expr> args, const attr_map& attrs = {}, std::vector<type> type_args = {}) {
  if (args.size() != o->arg_names().size()) {
    std::string sig;
    for (auto& a : o->arg_names()) sig += (sig.empty() ? "" : ", ") + a;
    throw type_error(o->name() + ": expects " + std::to_string(o->arg_names().size()) + " argument" +
                     (o->arg_names().size() == 1 ? "" : "s") + " (" + sig + "), but " + std::to_string(args.size()) +
                     (args.size() == 1 ? " was" : " were") + " given");
  }
  for (std::size_t i = 0; i < args.size(); ++i)
    if (!args[i]) throw type_error(o->name() + ": argument #" + std::to_string(i + 1) + " is null");
  if (type_args.size() != o->num_type_args())
    throw type_error(o->name() + ": expects " + std::to_string(o->num_type_args()) + " explicit result type(s), but " +
                     std::to_string(type_args.size()) + " were given");
  attr_map full = o->normalize_attrs(attrs);
  type t = o->infer(args, full, type_args);
  return make_call(o, std::move(args), std::move(full), std::move(type_args), std::move(t));
}
/// A call to the operator named `name` (see the overload taking an `op`).
inline expr call_op(const std::string& name, std::vector<expr> args, const attr_map& attrs = {},
                    std::vector<type> type_args = {}) {
  return call_op(op_registry::global().get(name), std::move(args), attrs, std::move(type_args));
}

/// A call to a function of the module through its global variable.
inline expr call_function(const global_var& gv, std::vector<expr> args) {
  type t = infer_call_result(gv->checked_type, args, "call to '" + gv->name + "'");
  return make_call(gv, std::move(args), {}, {}, std::move(t));
}

/// A call to an external symbol (the design's `R.call_packed`) returning `result`.
inline expr call_extern(std::string symbol, std::vector<expr> args, type result) {
  return make_call(make_extern_func(std::move(symbol)), std::move(args), {}, {result}, result);
}

/// `R.call_tir(kernel, (args...), out_type)`: calls kernel function `kernel` in
/// destination-passing style; the VM allocates the outputs of type `out_type`.
inline expr call_tir(const global_var& kernel, std::vector<expr> args, type out_type) {
  return call_op("call_tir", {kernel, make_tuple(std::move(args))}, {}, {std::move(out_type)});
}

}  // namespace kiln::ir

