// SPDX-License-Identifier: Apache-2.0
/// \file
/// `fold_constant`: operator calls whose operands are all constants are computed at compile time,
/// with kiln's own kernels (through the reference evaluator, `interpreter/fold.hpp`), and replaced by their result
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

#include <kiln/interpreter/fold.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_config.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>

#include <unordered_map>

namespace kiln::transform {

/// The largest result, in bytes, that `fold_constant` computes at compile time.
inline const pass_config_option<std::int64_t>& fold_constant_max_bytes() {
  static const pass_config_option<std::int64_t> option{"kiln.fold_constant.max_bytes",
                                                       "largest result (bytes) fold_constant computes at compile time; default 16 MiB"};
  return option;
}

struct fold_constant {
  static constexpr std::string_view name = "fold_constant";
  static constexpr std::string_view description =
      "Evaluates operators whose inputs are all constants at compile time (up to a size limit) and binds the results as constants.";
  static constexpr int opt_level = 1;

  /// Statistic: "bindings folded".
  ir::ir_module operator()(const ir::ir_module& m, pass_context& ctx) const {
    const std::int64_t limit = ctx.config(fold_constant_max_bytes(), std::int64_t{16} << 20);
    interpreter::reference_evaluator eval(m);
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
    folder(interpreter::reference_evaluator& e, std::int64_t limit, pass_context& ctx, std::string fn) : eval_(e), limit_(limit), ctx_(ctx), fn_(std::move(fn)) {}

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
        return interpreter::fold_call(eval_, value, limit_);
      } catch (const error& err) {
        const auto& op = static_cast<const ir::op_node&>(*static_cast<const ir::call_node&>(*value).callee);
        ctx_.warning(std::string("fold_constant: R.") + op.name() + " was not folded: " + err.what(), "function '" + fn_ + "', binding '" + binding + "'");
        return {};
      }
    }

    interpreter::reference_evaluator& eval_;
    std::int64_t limit_;
    pass_context& ctx_;
    std::string fn_;
    std::unordered_map<const ir::var_node*, ir::expr> known_;
  };
};

}  // namespace kiln::transform
