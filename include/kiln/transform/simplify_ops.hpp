// SPDX-License-Identifier: Apache-2.0
/// \file
/// `simplify_ops`: operator-level rewrites that leave the values alone and do less work.
///
/// A pad of zero widths (an ONNX exporter's `Pad` before a pool) copies its input: its uses read
/// the input instead.
///
///     lv1 = R.nn.pad(lv, pad_width=[0, 0, 0, 0, 0, 0, 0, 0])
///  -> lv1 = lv
///
/// An average pool of a 1x1 convolution's result pools the convolution's input instead, and the
/// convolution runs on the pooled positions (DenseNet's transitions: a quarter of the
/// multiply-adds):
///
///     lv1 = R.nn.conv2d(x, w)                                              (1, 128, 56, 56)
///     lv2 = R.nn.avg_pool2d(lv1, pool_size=[2, 2], strides=[2, 2])          (1, 128, 28, 28)
///  -> lv1_pool = R.nn.avg_pool2d(x, pool_size=[2, 2], strides=[2, 2])       (1, 256, 28, 28)
///     lv2 = R.nn.conv2d(lv1_pool, w)                                        (1, 128, 28, 28)
///
/// The two commute because both are linear and each acts on an axis the other leaves alone: a
/// 1x1 convolution (stride 1, no padding, any groups, no bias) mixes channels position by
/// position, an average pool mixes positions channel by channel with weights that do not depend
/// on the channel — whatever its padding, `ceil_mode` or `count_include_pad` (a padded position
/// is 0 before and after the convolution). Only the order of the sums changes. The rewrite is
/// made when the convolution's result is used only by the pool, both are floating point, and it
/// costs fewer operations: the pool then runs over the input's channels, the convolution over
/// the pool's positions.
///
/// Runs at opt level 1, in `kiln.simplify`, before the fusion passes (a bias add or activation
/// between the two keeps them apart; `fuse_epilogue` would fold those into the convolution).
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/transform/analyses.hpp>
#include <kiln/transform/canonicalize_bindings.hpp>
#include <kiln/transform/detail/fusion.hpp>
#include <kiln/transform/detail/rewrite.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace kiln::transform {

struct simplify_ops {
  static constexpr std::string_view name = "simplify_ops";
  static constexpr std::string_view description =
      "Removes operators that do nothing (a pad of zero widths) and pools the input of a 1x1 convolution rather than its output.";
  static constexpr int opt_level = 1;

  /// Statistics: "zero pads removed", "pools moved before a 1x1 convolution".
  ir::function operator()(const ir::function& f, const ir::ir_module& m, pass_context& ctx) const {
    if (ir::detail::has_skip_optimization(*f)) return f;
    if (!ir::isa<ir::seq_expr_node>(f->body)) return f;
    ir::function g = remove_zero_pads(f, m, ctx);
    return pool_before_pointwise_conv(g, ctx);
  }

private:
  static ir::function remove_zero_pads(const ir::function& f, const ir::ir_module& m, pass_context& ctx) {
    std::int64_t removed = 0;
    auto on_body = [](const ir::expr& e) { return e; };
    auto on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out) {
      if (detail::is_op_call(b.value, "nn.pad")) {
        auto& c = static_cast<const ir::call_node&>(*b.value);
        const auto* widths = c.attrs.find("pad_width");
        const auto* w = widths ? widths->get_if<ir::int_array>() : nullptr;
        if (w && std::all_of(w->begin(), w->end(), [](std::int64_t v) { return v == 0; }) && ir::isa<ir::var_node>(c.args[0])) {
          ++removed;
          out.push_back({b.variable, c.args[0], b.cast_type});
          return;
        }
      }
      out.push_back(b);
    };
    ir::function g = detail::with_body(f, detail::rewrite_seq(f->body, on_binding, on_body));
    if (!removed) return f;
    ctx.statistic(name, "zero pads removed") += removed;
    return canonicalize_bindings{}(g, m, ctx);  // the pads' uses read their inputs
  }

  /// The 1x1 convolution `e` (stride 1, no padding, NCHW/OIHW, the operand's dtype out) of a
  /// floating-point tensor of known shape, or null.
  static const ir::call_node* pointwise_conv(const ir::expr& e) {
    if (!detail::is_op_call(e, "nn.conv2d")) return nullptr;
    auto& c = static_cast<const ir::call_node&>(*e);
    auto* x = ir::dyn_cast<ir::tensor_type_node>(c.args[0]->checked_type);
    auto* w = ir::dyn_cast<ir::tensor_type_node>(c.args[1]->checked_type);
    if (!x || !w || !x->shape || !w->shape || x->shape->size() != 4 || w->shape->size() != 4) return nullptr;
    if (detail::float_dtype(c.args[0]->checked_type) == dtype::void_) return nullptr;
    if (ir::as_int((*w->shape)[2]) != 1 || ir::as_int((*w->shape)[3]) != 1) return nullptr;
    const auto ints = [&](const char* key) { return c.attrs.get_or<ir::int_array>(key, {}); };
    if (ints("strides") != ir::int_array{1, 1} || ints("padding") != ir::int_array{0, 0, 0, 0}) return nullptr;
    if (c.attrs.get_or<std::string>("data_layout", "NCHW") != "NCHW" || c.attrs.get_or<std::string>("kernel_layout", "OIHW") != "OIHW")
      return nullptr;
    const dtype out = c.attrs.get_or<dtype>("out_dtype", dtype::void_);
    if (out != dtype::void_ && out != x->dt) return nullptr;
    return &c;
  }

  /// The element counts of a static NCHW shape `t`: {N * H * W positions, C}; nullopt if unknown.
  static std::optional<std::pair<std::int64_t, std::int64_t>> positions_and_channels(const ir::type& t) {
    auto* tt = ir::dyn_cast<ir::tensor_type_node>(t);
    if (!tt || !tt->shape || tt->shape->size() != 4) return std::nullopt;
    std::int64_t d[4];
    for (std::size_t i = 0; i < 4; ++i) {
      const std::optional<std::int64_t> v = ir::as_int((*tt->shape)[i]);
      if (!v) return std::nullopt;
      d[i] = *v;
    }
    return std::pair{d[0] * d[2] * d[3], d[1]};
  }

  /// Whether pooling the input of `conv` (whose result `mid` the pool `pool` of result `pooled`
  /// reads) costs fewer operations: a pool costs about its window's size per output element.
  static bool pool_first_pays(const ir::call_node& conv, const ir::type& mid, const ir::call_node& pool, const ir::type& pooled) {
    const auto in = positions_and_channels(conv.args[0]->checked_type), out = positions_and_channels(mid), p = positions_and_channels(pooled);
    const ir::int_array window = pool.attrs.get_or<ir::int_array>("pool_size", {});
    if (!in || !out || !p || window.size() != 2) return false;
    const double taps = double(window[0] * window[1]), groups = double(conv.attrs.get_or<std::int64_t>("groups", 1));
    const double macs = 2 * double(out->second) * double(in->second) / groups;  // per position
    const double before = macs * double(out->first) + double(out->second) * double(p->first) * taps;
    const double after = double(in->second) * double(p->first) * taps + macs * double(p->first);
    return after < before;
  }

  /// A pool to move: the convolution it reads (its binding variable and call).
  struct moved_pool {
    const ir::var_node* conv_var;
    const ir::call_node* conv;
  };
  using pools_to_move = std::unordered_map<const ir::var_node*, moved_pool>;  // by the pool's variable

  /// Finds the pools to move in sequence `seq` (and its branches): each pool with its
  /// convolution, both bound in the same block, the convolution's result used only there.
  static void find_pools(const ir::expr& seq, const use_counts::result_type& uses, pools_to_move& pools) {
    auto& s = static_cast<const ir::seq_expr_node&>(*seq);
    for (const ir::binding_block& block : s.blocks) {
      std::unordered_map<const ir::var_node*, const ir::call_node*> convs;  // this block's
      for (const ir::binding& b : block.bindings) {
        if (auto* i = ir::dyn_cast<ir::if_node>(b.value)) {
          find_pools(i->then_branch, uses, pools);
          find_pools(i->else_branch, uses, pools);
          continue;
        }
        if (b.is_match_cast()) continue;
        if (const ir::call_node* c = pointwise_conv(b.value)) {
          convs[b.variable.get()] = c;
          continue;
        }
        if (!detail::is_op_call(b.value, "nn.avg_pool2d")) continue;
        auto& pool = static_cast<const ir::call_node&>(*b.value);
        auto* v = ir::dyn_cast<ir::var_node>(pool.args[0]);
        auto it = v ? convs.find(v) : convs.end();
        auto u = v ? uses.find(v) : uses.end();
        if (it == convs.end() || u == uses.end() || u->second != 1) continue;
        if (pool.attrs.get_or<std::string>("layout", "NCHW") != "NCHW") continue;
        if (!pool_first_pays(*it->second, v->checked_type, pool, b.variable->checked_type)) continue;
        pools[b.variable.get()] = {v, it->second};
      }
    }
  }

  static ir::function pool_before_pointwise_conv(const ir::function& f, pass_context& ctx) {
    pools_to_move pools;
    find_pools(f->body, use_counts{}.run(f), pools);
    if (pools.empty()) return f;
    std::unordered_set<const ir::var_node*> moved_convs;  // bound again after their pools
    for (const auto& [pool, p] : pools) moved_convs.insert(p.conv_var);
    auto on_body = [](const ir::expr& e) { return e; };
    auto on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out, bool dataflow) {
      if (moved_convs.count(b.variable.get())) return;
      auto it = pools.find(b.variable.get());
      if (it == pools.end()) {
        out.push_back(b);
        return;
      }
      const ir::call_node& conv = *it->second.conv;
      const ir::expr pooled = ir::call_op("nn.avg_pool2d", {conv.args[0]}, static_cast<const ir::call_node&>(*b.value).attrs);
      const std::string n = it->second.conv_var->name_hint + "_pool";  // the pooled input
      const ir::var v = dataflow ? ir::make_dataflow_var(n, pooled->checked_type) : ir::make_var(n, pooled->checked_type);
      out.push_back({v, pooled, {}});
      out.push_back({b.variable, ir::call_op("nn.conv2d", {ir::expr(v), conv.args[1]}, conv.attrs), b.cast_type});
    };
    ir::function g = detail::with_body(f, detail::rewrite_seq(f->body, on_binding, on_body));
    ctx.statistic(name, "pools moved before a 1x1 convolution") += std::int64_t(pools.size());
    return g;
  }
};

}  // namespace kiln::transform
