// SPDX-License-Identifier: Apache-2.0
/// \file
/// `fold_constant`: operator calls whose operands are all constants are computed at compile time,
/// with kiln's own kernels (through the reference evaluator), and replaced by their result
/// (Relax's FoldConstant).
///
///     c = R.add(R.const([1.0, 2.0], "float32"), R.const(1.0, "float32"))   ->   c = R.const([2.0, 3.0], "float32")
///
/// A variable bound to a constant is replaced by the constant where it is used, so chains fold;
/// the bindings left unused go with `dead_code_elimination`. A result larger than the config
/// option `kiln.fold_constant.max_bytes` (default 16 MiB) is not folded, so that a small constant
/// broadcast to a huge shape does not bloat the executable. A call the kernels reject (a bad
/// shape, say) is left as it is, with a warning in the pass context's diagnostics: the program
/// then fails where it would have without folding.
#pragma once

#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_config.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/reference_evaluator.hpp>
#include <kiln/transform/tensor_conversion.hpp>

#include <unordered_map>

namespace kiln::transform {

/// The largest result, in bytes, that `fold_constant` computes at compile time.
inline const pass_config_option<std::int64_t>& fold_constant_max_bytes() {
  static const pass_config_option<std::int64_t> option{"kiln.fold_constant.max_bytes",
                                                       "largest result (bytes) fold_constant computes at compile time; default 16 MiB"};
  return option;
}

/// Constant folding's test and computation, shared by `fold_constant` and the ONNX importer
/// (which folds as it converts, so that shape subgraphs give static shapes).
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
  if (v.is_tensor()) return ir::make_constant(to_ndarray(v.as_tensor()));
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
  if (!o || !kernel_lowering::global().contains(o->name())) return {};
  for (auto& a : c->args)
    if (!folding::is_constant_operand(a)) return {};
  const std::int64_t bytes = folding::static_result_bytes(c->checked_type);
  if (bytes < 0 || bytes > max_bytes) return {};
  return folding::to_constant(eval.evaluate(e));
}

struct fold_constant {
  static constexpr std::string_view name = "fold_constant";
  static constexpr std::string_view description =
      "Evaluates operators whose inputs are all constants at compile time (up to a size limit) and binds the results as constants.";
  static constexpr int opt_level = 1;

  /// Statistic: "bindings folded".
  ir::ir_module operator()(const ir::ir_module& m, pass_context& ctx) const {
    const std::int64_t limit = ctx.config(fold_constant_max_bytes(), std::int64_t{16} << 20);
    reference_evaluator eval(m);
    ir::ir_module out = m;
    for (auto& e : m->functions())
      if (auto f = ir::ref_cast<ir::function_node>(e.func)) {
        folder fl(eval, limit, ctx, e.gv->name);
        ir::function g = fl.mutate_function(f);
        if (g != f) out = ir::with_function(out, e.gv->name, g);
      }
    return out;
  }

private:
  class folder final : public ir::expr_mutator {
  public:
    folder(reference_evaluator& e, std::int64_t limit, pass_context& ctx, std::string fn) : eval_(e), limit_(limit), ctx_(ctx), fn_(std::move(fn)) {}

    ir::expr mutate_var(const ir::var_node& n, const ir::expr& self) override {
      if (auto it = known_.find(&n); it != known_.end()) return it->second;
      return expr_mutator::mutate_var(n, self);
    }

    ir::binding mutate_binding(const ir::binding& b) override {
      ir::binding nb = expr_mutator::mutate_binding(b);
      if (nb.is_match_cast()) return nb;
      if (ir::isa<ir::constant_node>(nb.value)) {
        known_[b.variable.get()] = nb.value;
        return nb;
      }
      if (ir::expr c = try_fold(nb.value, b.variable->name_hint)) {
        nb.value = c;
        known_[b.variable.get()] = c;
        ++ctx_.statistic(name, "bindings folded");
      }
      return nb;
    }

  private:
    ir::expr try_fold(const ir::expr& value, const std::string& binding) {
      try {
        return fold_call(eval_, value, limit_);
      } catch (const error& err) {
        const auto& op = static_cast<const ir::op_node&>(*static_cast<const ir::call_node&>(*value).callee);
        ctx_.warning(std::string("fold_constant: R.") + op.name() + " was not folded: " + err.what(), "function '" + fn_ + "', binding '" + binding + "'");
        return {};
      }
    }

    reference_evaluator& eval_;
    std::int64_t limit_;
    pass_context& ctx_;
    std::string fn_;
    std::unordered_map<const ir::var_node*, ir::expr> known_;
  };
};

}  // namespace kiln::transform
