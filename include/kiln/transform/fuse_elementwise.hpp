// SPDX-License-Identifier: Apache-2.0
/// \file
/// `fuse_elementwise`: the largest trees of elementwise operators become one fused kernel call,
/// which reads its inputs and writes its result once, with no intermediate tensors (Relax's
/// FuseOps for the elementwise and broadcast patterns, ONNX Runtime's elementwise fusions):
///
///     lv  = R.multiply(x, y)
///     lv1 = R.add(lv, b)
///     gv  = R.nn.relu(lv1)
///  -> gv  = R.call_dps_packed(R.ExternFunc("kernels.fused"), (R.str("(relu (add (multiply x0 x1) x2)) ; lv lv1 gv"), x, y, b),
///                             out_sinfo=R.Tensor((4, 8), "float32"))
///
/// The description (`kernels::fused_expr`) ends with a comment naming the bindings it replaces,
/// so printed IR and profiles stay readable. A group is one rewrite (`pattern_rewrite.hpp`) whose
/// root is the last elementwise binding of a chain; it takes in the elementwise calls nested in
/// its operands (`R.nn.relu(R.add(x, b))`), and absorbs an earlier elementwise binding of the
/// same block when all its uses are inside the group. The description has no shared
/// subexpressions, so a value used more than once is computed once per use: only one add,
/// subtract, multiply or divide of inputs is taken in that way (the bias add that SiLU or
/// hard-swish reads twice); anything else used twice stays a kernel of its own. So a group never crosses
/// an `if` or a block, never removes a value used elsewhere or returned, and never changes dtype
/// (all of a group's tensors are float32, or all float64). Rank-0 constants become numbers in the
/// description. A group has at most 8 inputs and 48 operators, and at least two operators (one
/// operator alone is already one kernel call).
///
/// Operators: add subtract multiply divide power maximum minimum negative abs exp log sqrt rsqrt
/// tanh sigmoid erf, nn.relu, nn.gelu (both forms), clip. Runs at opt level 1, before
/// `legalize_ops`; `fuse_epilogue` runs first, so that a matmul or conv2d takes the elementwise
/// operators after it into its own kernel.
#pragma once

#include <kiln/pass/pass_context.hpp>
#include <kiln/transform/detail/fusion.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/pattern_rewrite.hpp>

namespace kiln::transform {

struct fuse_elementwise {
  static constexpr std::string_view name = "fuse_elementwise";
  static constexpr std::string_view description =
      "Fuses chains of elementwise operators into one generated kernel each.";
  static constexpr int opt_level = 1;

  /// The rewrite, for use in other pipelines of rules.
  static rewrite_rule rule() {
    using namespace patterns;
    return {"fuse_elementwise", is_elementwise(), [](const match_result& m, rewrite_context& ctx) -> ir::expr {
              const ir::expr& root = m.root();
              if (!ir::isa<ir::call_node>(root)) return {};  // a renaming of a value the pattern looked through
              const dtype dt = detail::float_dtype(root->checked_type);
              if (dt == dtype::void_ || !detail::has_shape(root->checked_type) || !detail::fused_operator(root, dt)) return {};
              const detail::elementwise_group g(ctx, root, dt);
              if (g.operations() < 2) return {};
              const std::vector<ir::expr> inputs = g.inputs();
              if (inputs.empty()) return {};  // constants only: fold_constant's work
              kernel_call call = lower::with_operands<kernels::abi::fused>(lower::call<kernels::abi::fused>(lower::string(g.description(inputs))), inputs);
              g.absorb();
              return lower::emit(std::move(call), root->checked_type);
            }};
  }

  ir::ir_module operator()(const ir::ir_module& m, pass_context& ctx) const {
    const rewrite_rule rules[] = {rule()};
    rewrite_counts counts;
    ir::ir_module out = rewrite_bindings(detail::bind_nested_calls(m), rules, &counts, &ctx);
    ctx.statistic(name, "groups") += counts["fuse_elementwise"];
    return out;
  }
};

}  // namespace kiln::transform
