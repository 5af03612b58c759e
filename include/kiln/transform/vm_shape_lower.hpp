// SPDX-License-Identifier: Apache-2.0
/// \file
/// `vm_shape_lower`: symbolic shapes become work on the VM's shape heap, and every argument is
/// checked against its parameter's type (Relax's VMShapeLower).
///
/// A function whose types mention size variables gets a heap (`vm.builtin.alloc_shape_heap`) with
/// one slot per size variable and per compound dimension (`n * 4`). At entry, each parameter is
/// checked — `vm.builtin.check_tensor_info` (rank, dtype), then `vm.builtin.match_shape`, which
/// compares static dimensions, stores a size variable where it first appears and compares it
/// where it appears again — and compound dimensions are computed (`vm.builtin.eval_shape_expr`)
/// and compared. `R.match_cast` is lowered the same way where it stands. Every shape or value the
/// body computes from size variables becomes a `vm.builtin.make_shape` (or
/// `vm.builtin.shape_heap_load`) bound just before its use:
///
///     def main(x: R.Tensor((n, 4), "float32")):
///         lv = R.call_packed("kernels.reshape_view", x, R.shape([n * 4]), ...)
///  -> def main(x: R.Tensor((n, 4), "float32")):
///         shape_heap = R.call_builtin_with_ctx(R.ExternFunc("vm.builtin.alloc_shape_heap"), (R.prim_value(2),), ...)
///         _ = R.call_packed("vm.builtin.check_tensor_info", x, R.prim_value(2), R.str("float32"), R.str("main: parameter 'x' ..."), ...)
///         _ = R.call_packed("vm.builtin.match_shape", x, shape_heap, R.prim_value(2), R.prim_value(1), R.prim_value(0),
///                           R.prim_value(0), R.prim_value(4), R.str("main: parameter 'x' ..."), ...)
///         _ = R.call_packed("vm.builtin.eval_shape_expr", shape_heap, R.prim_value(1), ...)   # slot 1 = n * 4
///         s = R.call_packed("vm.builtin.make_shape", shape_heap, R.prim_value(1), R.prim_value(1), R.prim_value(1), ...)
///         lv = R.call_packed("kernels.reshape_view", x, s, ...)
///
/// A size variable bounded by the function's `tir_var_upper_bound` attribute is checked against
/// its bound (`vm.builtin.check_upper_bound`) where it is first defined: memory planning sized
/// storage for the bound.
///
/// Error messages of the checks name the function, the parameter (or match_cast binding) and its
/// declared type; the VM's built-ins add what differs.
#pragma once

#include <kiln/ir/printer.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/properties.hpp>

#include <unordered_map>

namespace kiln::transform {

struct vm_shape_lower {
  static constexpr std::string_view name = "vm_shape_lower";
  static constexpr std::string_view description =
      "Lowers symbolic shapes to the VM's shape heap: shape checks at entry, computed dimensions, shape construction.";
  static constexpr int opt_level = 0;
  using needs = property_list<properties::builtins_lowered>;
  using establishes = property_list<properties::shapes_lowered>;

  ir::ir_module operator()(const ir::ir_module& m, pass_context&) const {
    ir::ir_module out = m;
    for (auto& e : m->functions())
      if (auto f = ir::ref_cast<ir::function_node>(e.func)) {
        ir::function g = lowerer(e.gv->name, f).run();
        if (g != f) out = ir::with_function(out, e.gv->name, g);
      }
    return out;
  }

private:
  class lowerer {
  public:
    lowerer(std::string name, ir::function f) : name_(std::move(name)), f_(std::move(f)) {}

    ir::function run() {
      if (auto* ub = f_->attrs.find(properties::upper_bound_attr)) {
        bounds_ = ub->get_if<ir::int_dict>();
        if (!bounds_)
          throw error("kiln::transform::vm_shape_lower: in function '" + name_ + "', attribute " + properties::upper_bound_attr +
                      " must be a dict of int such as {\"n\": 1024}, got " + ir::name(ub->kind()));
      }
      scan();
      std::vector<ir::binding> prologue;
      if (slots_ > 0) {
        heap_ = ir::make_var("shape_heap", ir::tensor_type({slots_}, dtype::int64));
        prologue.push_back({heap_, detail::call_builtin_with_ctx("vm.builtin.alloc_shape_heap", {ir::make_prim_value(slots_)}, heap_->checked_type), {}});
      }
      std::vector<pending> later;
      for (auto& p : f_->params) check_value(p, p->checked_type, context("parameter '" + p->name_hint + "'", p->checked_type), prologue, later);
      finish_checks(later, prologue);

      auto on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out) {
        ir::binding nb = b;
        nb.value = lower_values(b.value, out);
        if (b.is_match_cast()) {
          ir::expr v = nb.value;
          if (!ir::isa<ir::var_node>(v)) {
            ir::var tmp = ir::make_var(b.variable->name_hint + "_value", v->checked_type);
            out.push_back({tmp, v, {}});
            v = tmp;
            nb.value = tmp;
          }
          std::vector<pending> pend;
          check_value(v, b.cast_type, context("match_cast '" + b.variable->name_hint + "'", b.cast_type), out, pend);
          finish_checks(pend, out);
        }
        out.push_back(std::move(nb));
      };
      auto on_body = [&](const ir::expr& e, std::vector<ir::binding>& out) { return lower_values(e, out); };
      ir::expr body = detail::rewrite_seq(f_->body, on_binding, on_body);
      if (!prologue.empty()) {
        auto& s = static_cast<const ir::seq_expr_node&>(*body);
        std::vector<ir::binding_block> blocks = s.blocks;
        blocks.insert(blocks.begin(), ir::binding_block{false, std::move(prologue)});
        body = ir::make_seq(std::move(blocks), s.body);
      }
      return detail::with_body(f_, std::move(body));
    }

  private:
    struct pending {  // a compound dimension to compare once it can be computed
      ir::expr value;
      int ndim;
      std::vector<std::pair<int, ir::prim_expr>> dims;  // position, expression
      std::string ctx;
    };

    const ir::int_dict* bounds_ = nullptr;

    std::string context(const std::string& what, const ir::type& t) const { return name_ + ": " + what + " (" + ir::to_string(t) + ")"; }

    static ir::expr packed(const std::string& builtin, std::vector<ir::expr> args, ir::type t = ir::tuple_type({})) {
      return ir::call_extern(builtin, std::move(args), std::move(t));
    }
    static ir::var unit() { return ir::make_var("_", ir::tuple_type({})); }
    static ir::expr imm(std::int64_t v) { return ir::make_prim_value(v); }
    ir::expr heap_arg() const { return heap_ ? ir::expr(heap_) : ir::call_op("null_value", {}); }

    // ---- slots ------------------------------------------------------------------------------------------

    void scan() {
      auto note_type = [&](const ir::type& t) {
        std::vector<ir::prim_expr> dims;
        dims_of(t, dims);
        for (auto& d : dims) note(d);
      };
      for (auto& p : f_->params) note_type(p->checked_type);
      ir::post_order_visit(f_->body, [&](const ir::expr& e) {
        if (auto* s = ir::dyn_cast<ir::seq_expr_node>(e))
          for (auto& b : s->blocks)
            for (auto& bd : b.bindings)
              if (bd.is_match_cast()) note_type(bd.cast_type);
        if (auto* s = ir::dyn_cast<ir::shape_expr_node>(e))
          for (auto& d : s->values) note(d);
        if (auto* p = ir::dyn_cast<ir::prim_value_node>(e); p && p->int_value) note(p->int_value);
      });
    }
    static void dims_of(const ir::type& t, std::vector<ir::prim_expr>& out) {
      if (auto* tt = ir::dyn_cast<ir::tensor_type_node>(t); tt && tt->shape) out.insert(out.end(), tt->shape->begin(), tt->shape->end());
      if (auto* st = ir::dyn_cast<ir::shape_type_node>(t); st && st->values) out.insert(out.end(), st->values->begin(), st->values->end());
      if (auto* tt = ir::dyn_cast<ir::tuple_type_node>(t))
        for (auto& x : tt->fields) dims_of(x, out);
    }
    void note(const ir::prim_expr& d) {
      if (ir::as_int(d)) return;
      std::vector<ir::size_var> vars;
      ir::collect_size_vars(d, vars);
      for (auto& v : vars)
        if (!var_slot_.count(v.get())) var_slot_[v.get()] = slots_++;
      if (!ir::isa<ir::size_var_node>(d) && slot_of_compound(d) < 0) compound_.push_back({d, slots_++, false});
    }
    std::int64_t slot_of_compound(const ir::prim_expr& d) const {
      for (auto& c : compound_)
        if (ir::prove_equal(c.expr, d)) return c.slot;
      return -1;
    }
    /// The heap slot holding `d` (a size variable or a compound dimension).
    std::int64_t slot(const ir::prim_expr& d) const {
      if (auto* v = ir::dyn_cast<ir::size_var_node>(d)) return var_slot_.at(v);
      return slot_of_compound(d);
    }
    bool computable(const ir::prim_expr& d) const {
      std::vector<ir::size_var> vars;
      ir::collect_size_vars(d, vars);
      for (auto& v : vars)
        if (!defined_.count(v.get())) return false;
      return true;
    }

    /// Emits the computation of every compound dimension whose variables are now all defined.
    void compute_ready(std::vector<ir::binding>& out) {
      for (auto& c : compound_) {
        if (c.computed || !computable(c.expr)) continue;
        std::vector<ir::expr> args{heap_, imm(c.slot)};
        postfix(c.expr, args);
        out.push_back({unit(), packed("vm.builtin.eval_shape_expr", std::move(args)), {}});
        c.computed = true;
      }
    }
    void postfix(const ir::prim_expr& d, std::vector<ir::expr>& args) const {
      if (auto c = ir::as_int(d)) {
        args.push_back(imm(0));
        args.push_back(imm(*c));
      } else if (auto* v = ir::dyn_cast<ir::size_var_node>(d)) {
        args.push_back(imm(1));
        args.push_back(imm(var_slot_.at(v)));
      } else {
        auto& b = static_cast<const ir::prim_binary_node&>(*d);
        postfix(b.a, args);
        postfix(b.b, args);
        args.push_back(imm(2));
        args.push_back(imm(static_cast<std::int64_t>(b.op)));
      }
    }

    // ---- checks -----------------------------------------------------------------------------------------

    void check_value(const ir::expr& x, const ir::type& t, const std::string& ctx, std::vector<ir::binding>& out, std::vector<pending>& later) {
      if (auto* tt = ir::dyn_cast<ir::tensor_type_node>(t)) {
        out.push_back({unit(), packed("vm.builtin.check_tensor_info", {x, imm(tt->ndim), ir::make_string_imm(is_known(tt->dt) ? std::string(kiln::name(tt->dt)) : ""), ir::make_string_imm(ctx)}), {}});
        if (tt->shape) match(x, *tt->shape, ctx, out, later);
      } else if (auto* st = ir::dyn_cast<ir::shape_type_node>(t)) {
        out.push_back({unit(), packed("vm.builtin.check_shape_info", {x, imm(st->ndim), ir::make_string_imm(ctx)}), {}});
        if (st->values) match(x, *st->values, ctx, out, later);
      } else if (auto* tt = ir::dyn_cast<ir::tuple_type_node>(t)) {
        out.push_back({unit(), packed("vm.builtin.check_tuple_info", {x, imm(std::int64_t(tt->fields.size())), ir::make_string_imm(ctx)}), {}});
        for (std::size_t i = 0; i < tt->fields.size(); ++i) {
          if (!needs_check(tt->fields[i])) continue;
          ir::var field = ir::make_var("field", tt->fields[i]);
          out.push_back({field, packed("vm.builtin.tuple_getitem", {x, imm(std::int64_t(i))}, tt->fields[i]), {}});
          check_value(field, tt->fields[i], ctx + " field " + std::to_string(i), out, later);
        }
      }
    }
    static bool needs_check(const ir::type& t) {
      return ir::isa<ir::tensor_type_node>(t) || ir::isa<ir::shape_type_node>(t) || ir::isa<ir::tuple_type_node>(t);
    }

    void match(const ir::expr& x, const std::vector<ir::prim_expr>& dims, const std::string& ctx, std::vector<ir::binding>& out,
               std::vector<pending>& later) {
      std::vector<ir::expr> args{x, heap_arg(), imm(std::int64_t(dims.size()))};
      pending p{x, int(dims.size()), {}, ctx};
      std::vector<std::pair<const ir::size_var_node*, std::int64_t>> bounded;  // defined here, with a bound
      for (std::size_t i = 0; i < dims.size(); ++i) {
        const ir::prim_expr& d = dims[i];
        vm_mode mode = vm_mode::no_op;
        std::int64_t v = 0;
        if (auto c = ir::as_int(d)) {
          mode = vm_mode::assert_equal_to_imm, v = *c;
        } else if (auto* sv = ir::dyn_cast<ir::size_var_node>(d)) {
          v = var_slot_.at(sv);
          mode = defined_.insert(sv).second ? vm_mode::store_to_heap : vm_mode::assert_equal_to_load;
          if (mode == vm_mode::store_to_heap && bounds_)
            if (auto it = bounds_->find(sv->name); it != bounds_->end()) bounded.emplace_back(sv, it->second);
        } else {
          p.dims.emplace_back(int(i), d);
        }
        args.push_back(imm(static_cast<std::int64_t>(mode)));
        args.push_back(imm(v));
      }
      args.push_back(ir::make_string_imm(ctx));
      out.push_back({unit(), packed("vm.builtin.match_shape", std::move(args)), {}});
      for (auto [sv, bound] : bounded)
        out.push_back({unit(), packed("vm.builtin.check_upper_bound", {heap_arg(), imm(var_slot_.at(sv)), imm(bound), ir::make_string_imm(sv->name), ir::make_string_imm(ctx)}), {}});
      if (!p.dims.empty()) later.push_back(std::move(p));
    }

    /// Computes what became computable and compares the compound dimensions waiting for it.
    void finish_checks(std::vector<pending>& later, std::vector<ir::binding>& out) {
      if (heap_) compute_ready(out);
      for (auto& p : later) {
        std::vector<ir::expr> args{p.value, heap_arg(), imm(p.ndim)};
        std::size_t k = 0;
        for (int i = 0; i < p.ndim; ++i) {
          if (k < p.dims.size() && p.dims[k].first == i) {
            if (!computable(p.dims[k].second))
              throw error("kiln::transform::vm_shape_lower: in function '" + name_ + "', dimension " + ir::to_string(p.dims[k].second) +
                          " of " + p.ctx + " uses a size variable that nothing defines before it");
            args.push_back(imm(static_cast<std::int64_t>(vm_mode::assert_equal_to_load)));
            args.push_back(imm(slot(p.dims[k].second)));
            ++k;
          } else {
            args.push_back(imm(static_cast<std::int64_t>(vm_mode::no_op)));
            args.push_back(imm(0));
          }
        }
        args.push_back(ir::make_string_imm(p.ctx));
        out.push_back({unit(), packed("vm.builtin.match_shape", std::move(args)), {}});
      }
      later.clear();
    }

    // ---- values computed from size variables ------------------------------------------------------------

    ir::expr lower_values(const ir::expr& e, std::vector<ir::binding>& out) {
      struct mutator final : ir::expr_mutator {
        lowerer& self;
        std::vector<ir::binding>& out;
        mutator(lowerer& s, std::vector<ir::binding>& o) : self(s), out(o) {}
        ir::expr mutate_shape_expr(const ir::shape_expr_node& n, const ir::expr& e) override {
          bool symbolic = false;
          for (auto& d : n.values) symbolic |= !ir::as_int(d);
          if (!symbolic) return e;
          std::vector<ir::expr> args{self.heap_, imm(std::int64_t(n.values.size()))};
          for (auto& d : n.values) {
            if (auto c = ir::as_int(d)) {
              args.push_back(imm(0));
              args.push_back(imm(*c));
            } else {
              args.push_back(imm(1));
              args.push_back(imm(self.slot(d)));
            }
          }
          ir::var s = ir::make_var("shape", n.checked_type);
          out.push_back({s, packed("vm.builtin.make_shape", std::move(args), n.checked_type), {}});
          return s;
        }
        ir::expr mutate_prim_value(const ir::prim_value_node& n, const ir::expr& e) override {
          if (!n.int_value || ir::as_int(n.int_value)) return e;
          ir::var v = ir::make_var("value", n.checked_type);
          out.push_back({v, packed("vm.builtin.shape_heap_load", {self.heap_, imm(self.slot(n.int_value))}, n.checked_type), {}});
          return v;
        }
        // Types are not recomputed here: what changed are shape values, not their types.
        ir::expr mutate_call(const ir::call_node& n, const ir::expr& self_expr) override {
          bool changed = false;
          std::vector<ir::expr> args = mutate_list(n.args, changed);
          if (!changed) return self_expr;
          return ir::make_call(n.callee, std::move(args), n.attrs, n.type_args, n.checked_type);
        }
      } m(*this, out);
      return m.mutate(e);
    }

    enum class vm_mode : std::int64_t { assert_equal_to_imm = 0, store_to_heap = 1, no_op = 2, assert_equal_to_load = 3 };
    struct compound {
      ir::prim_expr expr;
      std::int64_t slot;
      bool computed;
    };

    std::string name_;
    ir::function f_;
    ir::var heap_;
    std::int64_t slots_ = 0;
    std::unordered_map<const ir::size_var_node*, std::int64_t> var_slot_;
    std::vector<compound> compound_;
    std::unordered_set<const ir::size_var_node*> defined_;
  };
};

}  // namespace kiln::transform
