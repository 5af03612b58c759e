// SPDX-License-Identifier: Apache-2.0
/// \file
/// `fuse_attention`: attention written out operator by operator — a product of queries and keys,
/// elementwise operators on the scores (a scale, a bias), at most one `where` with a number (a
/// causal mask), a softmax along the last axis and a product with the values — becomes one call
/// of `kernels::attention`, which keeps each block of scores in cache from product to product:
///
///     lv  = R.permute_dims(k, axes=[0, 1, 3, 2])
///     lv1 = R.matmul(q, lv)
///     lv2 = R.divide(lv1, R.const(8, "float32"))
///     lv3 = R.where(causal, lv2, R.const(-3.4028235e+38, "float32"))
///     lv4 = R.add(lv3, mask_bias)
///     lv5 = R.nn.softmax(lv4, axis=-1)
///     gv  = R.matmul(lv5, v)
///  -> gv  = R.call_dps_packed(R.ExternFunc("kernels.attention"),
///             (q, k, v, R.prim_value(1, "bool"), R.str("(divide x0 8)"), R.str("(add x0 x1)"),
///              R.prim_value(1), R.prim_value(-3.4028234663852886e+38, "float64"), causal, mask_bias),
///             out_sinfo=R.Tensor((1, 12, 7, 64), "float32"))
///
/// The scores' chain is linear: each operator takes the chain's value as one operand (the others
/// are tensors or numbers the scores broadcast with, never growing the scores' shape), and every
/// intermediate is used only inside the chain. The operators before the `where` become the
/// kernel's `pre` expression, those after it its `post` expression (attention.hpp). The keys are
/// read transposed in place when they reach the product through a `permute_dims` that swaps the
/// last two axes (a key cache stored [..., positions, head size]). All of it is float32 or all
/// float64.
///
/// Runs at opt level 1, first in `kiln.fuse`: before `fuse_epilogue` would take the scale into
/// the first product's epilogue.
#pragma once

#include <kiln/pass/pass_context.hpp>
#include <kiln/transform/detail/fusion.hpp>
#include <kiln/transform/fuse_epilogue.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/pattern_rewrite.hpp>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

namespace kiln::transform {

struct fuse_attention {
  static constexpr std::string_view name = "fuse_attention";
  static constexpr std::string_view description =
      "Turns matmul, scale, mask and bias, softmax and matmul into one attention kernel that keeps the scores in cache.";
  static constexpr int opt_level = 1;

  static rewrite_rule attention_rule() {
    using namespace patterns;
    return {"fuse_attention", is_op("matmul"), [](const match_result& m, rewrite_context& ctx) -> ir::expr {
              auto* root = ir::dyn_cast<ir::call_node>(m.root());
              if (!root) return {};
              const dtype dt = detail::float_dtype(root->checked_type);
              if (dt == dtype::void_ || !detail::has_shape(root->checked_type) || !plain_matmul(*root, dt)) return {};
              chain c{ctx, dt, {}, {}};
              // The probabilities: a softmax along the last axis, used only here.
              const ir::expr* p = c.value_of(root->args[0]);
              if (!p || !is_softmax(*p)) return {};
              auto& softmax = static_cast<const ir::call_node&>(**p);
              const auto& scores_type = static_cast<const ir::tensor_type_node&>(*softmax.checked_type);
              if (scores_type.dt != dt || !scores_type.shape || scores_type.ndim < 2) return {};
              const std::optional<chain::found> f = c.walk(softmax.args[0], *scores_type.shape, false);
              if (!f) return {};
              const std::string pre = c.render(f->pre), post = c.render(f->post);
              if (c.operands.size() + 1 > detail::max_fused_inputs) return {};
              auto& product = static_cast<const ir::call_node&>(*f->product);
              const fuse_epilogue::peeled k = fuse_epilogue::peel_transpose(ctx, product.args[1], true);
              for (const ir::var_node* v : c.absorbed) ctx.absorb(*v);
              const lower::typed<lower::null_kind> no_mask = lower::null();
              kernel_call call = lower::call<kernels::abi::attention>(
                  product.args[0], k.tensor, root->args[1], lower::boolean(k.transposed), lower::string(pre), lower::string(post),
                  lower::integer(f->mask ? (f->keeps ? 1 : 2) : 0), lower::real(f->fill), f->mask ? *f->mask : no_mask.value);
              return lower::emit(lower::with_operands<kernels::abi::attention>(std::move(call), c.operands), root->checked_type);
            }};
  }

  ir::ir_module operator()(const ir::ir_module& m, pass_context& ctx) const {
    const rewrite_rule rules[] = {attention_rule()};
    rewrite_counts counts;
    ir::ir_module out = rewrite_bindings(detail::bind_nested_calls(m), rules, &counts, &ctx);
    ctx.statistic(name, "attentions") += counts["fuse_attention"];
    return out;
  }

private:
  /// A matmul of two float tensors of rank at least 2 with no other result dtype.
  static bool plain_matmul(const ir::call_node& c, dtype dt) {
    if (c.args.size() != 2) return false;
    if (const ir::attr_value* o = c.attrs.find("out_dtype"); o && !o->is_none() && o->as<dtype>() != dtype::void_ && o->as<dtype>() != dt)
      return false;
    for (const ir::expr& a : c.args) {
      auto* t = ir::dyn_cast<ir::tensor_type_node>(a->checked_type);
      if (!t || t->dt != dt || t->ndim < 2) return false;
    }
    return true;
  }
  static bool is_softmax(const ir::expr& e) {
    if (!detail::is_op_call(e, "nn.softmax")) return false;
    auto& c = static_cast<const ir::call_node&>(*e);
    auto* t = ir::dyn_cast<ir::tensor_type_node>(c.checked_type);
    const std::int64_t axis = c.attrs.get_or<std::int64_t>("axis", -1);
    return t && t->ndim >= 1 && (axis == -1 || axis == t->ndim - 1);
  }
  static bool is_number(const ir::expr& e) {
    auto* c = ir::dyn_cast<ir::constant_node>(e);
    return c && c->data.shape().empty();
  }

  /// The walk from the softmax's operand back to the product, and what it found.
  struct chain {
    rewrite_context& ctx;
    dtype dt;
    std::vector<const ir::var_node*> absorbed;  ///< bindings the kernel replaces
    std::vector<ir::expr> operands;             ///< x1, x2, ... of the expressions
    struct link {
      ir::expr call;
      std::size_t arg;  ///< which operand is the chain's value
    };
    struct found {
      ir::expr product;
      std::vector<link> pre, post;  ///< from the product outwards
      std::optional<ir::expr> mask;
      bool keeps = true;
      double fill = 0;
    };

    /// The call computing `e` inside the chain: a variable's binding when the chain is its only
    /// use, or a call nested in place; null otherwise.
    const ir::expr* value_of(const ir::expr& e) {
      if (auto* v = ir::dyn_cast<ir::var_node>(e)) {
        const ir::binding* b = ctx.producer(*v);
        if (!b || ctx.uses(*v) != 1 || !ir::isa<ir::call_node>(b->value)) return nullptr;
        absorbed.push_back(v);
        return &b->value;
      }
      return ir::isa<ir::call_node>(e) ? &e : nullptr;
    }

    /// Walks from `e` (a value of the scores' shape) back to the product; `seen_where` when a
    /// `where` is already behind (nearer the softmax).
    std::optional<found> walk(const ir::expr& e, const std::vector<ir::prim_expr>& shape, bool seen_where) {
      const std::size_t mark = absorbed.size();
      auto fail = [&]() -> std::optional<found> {
        absorbed.resize(mark);
        return std::nullopt;
      };
      const ir::expr* value = value_of(e);
      if (!value) return fail();
      auto& c = static_cast<const ir::call_node&>(**value);
      auto* t = ir::dyn_cast<ir::tensor_type_node>(c.checked_type);
      if (!t || t->dt != dt || !t->shape || !ir::detail::dims_equal(*t->shape, shape)) return fail();
      if (detail::is_op_call(*value, "matmul")) {
        if (!plain_matmul(c, dt)) return fail();
        found f;
        f.product = *value;
        return f;
      }
      if (detail::is_op_call(*value, "where")) {
        if (seen_where || c.args.size() != 3) return fail();
        auto* ct = ir::dyn_cast<ir::tensor_type_node>(c.args[0]->checked_type);
        if (!ct || ct->dt != dtype::bool_) return fail();
        const bool keeps = is_number(c.args[2]) && !is_number(c.args[1]);
        if (!keeps && !(is_number(c.args[1]) && !is_number(c.args[2]))) return fail();
        const ir::expr& number = c.args[keeps ? 2 : 1];
        if (detail::float_dtype(number->checked_type) != dt) return fail();
        std::optional<found> f = walk(c.args[keeps ? 1 : 2], shape, true);
        if (!f) return fail();
        f->mask = c.args[0];
        f->keeps = keeps;
        f->fill = static_cast<const ir::constant_node&>(*number).data.element(0);
        return f;
      }
      if (!detail::fused_operator(*value, dt)) return fail();
      // The chain goes on through one operand; try each that could carry it.
      for (std::size_t i = 0; i < c.args.size(); ++i) {
        if (is_number(c.args[i])) continue;
        std::optional<found> f = walk(c.args[i], shape, seen_where);
        if (!f) continue;
        (f->mask ? f->post : f->pre).push_back({*value, i});  // applied after the where (which lies nearer the product) or before it
        return f;
      }
      return fail();
    }

    /// The fused description of `links` applied to x0 (empty when there are none), numbering the
    /// other tensors they read among `operands`.
    std::string render(const std::vector<link>& links) {
      if (links.empty()) return {};
      std::string s = "x0";
      for (const link& l : links) {
        const detail::fused_op op = *detail::fused_operator(l.call, dt);
        const auto& args = static_cast<const ir::call_node&>(*l.call).args;
        std::string t = "(" + op.name;
        for (std::size_t i = 0; i < args.size(); ++i) {
          const ir::expr& a = args[i];
          t += " ";
          if (i == l.arg) {
            t += s;
          } else if (is_number(a)) {
            char buf[32];
            t.append(buf, std::to_chars(buf, buf + sizeof buf, static_cast<const ir::constant_node&>(*a).data.element(0)).ptr);
          } else {
            auto at = std::find(operands.begin(), operands.end(), a);
            if (at == operands.end()) at = operands.insert(operands.end(), a);
            t += "x" + std::to_string(at - operands.begin() + 1);
          }
        }
        s = t + op.bounds + ")";
      }
      return s;
    }
  };
};

}  // namespace kiln::transform
