// SPDX-License-Identifier: Apache-2.0
/// \file
/// Constant folding's test and computation: an operator call whose operands are all constants,
/// computed now by the reference evaluator. Shared by the pass `fold_constant` and the ONNX
/// importer (which folds as it converts, so that shape subgraphs give static shapes).
///
///     interpreter::reference_evaluator eval(module);
///     ir::expr c = interpreter::fold_call(eval, call, max_bytes);   // a constant, or null
#pragma once

#include <kiln/interpreter/reference_evaluator.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/tensor_conversion.hpp>

#include <cstdint>
#include <vector>

namespace kiln::interpreter {

/// The parts of the test.
namespace folding {

/// An operand folding can read at compile time: a constant, a string, a static shape, a static
/// primitive value, or a tuple of those.
inline bool is_constant_operand(const ir::expr& e) {
  switch (e->kind) {
    case ir::node_kind::constant:
    case ir::node_kind::string_imm: return true;
    case ir::node_kind::shape_expr:
      for (auto& d : static_cast<const ir::shape_expr_node&>(*e).values)
        if (!ir::as_int(d)) return false;
      return true;
    case ir::node_kind::prim_value: {
      auto& p = static_cast<const ir::prim_value_node&>(*e);
      return !p.int_value || ir::as_int(p.int_value).has_value();
    }
    case ir::node_kind::tuple:
      for (auto& f : static_cast<const ir::tuple_node&>(*e).fields)
        if (!is_constant_operand(f)) return false;
      return true;
    default: return false;
  }
}

/// The bytes of a value of type `t` (a tensor, or a tuple of them) with a static shape, else -1.
inline std::int64_t static_result_bytes(const ir::type& t) {
  if (auto* tt = ir::dyn_cast<ir::tuple_type_node>(t)) {
    std::int64_t n = 0;
    for (auto& f : tt->fields) {
      const std::int64_t b = static_result_bytes(f);
      if (b < 0) return -1;
      n += b;
    }
    return n;
  }
  auto* tt = ir::dyn_cast<ir::tensor_type_node>(t);
  if (!tt || !tt->shape || !is_known(tt->dt)) return -1;
  std::int64_t n = std::int64_t(size_of(tt->dt));
  for (auto& d : *tt->shape) {
    auto c = ir::as_int(d);
    if (!c || __builtin_mul_overflow(n, *c, &n)) return -1;
  }
  return n;
}

/// A computed value as IR: a constant, or a tuple of them; null for anything else.
inline ir::expr to_constant(const vm::value& v) {
  if (v.is_tensor()) return ir::make_constant(transform::to_ndarray(v.as_tensor()));
  if (v.is_tuple()) {
    std::vector<ir::expr> fields;
    for (auto& x : v.as_tuple()) {
      ir::expr c = to_constant(x);
      if (!c) return {};
      fields.push_back(c);
    }
    return ir::make_tuple(std::move(fields));
  }
  return {};
}

}  // namespace folding

/// `e` computed at compile time, as a constant (or a tuple of constants): when `e` calls an
/// operator the kernels compute, every operand is constant (`folding::is_constant_operand`) and
/// the result is static and at most `max_bytes`. Null when it is not foldable; what the kernels
/// throw when it is but they refuse it.
inline ir::expr fold_call(reference_evaluator& eval, const ir::expr& e, std::int64_t max_bytes) {
  auto* c = ir::dyn_cast<ir::call_node>(e);
  auto* o = c ? ir::dyn_cast<ir::op_node>(c->callee) : nullptr;
  if (!o || !transform::kernel_lowering::global().contains(o->name())) return {};
  for (auto& a : c->args)
    if (!folding::is_constant_operand(a)) return {};
  const std::int64_t bytes = folding::static_result_bytes(c->checked_type);
  if (bytes < 0 || bytes > max_bytes) return {};
  return folding::to_constant(eval.evaluate(e));
}

}  // namespace kiln::interpreter
