// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kv_cache_in_place`: a cache a function takes and returns one step longer — the past/present
/// key and value tensors of a transformer decoder exported to ONNX — is appended to in place
/// instead of copied (TVM's `attention_kv_cache_append`):
///
///     present = R.call_dps_packed(R.ExternFunc("kernels.concat"), ((past, k), R.prim_value(2)), out_sinfo=...)
///  -> present = R.call_packed("kernels.kv_cache_append", past, k, R.prim_value(2), R.prim_value(capacity), sinfo_args=...)
///
/// for a `concat` of two tensors whose first is a parameter of the function, with a symbolic
/// length along the axis (a cache that grows from call to call), and whose result the function
/// returns. `kernels.kv_cache_append` (`runtime/kv_cache.hpp`) returns the same values as
/// the concat, as a view of a capacity buffer: when the caller passes that view back as the next
/// step's past, the step writes only the new positions, so its memory traffic no longer grows with
/// the context. `capacity` is the largest length the axis can reach under the function's
/// `tir_var_upper_bound` (0 when a length is unbounded: the buffer then grows geometrically), so
/// with bounds every step after the first allocates no cache memory.
///
/// The returned caches are strided views (the capacity lies between batch rows and heads); every
/// kernel, the tensor API and the Python module read them as any other tensor. Runs at opt level
/// 1, after `legalize_ops` (it rewrites kernel calls).
#pragma once

#include <kiln/ir/pass_traits.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/properties.hpp>

#include <optional>
#include <set>

namespace kiln::transform {

struct kv_cache_in_place {
  static constexpr std::string_view name = "kv_cache_in_place";
  static constexpr std::string_view description =
      "Appends a returned concat(parameter, new) — a decoder's key/value cache — in place into a capacity buffer instead of copying it.";
  static constexpr int opt_level = 1;
  using needs = property_list<properties::legalized>;

  ir::function operator()(const ir::function& f, const ir::ir_module&, pass_context& ctx) const {
    if (ir::detail::has_skip_optimization(*f)) return f;
    auto* body = ir::dyn_cast<ir::seq_expr_node>(f->body);
    if (!body) return f;
    const std::set<const ir::var_node*> params = [&] {
      std::set<const ir::var_node*> s;
      for (auto& p : f->params) s.insert(p.get());
      return s;
    }();
    // What the function returns: the variables of its result, through tuples and renamings.
    std::set<const ir::var_node*> returned;
    ir::post_order_visit(body->body, [&](const ir::expr& x) {
      if (auto* v = ir::dyn_cast<ir::var_node>(x)) returned.insert(v);
    });
    for (auto block = body->blocks.rbegin(); block != body->blocks.rend(); ++block)
      for (auto b = block->bindings.rbegin(); b != block->bindings.rend(); ++b) {
        if (!returned.count(b->variable.get())) continue;
        if (ir::isa<ir::tuple_node>(b->value) || ir::isa<ir::var_node>(b->value))
          ir::post_order_visit(b->value, [&](const ir::expr& x) {
            if (auto* v = ir::dyn_cast<ir::var_node>(x)) returned.insert(v);
          });
      }
    const ir::int_dict* bounds = nullptr;
    if (auto* ub = f->attrs.find(properties::upper_bound_attr)) bounds = ub->get_if<ir::int_dict>();

    std::int64_t rewritten = 0;
    auto on_body = [](const ir::expr& e) { return e; };
    auto on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out) {
      ir::expr call = returned.count(b.variable.get()) ? rewrite(b.value, params, bounds) : ir::expr{};
      if (call) ++rewritten;
      out.push_back({b.variable, call ? call : b.value, b.cast_type});
    };
    ir::function g = detail::with_body(f, detail::rewrite_seq(f->body, on_binding, on_body));
    if (rewritten) ctx.statistic(name, "caches appended in place") += rewritten;
    return g;
  }

private:
  /// The in-place form of `e` when it is a concat of (a parameter, a tensor), else null.
  static ir::expr rewrite(const ir::expr& e, const std::set<const ir::var_node*>& params, const ir::int_dict* bounds) {
    if (!detail::is_op_call(e, "call_dps_packed")) return {};
    auto& c = static_cast<const ir::call_node&>(*e);
    auto* callee = c.args.size() == 2 ? ir::dyn_cast<ir::extern_func_node>(c.args[0]) : nullptr;
    if (!callee || callee->symbol != kernels::abi::concat::name || c.type_args.size() != 1) return {};
    auto* args = ir::dyn_cast<ir::tuple_node>(c.args[1]);
    if (!args || args->fields.size() != 2) return {};
    auto* inputs = ir::dyn_cast<ir::tuple_node>(args->fields[0]);
    auto* axis = ir::dyn_cast<ir::prim_value_node>(args->fields[1]);
    if (!inputs || inputs->fields.size() != 2 || !axis || !axis->int_value) return {};
    auto* past = ir::dyn_cast<ir::var_node>(inputs->fields[0]);
    if (!past || !params.count(past)) return {};
    auto* t = ir::dyn_cast<ir::tensor_type_node>(c.type_args[0]);
    auto* pt = ir::dyn_cast<ir::tensor_type_node>(past->checked_type);
    const std::optional<std::int64_t> a = ir::as_int(axis->int_value);
    if (!t || !t->shape || !pt || !pt->shape || !a) return {};
    const auto rank = std::int64_t(t->shape->size());
    if (*a < -rank || *a >= rank || std::int64_t(pt->shape->size()) != rank) return {};
    // Only a cache that can grow: a parameter whose length along the axis is fixed can never be
    // passed the longer result back, so appending in place would only add a buffer.
    if (ir::as_int((*pt->shape)[std::size_t(*a < 0 ? *a + rank : *a)])) return {};
    // The room a buffer needs: the upper bound of the result's length along the axis.
    std::int64_t capacity = 0;
    const ir::prim_expr& length = (*t->shape)[std::size_t(*a < 0 ? *a + rank : *a)];
    if (const std::optional<std::int64_t> known = ir::as_int(length)) capacity = *known;
    else if (bounds)
      capacity = ir::upper_bound(length, [&](const ir::size_var_node& v) -> std::optional<std::int64_t> {
                   auto it = bounds->find(v.name);
                   if (it == bounds->end()) return std::nullopt;
                   return it->second;
                 }).value_or(0);
    return lower::emit(lower::call<kernels::abi::kv_cache_append>(inputs->fields[0], inputs->fields[1], lower::as<lower::arg::integer>(args->fields[1]),
                                                                lower::integer(capacity)),
                       c.type_args[0]);
  }
};

}  // namespace kiln::transform
