// SPDX-License-Identifier: Apache-2.0
/// \file
/// `prepack_weights`: a matmul whose right operand is a constant matrix — a dense layer's
/// weight — gets that weight packed, once, at compile time, into the panels the GEMM's
/// micro-kernel reads (`kernels::prepack_weight`), and calls the kernel that reads them in place:
///
///     lv = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused"), (x, R.const(w), R.prim_value(0, "bool"),
///                            R.prim_value(1, "bool"), R.str("(relu (add x0 x1)) ; lv"), b), out_sinfo=...)
///  -> lv = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused_prepacked"), (x, R.const(w packed),
///                            R.prim_value(0, "bool"), R.shape([K, N, nr, kc]), R.str("(relu (add x0 x1)) ; lv"), b),
///                            out_sinfo=...)
///
/// Without it the GEMM packs every column panel of the weight on every call: for a batch of 64
/// rows through a 784 x 512 layer that is a sixth of the time. The packed constant replaces the
/// weight (a weight with transposed storage, as ONNX's Gemm keeps it, is packed transposed:
/// the kernel then reads it like any other), and a weight used by several matmuls is packed
/// once. `[K, N, nr, kc]` records the layout (`kernels::packed_weight_layout`): an executable
/// run where the vectors have another width than where it was compiled still gives the same
/// results, by unpacking the weight first.
///
/// Runs at opt level 1, after `legalize_ops` (it rewrites kernel calls) and before
/// `call_tir_rewrite`. Left alone: integer matmuls, weights that are parameters, batched
/// (3-D and up) or vector weights, and a constant used as the left operand.
#pragma once

#include <kiln/kernels/linalg.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/fusion.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/properties.hpp>
#include <kiln/transform/tensor_conversion.hpp>

#include <map>
#include <optional>
#include <utility>

namespace kiln::transform {

struct prepack_weights {
  static constexpr std::string_view name = "prepack_weights";
  static constexpr int opt_level = 1;
  using needs = property_list<properties::legalized>;

  ir::function operator()(const ir::function& f, const ir::ir_module&, pass_context& ctx) const {
    if (ir::detail::has_skip_optimization(*f)) return f;
    // Constants bound to variables of this function, and what each weight became (per weight
    // and transposition: a weight shared by several matmuls is packed once).
    std::map<const ir::var_node*, const ir::constant_node*> bound;
    std::map<std::pair<const ir::constant_node*, bool>, ir::expr> packed;
    std::int64_t rewritten = 0, bytes = 0;
    auto on_body = [](const ir::expr& e) { return e; };
    auto on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out) {
      if (auto* c = ir::dyn_cast<ir::constant_node>(b.value)) bound.emplace(b.variable.get(), c);
      ir::expr call = rewrite(b.value, bound, packed, bytes);
      if (call) ++rewritten;
      out.push_back({b.variable, call ? call : b.value, b.cast_type});
    };
    ir::function g = detail::with_body(f, detail::rewrite_seq(f->body, on_binding, on_body));
    if (rewritten) {
      ctx.statistic(name, "matmuls") += rewritten;
      ctx.statistic(name, "weights packed") += std::int64_t(packed.size());
      ctx.statistic(name, "bytes packed") += bytes;
    }
    return g;
  }

private:
  /// The prepacked form of kernel call `e`, or null when it has none.
  static ir::expr rewrite(const ir::expr& e, const std::map<const ir::var_node*, const ir::constant_node*>& bound,
                          std::map<std::pair<const ir::constant_node*, bool>, ir::expr>& packed, std::int64_t& bytes) {
    if (!detail::is_op_call(e, "call_dps_packed")) return {};
    auto& c = static_cast<const ir::call_node&>(*e);
    auto* callee = c.args.size() == 2 ? ir::dyn_cast<ir::extern_func_node>(c.args[0]) : nullptr;
    if (!callee) return {};
    const std::string_view kernel = callee->symbol;
    const bool fused = kernel == "kernels.matmul_fused";
    if (kernel != "kernels.matmul" && !fused) return {};
    auto* t = ir::dyn_cast<ir::tuple_node>(c.args[1]);
    if (!t || t->fields.size() < (fused ? 5u : 4u)) return {};
    const std::vector<ir::expr>& args = t->fields;
    // The weight: a constant matrix, in place or bound to a variable.
    const ir::constant_node* w = ir::dyn_cast<ir::constant_node>(args[1]);
    if (auto* v = ir::dyn_cast<ir::var_node>(args[1]); v && !w)
      if (auto it = bound.find(v); it != bound.end()) w = it->second;
    const std::optional<bool> tb = flag(args[3]);
    if (!w || !tb || !flag(args[2]) || w->data.shape().size() != 2 || (w->data.dt() != dtype::float32 && w->data.dt() != dtype::float64))
      return {};
    auto* at = ir::dyn_cast<ir::tensor_type_node>(args[0]->checked_type);
    if (!at || at->dt != w->data.dt()) return {};
    const std::int64_t k = w->data.shape()[*tb ? 1 : 0], n = w->data.shape()[*tb ? 0 : 1];
    ir::expr& p = packed[{w, *tb}];
    if (!p) {
      const runtime::tensor weight = to_tensor(w->data);
      p = ir::make_constant(to_ndarray(kernels::prepack_weight(weight, *tb)));
      bytes += std::int64_t(static_cast<const ir::constant_node&>(*p).data.bytes().size());
    }
    const kernels::packed_weight_layout l = kernels::native_weight_layout(w->data.dt(), k, n);
    std::vector<ir::expr> out{args[0], p, args[2], lower::ints({l.k, l.n, l.panels.nr, l.panels.kc})};
    out.insert(out.end(), args.begin() + 4, args.end());  // the epilogue's description and operands
    return detail::call_kernel(fused ? "kernels.matmul_fused_prepacked" : "kernels.matmul_prepacked", std::move(out), c.type_args[0]);
  }

  /// The value of a constant bool argument (a transpose flag).
  static std::optional<bool> flag(const ir::expr& e) {
    auto* p = ir::dyn_cast<ir::prim_value_node>(e);
    if (!p || !p->int_value) return std::nullopt;
    const std::optional<std::int64_t> v = ir::as_int(p->int_value);
    if (!v) return std::nullopt;
    return *v != 0;
  }
};

}  // namespace kiln::transform
