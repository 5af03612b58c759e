// SPDX-License-Identifier: Apache-2.0
/// \file
/// `fuse_epilogue`: a matmul or conv2d followed by elementwise operators — a bias add, an
/// activation, a residual add, a scale — becomes one kernel call that applies them to each block
/// of the product while the block is in cache (`kernels::matmul_fused`, `kernels::conv2d_fused`),
/// so the fused form costs about what the matmul alone costs:
///
///     lv  = R.matmul(x, w)
///     lv1 = R.add(lv, b)
///     gv  = R.nn.gelu(lv1)
///  -> gv  = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused"),
///                             (x, w, R.prim_value(0, "bool"), R.prim_value(0, "bool"), R.str("(gelu (add x0 x1)) ; lv lv1 gv"), b),
///                             out_sinfo=R.Tensor((8, 16), "float32"))
///
/// The epilogue is the largest elementwise tree that ends at the rewritten binding (as for
/// `fuse_elementwise`) with the product as one of its inputs (x0); the product must be used only
/// there and have the result's shape (an epilogue that broadcasts the product to a larger shape
/// is not fused). All of it is float32 or all float64.
///
/// Transposes are absorbed: an operand of a matmul made by `R.permute_dims` that swaps the last
/// two axes, and used only there, is read transposed in place (the kernel's transpose flag) —
/// also for a matmul with no epilogue (rule `matmul_transpose`).
///
/// Runs at opt level 1, before `fuse_elementwise` and `legalize_ops`.
#pragma once

#include <kiln/pass/pass_context.hpp>
#include <kiln/transform/detail/fusion.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/pattern_rewrite.hpp>

namespace kiln::transform {

struct fuse_epilogue {
  static constexpr std::string_view name = "fuse_epilogue";
  static constexpr int opt_level = 1;

  /// The operand `e` of a matmul, seen through a `permute_dims` that swaps its last two axes and
  /// has no other use: the tensor to read, and whether to read it transposed. The permute is
  /// absorbed when `absorb`.
  static std::pair<ir::expr, bool> peel_transpose(rewrite_context& ctx, const ir::expr& e, bool absorb) {
    auto* v = ir::dyn_cast<ir::var_node>(e);
    const ir::binding* b = v ? ctx.producer(*v) : nullptr;
    if (!b || ctx.uses(*v) != 1 || !detail::is_op_call(b->value, "permute_dims")) return {e, false};
    auto& c = static_cast<const ir::call_node&>(*b->value);
    auto* t = ir::dyn_cast<ir::tensor_type_node>(c.args[0]->checked_type);
    if (!t || t->ndim < 2) return {e, false};
    const ir::attr_value* axes = c.attrs.find("axes");
    const std::size_t n = std::size_t(t->ndim);
    ir::int_array want;
    for (std::size_t i = 0; i + 2 < n; ++i) want.push_back(std::int64_t(i));
    want.push_back(std::int64_t(n - 1));
    want.push_back(std::int64_t(n - 2));
    // No axes reverses them, which is a swap of the last two for a matrix.
    const bool swaps = !axes || axes->is_none() ? n == 2 : axes->as<ir::int_array>() == want;
    if (!swaps) return {e, false};
    if (absorb) ctx.absorb(*v);
    return {c.args[0], true};
  }

  /// Matmul or conv2d + elementwise tree.
  static rewrite_rule epilogue_rule() {
    using namespace patterns;
    return {"fuse_epilogue", is_elementwise(), [](const match_result& m, rewrite_context& ctx) -> ir::expr {
              const ir::expr& root = m.root();
              if (!ir::isa<ir::call_node>(root)) return {};  // a renaming of a value the pattern looked through
              const dtype dt = detail::float_dtype(root->checked_type);
              if (dt == dtype::void_ || !detail::has_shape(root->checked_type) || !detail::fused_operator(root, dt)) return {};
              // The product: an input of the root's tree made by a matmul or conv2d of the root's
              // shape. Find it among the root's own operands first, then grow the tree around it.
              auto product_of = [&](const ir::expr& e) -> const ir::binding* {
                auto* v = ir::dyn_cast<ir::var_node>(e);
                const ir::binding* b = v ? ctx.producer(*v) : nullptr;
                if (!b || !(detail::is_op_call(b->value, "matmul") || detail::is_op_call(b->value, "nn.conv2d"))) return nullptr;
                auto& c = static_cast<const ir::call_node&>(*b->value);
                if (detail::float_dtype(c.checked_type) != dt || detail::float_dtype(c.args[0]->checked_type) != dt ||
                    detail::float_dtype(c.args[1]->checked_type) != dt)
                  return nullptr;
                auto* pt = ir::dyn_cast<ir::tensor_type_node>(c.checked_type);
                auto* rt = ir::dyn_cast<ir::tensor_type_node>(root->checked_type);
                if (!pt->shape || !ir::detail::dims_equal(*pt->shape, *rt->shape)) return nullptr;
                return b;
              };
              for (const ir::binding* candidate : candidates(ctx, root, dt)) {
                if (!product_of(candidate->variable)) continue;
                const ir::var_node& pv = *candidate->variable;
                const detail::elementwise_group g(ctx, root, dt, &pv);
                std::vector<ir::expr> inputs = g.inputs();
                // The product must be an input, used only inside the group.
                auto at = std::find(inputs.begin(), inputs.end(), ir::expr(candidate->variable));
                if (at == inputs.end() || inputs.size() > detail::max_fused_inputs) continue;
                if (g.references(pv) != ctx.uses(pv)) continue;
                inputs.erase(at);
                inputs.insert(inputs.begin(), ir::expr(candidate->variable));
                // The names of everything the call replaces: the product and the transposes it reads.
                std::vector<const ir::var_node*> also{&pv};
                auto& pc = static_cast<const ir::call_node&>(*candidate->value);
                if (detail::is_op_call(candidate->value, "matmul"))
                  for (const ir::expr& operand : pc.args)
                    if (peel_transpose(ctx, operand, false).second) also.push_back(ir::dyn_cast<ir::var_node>(operand));
                const std::string text = g.description(inputs, also);
                inputs.erase(inputs.begin());
                ir::expr call = product_call(ctx, pc, text, inputs, root->checked_type);
                if (!call) continue;
                ctx.absorb(pv);
                g.absorb();
                return call;
              }
              return {};
            }};
  }

  /// A matmul with a transposed operand and no epilogue.
  static rewrite_rule transpose_rule() {
    using namespace patterns;
    return {"matmul_transpose", is_op("matmul"), [](const match_result& m, rewrite_context& ctx) -> ir::expr {
              if (!ir::isa<ir::call_node>(m.root())) return {};
              auto& c = static_cast<const ir::call_node&>(*m.root());
              const dtype dt = detail::float_dtype(c.checked_type);
              if (dt == dtype::void_ || !detail::has_shape(c.checked_type) || detail::float_dtype(c.args[0]->checked_type) != dt ||
                  detail::float_dtype(c.args[1]->checked_type) != dt)
                return {};
              auto [a, ta] = peel_transpose(ctx, c.args[0], false);
              auto [b, tb] = peel_transpose(ctx, c.args[1], false);
              if (!ta && !tb) return {};
              if (ta) peel_transpose(ctx, c.args[0], true);
              if (tb) peel_transpose(ctx, c.args[1], true);
              return detail::call_kernel("kernels.matmul", {a, b, lower::boolean(ta), lower::boolean(tb)}, c.checked_type);
            }};
  }

  ir::ir_module operator()(const ir::ir_module& m, pass_context& ctx) const {
    const rewrite_rule rules[] = {epilogue_rule(), transpose_rule()};
    rewrite_counts counts;
    ir::ir_module out = rewrite_bindings(m, rules, &counts);
    ctx.statistic(name, "epilogues") += counts["fuse_epilogue"];
    ctx.statistic(name, "transposes") += counts["matmul_transpose"];
    return out;
  }

private:
  /// The bindings that could be the product: matmul or conv2d bindings the root's elementwise
  /// tree reads, nearest first.
  static std::vector<const ir::binding*> candidates(rewrite_context& ctx, const ir::expr& root, dtype dt) {
    std::vector<const ir::binding*> out;
    std::vector<ir::expr> work{root};
    std::unordered_set<const ir::var_node*> seen;
    for (std::size_t i = 0; i < work.size() && out.size() < 4; ++i) {
      for (const ir::expr& a : static_cast<const ir::call_node&>(*work[i]).args) {
        auto* v = ir::dyn_cast<ir::var_node>(a);
        const ir::binding* b = v ? ctx.producer(*v) : nullptr;
        if (!b || !seen.insert(v).second) continue;
        if (detail::is_op_call(b->value, "matmul") || detail::is_op_call(b->value, "nn.conv2d")) out.push_back(b);
        else if (detail::fused_operator(b->value, dt)) work.push_back(b->value);
      }
    }
    return out;
  }

  /// The fused kernel call of product `c` with epilogue `text` over `operands`, or null when the
  /// product has no fused form (an attribute its lowering refuses).
  static ir::expr product_call(rewrite_context& ctx, const ir::call_node& c, const std::string& text, const std::vector<ir::expr>& operands,
                               const ir::type& result) {
    std::vector<ir::expr> args;
    std::string kernel;
    if (static_cast<const ir::op_node&>(*c.callee).name() == "matmul") {
      auto [a, ta] = peel_transpose(ctx, c.args[0], true);
      auto [b, tb] = peel_transpose(ctx, c.args[1], true);
      args = {a, b, lower::boolean(ta), lower::boolean(tb)};
      kernel = "kernels.matmul_fused";
    } else {
      if (c.attrs.get_or<std::string>("data_layout", "NCHW") != "NCHW" || c.attrs.get_or<std::string>("kernel_layout", "OIHW") != "OIHW") return {};
      try {
        kernel_call k = kernel_lowering::global().lower(c);
        if (k.kernel != "kernels.conv2d") return {};
        args = std::move(k.args);
      } catch (const lowering_error&) {
        return {};
      }
      kernel = "kernels.conv2d_fused";
    }
    args.push_back(ir::make_string_imm(text));
    args.insert(args.end(), operands.begin(), operands.end());
    return detail::call_kernel(kernel, std::move(args), result);
  }
};

}  // namespace kiln::transform
