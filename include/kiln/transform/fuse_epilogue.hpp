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
  static constexpr std::string_view description =
      "Folds the elementwise operators after a matmul or convolution (bias, activation, residual add, transposed operands) into that kernel.";
  static constexpr int opt_level = 1;

  /// The operand `e` of a matmul, seen through a `permute_dims` that swaps its last two axes —
  /// nested in the operand, or bound to a variable used only there: the tensor to read, whether
  /// to read it transposed, and the variable whose binding goes (or null). The binding is
  /// absorbed when `absorb`.
  struct peeled {
    ir::expr tensor;
    bool transposed = false;
    const ir::var_node* gone = nullptr;
  };
  static peeled peel_transpose(rewrite_context& ctx, const ir::expr& e, bool absorb) {
    const ir::expr* value = &e;
    auto* v = ir::dyn_cast<ir::var_node>(e);
    if (v) {
      const ir::binding* b = ctx.producer(*v);
      if (!b || ctx.uses(*v) != 1) return {e};
      value = &b->value;
    }
    if (!detail::is_op_call(*value, "permute_dims")) return {e};
    auto& c = static_cast<const ir::call_node&>(**value);
    auto* t = ir::dyn_cast<ir::tensor_type_node>(c.args[0]->checked_type);
    if (!t || t->ndim < 2) return {e};
    const ir::attr_value* axes = c.attrs.find("axes");
    const std::size_t n = std::size_t(t->ndim);
    ir::int_array want;
    for (std::size_t i = 0; i + 2 < n; ++i) want.push_back(std::int64_t(i));
    want.push_back(std::int64_t(n - 1));
    want.push_back(std::int64_t(n - 2));
    // No axes reverses them, which is a swap of the last two for a matrix.
    const bool swaps = !axes || axes->is_none() ? n == 2 : axes->as<ir::int_array>() == want;
    if (!swaps) return {e};
    if (absorb && v) ctx.absorb(*v);
    return {c.args[0], true, v};
  }

  /// Matmul or conv2d + elementwise tree.
  static rewrite_rule epilogue_rule() {
    using namespace patterns;
    return {"fuse_epilogue", is_elementwise(), [](const match_result& m, rewrite_context& ctx) -> ir::expr {
              const ir::expr& root = m.root();
              if (!ir::isa<ir::call_node>(root)) return {};  // a renaming of a value the pattern looked through
              const dtype dt = detail::float_dtype(root->checked_type);
              if (dt == dtype::void_ || !detail::has_shape(root->checked_type) || !detail::fused_operator(root, dt)) return {};
              for (const ir::expr& candidate : candidates(ctx, root, dt)) {
                // The product: a matmul or conv2d of the root's shape and dtype, bound to a
                // variable or nested in an operand.
                auto* pv = ir::dyn_cast<ir::var_node>(candidate);
                const ir::expr& value = pv ? ctx.producer(*pv)->value : candidate;
                auto& pc = static_cast<const ir::call_node&>(*value);
                auto* pt = ir::dyn_cast<ir::tensor_type_node>(pc.checked_type);
                auto* rt = ir::dyn_cast<ir::tensor_type_node>(root->checked_type);
                if (detail::float_dtype(pc.checked_type) != dt || detail::float_dtype(pc.args[0]->checked_type) != dt ||
                    detail::float_dtype(pc.args[1]->checked_type) != dt || !pt->shape || !ir::detail::dims_equal(*pt->shape, *rt->shape))
                  continue;
                const detail::elementwise_group g(ctx, root, dt, pv);
                std::vector<ir::expr> inputs = g.inputs();
                // The product must be an input, and (when bound) used only inside the group.
                auto at = std::find(inputs.begin(), inputs.end(), candidate);
                if (at == inputs.end() || inputs.size() > detail::max_fused_inputs) continue;
                if (pv && g.references(*pv) != ctx.uses(*pv)) continue;
                inputs.erase(at);
                inputs.insert(inputs.begin(), candidate);
                // The names of everything the call replaces: the product and the transposes it reads.
                std::vector<const ir::var_node*> also;
                if (pv) also.push_back(pv);
                if (detail::is_op_call(value, "matmul"))
                  for (const ir::expr& operand : pc.args)
                    if (const ir::var_node* gone = peel_transpose(ctx, operand, false).gone) also.push_back(gone);
                const std::string text = g.description(inputs, also);
                inputs.erase(inputs.begin());
                ir::expr call = product_call(ctx, pc, text, inputs, root->checked_type);
                if (!call) continue;
                if (pv) ctx.absorb(*pv);
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
              const peeled a = peel_transpose(ctx, c.args[0], true), b = peel_transpose(ctx, c.args[1], true);
              if (!a.transposed && !b.transposed) return {};
              return lower::emit(lower::call<kernels::abi::matmul>(a.tensor, b.tensor, lower::boolean(a.transposed), lower::boolean(b.transposed)),
                                 c.checked_type);
            }};
  }

  ir::ir_module operator()(const ir::ir_module& m, pass_context& ctx) const {
    const rewrite_rule rules[] = {epilogue_rule(), transpose_rule()};
    rewrite_counts counts;
    ir::ir_module out = rewrite_bindings(detail::bind_nested_calls(m), rules, &counts, &ctx);
    ctx.statistic(name, "epilogues") += counts["fuse_epilogue"];
    ctx.statistic(name, "transposes") += counts["matmul_transpose"];
    return out;
  }

private:
  /// What could be the product: matmul or conv2d calls the root's elementwise tree reads, bound
  /// to variables of the block or nested in operands, nearest first.
  static std::vector<ir::expr> candidates(rewrite_context& ctx, const ir::expr& root, dtype dt) {
    auto is_product = [](const ir::expr& e) { return detail::is_op_call(e, "matmul") || detail::is_op_call(e, "nn.conv2d"); };
    std::vector<ir::expr> out;
    std::vector<ir::expr> work{root};
    std::unordered_set<const ir::var_node*> seen;
    // The walk stops where a group would stop: past max_fused_operations operators no product can
    // join it (and the walk along a long elementwise chain stays short: no quadratic time).
    for (std::size_t i = 0; i < work.size() && i < detail::max_fused_operations && out.size() < 4; ++i) {
      for (const ir::expr& a : static_cast<const ir::call_node&>(*work[i]).args) {
        if (auto* v = ir::dyn_cast<ir::var_node>(a)) {
          const ir::binding* b = ctx.producer(*v);
          if (!b || !seen.insert(v).second) continue;
          if (is_product(b->value)) out.push_back(a);
          else if (detail::fused_operator(b->value, dt)) work.push_back(b->value);
        } else if (is_product(a)) {
          out.push_back(a);
        } else if (ir::isa<ir::call_node>(a) && detail::fused_operator(a, dt)) {
          work.push_back(a);
        }
      }
    }
    return out;
  }

  /// The fused kernel call of product `c` with epilogue `text` over `operands`, or null when the
  /// product has no fused form (an attribute its lowering refuses).
  static ir::expr product_call(rewrite_context& ctx, const ir::call_node& c, const std::string& text, const std::vector<ir::expr>& operands,
                               const ir::type& result) {
    namespace abi = kernels::abi;
    if (static_cast<const ir::op_node&>(*c.callee).name() == "matmul") {
      const peeled a = peel_transpose(ctx, c.args[0], true), b = peel_transpose(ctx, c.args[1], true);
      return lower::emit(lower::with_operands<abi::matmul_fused>(
                             lower::call<abi::matmul_fused>(a.tensor, b.tensor, lower::boolean(a.transposed), lower::boolean(b.transposed),
                                                            lower::string(text)),
                             operands),
                         result);
    }
    if (c.attrs.get_or<std::string>("data_layout", "NCHW") != "NCHW" || c.attrs.get_or<std::string>("kernel_layout", "OIHW") != "OIHW") return {};
    kernel_call k;
    try {
      k = kernel_lowering::global().lower(c);
    } catch (const lowering_error&) {
      return {};
    }
    if (k.kernel != abi::conv2d::name) return {};
    // conv2d_fused: conv2d's arguments, then the epilogue and its operands.
    static_assert(abi::is_fused_form_of<abi::conv2d, abi::conv2d_fused>);
    k.kernel = abi::conv2d_fused::name;
    k.args.push_back(lower::string(text));
    return lower::emit(lower::with_operands<abi::conv2d_fused>(std::move(k), operands), result);
  }
};

}  // namespace kiln::transform
