// SPDX-License-Identifier: Apache-2.0
/// \file
/// `legalize_ops`: every operator call becomes a call of a kernel (Relax's LegalizeOps, with
/// kiln's kernels in place of generated TIR).
///
///     lv = R.nn.softmax(x, axis=1)
///  -> lv = R.call_dps_packed(R.ExternFunc("kernels.softmax"), (x, R.prim_value(1)), out_sinfo=R.Tensor((n, 10), "float32"))
///     v  = R.reshape(x, R.shape([n, 16]))
///  -> v  = R.call_packed("kernels.reshape_view", x, R.shape([n, 16]), sinfo_args=R.Tensor((n, 16), "float32"))
///
/// Attributes become values (`kernel_lowering.hpp` has the rules). `R.call_tir` of a kernel
/// function with a body is replaced by the body (whose operators are then lowered); of an external
/// kernel, by a `call_dps_packed` of its `global_symbol`. Operators already in lowered form pass
/// through. Fusion passes run before this one.
///
/// Operator calls nested inside other expressions (an operand, a tuple, a function's or branch's
/// result) are bound to variables of their own first.
///
/// A call that cannot be lowered — an operator without a kernel, an attribute the kernel does not
/// support, a result whose shape or dtype is unknown — is an error; the pass reports **all** of
/// them in one `lowering_error`, one line each, naming the operator, the function and the binding.
#pragma once

#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/properties.hpp>

namespace kiln::transform {

struct legalize_ops {
  static constexpr std::string_view name = "legalize_ops";
  static constexpr std::string_view description =
      "Lowers every operator call to a call of its CPU kernel (R.call_dps_packed(\"kernels.<op>\", ...)), attributes to values; reports every call it cannot lower.";
  static constexpr int opt_level = 0;
  using establishes = property_list<properties::legalized>;

  ir::ir_module operator()(const ir::ir_module& m, pass_context&) const {
    std::vector<std::string> problems;
    ir::ir_module out = m;
    for (auto& e : m->functions()) {
      auto f = ir::ref_cast<ir::function_node>(e.func);
      if (!f) continue;
      ir::function g = lower_function(m, e.gv->name, f, problems);
      if (g != f) out = ir::with_function(out, e.gv->name, g);
    }
    if (!problems.empty()) {
      std::string msg = "kiln::transform::legalize_ops: " + std::to_string(problems.size()) +
                        (problems.size() == 1 ? " call cannot" : " calls cannot") + " be lowered to kernels:";
      for (auto& p : problems) msg.append("\n  ").append(p);
      throw lowering_error(msg);
    }
    return out;
  }

  /// The kernel table used (kiln's global one unless set).
  const kernel_lowering* table = nullptr;

private:
  static bool passes_through(std::string_view op) { return properties::detail::is_lowered_op(op); }

  ir::function lower_function(const ir::ir_module& m, const std::string& fn_name, const ir::function& f,
                              std::vector<std::string>& problems) const {
    const kernel_lowering& t = table ? *table : kernel_lowering::global();
    auto where = [&](const std::string& op, const ir::binding* b) {
      return "R." + op + " in function '" + fn_name + "', " + (b ? "binding '" + b->variable->name_hint + "'" : std::string("the result"));
    };
    // Lowers one operator call bound to `v` (appending to `out`); nested operator calls in its
    // operands are bound to variables of their own first.
    std::function<void(const ir::var&, const ir::expr&, const ir::type&, const ir::binding*, std::vector<ir::binding>&)> lower_bound;
    auto hoist = [&](const ir::expr& e, const ir::binding* b, bool dataflow, std::vector<ir::binding>& out) -> ir::expr {
      struct hoister final : ir::expr_mutator {
        std::function<ir::expr(const ir::expr&)> bind;
        ir::expr mutate_call(const ir::call_node& n, const ir::expr& self) override {
          ir::expr e = expr_mutator::mutate_call(n, self);
          if (const ir::op_node* o = detail::callee_op(e); o && !passes_through(o->name())) return bind(e);
          return e;
        }
        ir::expr mutate_if(const ir::if_node&, const ir::expr& self) override { return self; }
        ir::expr mutate_seq(const ir::seq_expr_node&, const ir::expr& self) override { return self; }
      } h;
      h.bind = [&](const ir::expr& call) -> ir::expr {
        ir::var v = dataflow ? ir::make_dataflow_var("lv", call->checked_type) : ir::make_var("lv", call->checked_type);
        lower_bound(v, call, {}, b, out);
        return v;
      };
      return h.mutate(e);
    };
    lower_bound = [&](const ir::var& v, const ir::expr& value, const ir::type& cast, const ir::binding* b, std::vector<ir::binding>& out) {
      const ir::op_node* o = detail::callee_op(value);
      if (!o || passes_through(o->name())) {
        out.push_back({v, value, cast});
        return;
      }
      // Operands first: nested calls get variables of their own.
      auto& c = static_cast<const ir::call_node&>(*value);
      std::vector<ir::expr> args;
      bool changed = false;
      for (auto& a : c.args) {
        args.push_back(hoist(a, b, v->is_dataflow(), out));
        changed |= args.back() != a;
      }
      ir::expr call = changed ? ir::expr_mutator::rebuild_call(c, c.callee, std::move(args)) : value;
      auto& cn = static_cast<const ir::call_node&>(*call);
      try {
        if (o->name() == "call_tir") {
          ir::binding fake{v, call, cast};
          return lower_call_tir(m, cn, fake, out, t);
        }
        out.push_back({v, emit(t.lower(cn), cn.checked_type), cast});
      } catch (const lowering_error& err) {
        problems.push_back(where(o->name(), b) + ": " + err.what());
        out.push_back({v, call, cast});
      }
    };
    auto on_body = [&](const ir::expr& body, std::vector<ir::binding>& out) -> ir::expr {
      if (ir::isa<ir::var_node>(body)) return body;
      // A result that computes (an operator call, a tuple of them) is bound first.
      bool computes = false;
      detail::for_each_subexpr(body, [&](const ir::expr& x) {
        if (const ir::op_node* o = detail::callee_op(x); o && !passes_through(o->name())) computes = true;
      });
      if (!computes) return body;
      if (detail::callee_op(body)) {
        ir::var r = ir::make_var("lv", body->checked_type);
        lower_bound(r, body, {}, nullptr, out);
        return r;
      }
      return hoist(body, nullptr, false, out);
    };
    auto on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out) {
      if (ir::isa<ir::if_node>(b.value)) return out.push_back(b);
      const ir::op_node* o = detail::callee_op(b.value);
      if (o && !passes_through(o->name())) return lower_bound(b.variable, b.value, b.cast_type, &b, out);
      out.push_back({b.variable, hoist(b.value, &b, b.variable->is_dataflow(), out), b.cast_type});
    };
    return detail::with_body(f, detail::rewrite_seq(f->body, on_binding, on_body));
  }

  /// The lowered call: destination-passing, or an external call that returns a view.
  static ir::expr emit(const kernel_call& k, const ir::type& result) {
    if (k.kind == kernel_call::form::destination_passing) require_allocatable(result);
    return lower::emit(k, result);
  }

  static void require_allocatable(const ir::type& t) {
    if (auto* tt = ir::dyn_cast<ir::tuple_type_node>(t)) {
      for (auto& f : tt->fields) require_allocatable(f);
      return;
    }
    auto* tt = ir::dyn_cast<ir::tensor_type_node>(t);
    if (!tt || !tt->shape || !is_known(tt->dt))
      throw lowering_error("the result type " + ir::to_string(t) +
                           " does not give the shape and dtype of the output to allocate; add an R.match_cast to a known shape before this call");
  }

  static void lower_call_tir(const ir::ir_module& m, const ir::call_node& call, const ir::binding& b, std::vector<ir::binding>& out,
                             const kernel_lowering& table) {
    auto& gv = static_cast<const ir::global_var_node&>(*call.args[0]);
    auto pf = ir::ref_cast<ir::prim_func_node>(m->lookup(gv.name));
    if (!pf) throw lowering_error("'" + gv.name + "' is not a kernel function of the module");
    std::vector<ir::expr> inputs;
    if (auto* tup = ir::dyn_cast<ir::tuple_node>(call.args[1])) inputs = tup->fields;
    else
      for (std::size_t i = 0; i < static_cast<const ir::tuple_type_node&>(*call.args[1]->checked_type).fields.size(); ++i)
        inputs.push_back(ir::make_tuple_get_item(call.args[1], static_cast<int>(i)));
    if (!pf->body) {
      require_allocatable(call.type_args[0]);
      const std::string symbol = pf->attrs.get_or<std::string>(ir::attr::global_symbol, gv.name);
      out.push_back({b.variable, ir::call_op("call_dps_packed", {ir::make_extern_func(symbol), ir::make_tuple(inputs)}, {}, {call.type_args[0]}), b.cast_type});
      return;
    }
    // Inline the body: its parameters become the inputs, its bindings get fresh variables of the
    // kind the enclosing block uses (types are inferred again from the caller's operands).
    struct inliner final : ir::expr_mutator {
      bool dataflow;
      explicit inliner(bool df) : dataflow(df) {}
      void bind(const ir::var& p, const ir::expr& arg) { arg_of[p.get()] = arg; }
      ir::expr mutate_var(const ir::var_node& n, const ir::expr& self) override {
        if (auto it = arg_of.find(&n); it != arg_of.end()) return it->second;
        return expr_mutator::mutate_var(n, self);
      }
      ir::binding mutate_binding(const ir::binding& b) override {
        ir::expr value = mutate(b.value);
        ir::type t = b.is_match_cast() ? b.cast_type : value->checked_type;
        ir::var v = dataflow ? ir::make_dataflow_var(b.variable->name_hint, t) : ir::make_var(b.variable->name_hint, t);
        var_remap_[b.variable.get()] = v;
        return {v, value, b.cast_type};
      }
      std::unordered_map<const ir::var_node*, ir::expr> arg_of;
    } in(b.variable->is_dataflow());
    for (std::size_t i = 0; i < pf->num_inputs() && i < inputs.size(); ++i) in.bind(pf->params[i], inputs[i]);
    auto& body = static_cast<const ir::seq_expr_node&>(*pf->body);
    bool changed = false;
    for (auto& block : body.blocks) {
      ir::binding_block nb = in.mutate_binding_block(block, changed);
      for (auto& x : nb.bindings) {
        auto* o = detail::callee_op(x.value);
        if (o && !passes_through(o->name())) {
          kernel_call k = table.lower(static_cast<const ir::call_node&>(*x.value));
          x.value = emit(k, x.value->checked_type);
        }
        out.push_back(std::move(x));
      }
    }
    ir::expr result = in.mutate(body.body);
    if (auto* o = detail::callee_op(result); o && !passes_through(o->name()))
      result = emit(table.lower(static_cast<const ir::call_node&>(*result)), result->checked_type);
    out.push_back({b.variable, result, b.cast_type});
  }
};

}  // namespace kiln::transform
