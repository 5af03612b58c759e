// SPDX-License-Identifier: Apache-2.0
/// \file
/// `vm_codegen`: bytecode for every graph-level function of a lowered module (the design's
/// CodeGenVM), through `vm::exec_builder`.
///
/// What it emits, binding by binding:
/// - parameters arrive in registers 0..N-1; every other value gets a register when it is bound
///   and gives it back after its last use (a linear scan over the function in program order), so
///   the register file holds the values live at once, not one register per binding as in TVM;
/// - `y = x` and `y = R.match_cast(x, T)` (checked by `vm_shape_lower` already) emit nothing: `y`
///   is `x`'s register;
/// - constants, static shapes, strings and floats go to the constant pool once each (tensors
///   with equal contents are shared), small integers are immediates: a binding of one is no
///   instruction, its uses read the literal;
/// - `R.call_packed(f, ...)` and calls of module functions are `Call`s; `R.call_builtin_with_ctx`
///   passes `%vm` first; a call whose result is never used writes `%void`;
/// - tuples are `vm.builtin.make_tuple`, element access `vm.builtin.tuple_getitem`;
/// - `if` is `vm.builtin.read_if_cond` (for a tensor condition), `If`, the branches, each ending
///   with a copy of its result into the merge register, and a `Goto` over the else branch;
/// - `R.vm.kill_object(x)` clears x's register.
///
/// The module must be lowered (`shapes_lowered`, `builtins_lowered`): anything else — an operator
/// call, a symbolic shape — is a `codegen_error` naming the function and the binding. Kernel
/// functions (`prim_func`) get no bytecode.
#pragma once

#include <kiln/codegen/lowered.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/vm/exec_builder.hpp>

#include <map>
#include <set>
#include <unordered_map>

namespace kiln::codegen {

struct vm_codegen_options {
  /// Give a register back after the last use of its value (off: one register per binding, as TVM).
  bool reuse_registers = true;
};

/// The run-time signature of an IR type: what the executable records of a function's parameters
/// and result. Symbolic dimensions keep their text (`n`, `n * 4`).
inline vm::type_signature signature_of(const ir::type& t) {
  vm::type_signature s;
  auto dims_of = [](const std::vector<ir::prim_expr>& ds) {
    std::vector<vm::dim_signature> out;
    for (auto& d : ds) {
      if (auto c = ir::as_int(d); c && *c >= 0) out.push_back({*c, {}});
      else out.push_back({-1, ir::to_string(d)});
    }
    return out;
  };
  switch (t->kind) {
    case ir::node_kind::prim_type:
      s.kind = vm::signature_kind::prim;
      s.dt = static_cast<const ir::prim_type_node&>(*t).dt;
      break;
    case ir::node_kind::shape_type: {
      auto& st = static_cast<const ir::shape_type_node&>(*t);
      s.kind = vm::signature_kind::shape;
      s.ndim = st.ndim;
      if (st.values) s.dims = dims_of(*st.values);
      break;
    }
    case ir::node_kind::tensor_type: {
      auto& tt = static_cast<const ir::tensor_type_node&>(*t);
      s.kind = vm::signature_kind::tensor;
      s.dt = tt.dt;
      s.ndim = tt.ndim;
      if (tt.shape) s.dims = dims_of(*tt.shape);
      break;
    }
    case ir::node_kind::tuple_type:
      s.kind = vm::signature_kind::tuple;
      for (auto& f : static_cast<const ir::tuple_type_node&>(*t).fields) s.fields.push_back(signature_of(f));
      break;
    case ir::node_kind::func_type: s.kind = vm::signature_kind::callable; break;
    default: break;
  }
  return s;
}

namespace detail {

/// Emits one function.
class function_emitter {
public:
  function_emitter(vm::exec_builder& b, const ir::ir_module& m, std::string name, const ir::function& f, vm_codegen_options o, constant_pool& pool)
      : b_(b), m_(m), name_(std::move(name)), f_(f), opts_(o), pool_(pool) {}

  void run() {
    liveness();
    std::vector<std::string> params;
    for (auto& p : f_->params) params.push_back(p->name_hint);
    // The register file size is known only at the end: emit, then patch the function's entry.
    next_reg_ = vm::reg_name(f_->params.size());  // parameters are registers 0..N-1
    max_reg_ = next_reg_ - 1;
    for (std::size_t i = 0; i < f_->params.size(); ++i) {
      const ir::var_node* g = find(f_->params[i].get());
      const vm::reg_name r = vm::reg_name(i);
      if (group_reg_.count(g) || !group_last_.count(g)) {
        give_back(r);  // unused (or a repeated parameter): its register is free from the start
        continue;
      }
      group_reg_[g] = r;
      schedule_death(g);
    }
    pos_ = 0;
    b_.begin_function(name_, params, vm::max_register_file_size);  // a bound; the real size is set below
    try {
      std::vector<vm::type_signature> types;
      for (auto& p : f_->params) types.push_back(signature_of(p->checked_type));
      b_.set_signature(std::move(types), signature_of(f_->ret_type));
      bool fresh = false;
      const vm::reg_name r = emit_seq_result(static_cast<const ir::seq_expr_node&>(*f_->body), fresh);
      b_.emit_ret(r);
      b_.set_register_file_size(std::max<std::int64_t>(max_reg_ + 1, std::int64_t(f_->params.size())));
      b_.end_function();
    } catch (...) {
      b_.abandon_function();
      throw;
    }
  }

private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw codegen_error("kiln::codegen::vm_codegen: in function '" + name_ + "', " + (binding_.empty() ? std::string("the result") : "binding '" + binding_ + "'") +
                        ": " + msg);
  }
  fail_fn failer() const {
    return [this](const std::string& msg) { fail(msg); };
  }

  // ---- liveness -----------------------------------------------------------------------------------
  // Positions number the bindings and sequence results in the order they are emitted; a variable's
  // value (with everything bound to it by `y = x`) lives until the last position that uses it.

  const ir::var_node* find(const ir::var_node* v) {
    auto it = alias_.find(v);
    if (it == alias_.end()) return v;
    return it->second = find(it->second);
  }

  void liveness() {
    std::int64_t pos = 0;
    std::function<void(const ir::seq_expr_node&)> walk = [&](const ir::seq_expr_node& s) {
      for (auto& block : s.blocks)
        for (auto& b : block.bindings) {
          if (auto* i = ir::dyn_cast<ir::if_node>(b.value)) {
            use_all(i->cond, pos);
            ++pos;
            walk(static_cast<const ir::seq_expr_node&>(*i->then_branch));
            walk(static_cast<const ir::seq_expr_node&>(*i->else_branch));
          } else {
            const ir::var_node* src = alias_source(b);
            if (src) alias_[b.variable.get()] = find(src);
            use_all(b.value, pos);
            ++pos;
          }
        }
      use_all(s.body, pos);
      ++pos;
    };
    walk(static_cast<const ir::seq_expr_node&>(*f_->body));
    // A group lives until the last use of any of its members.
    for (auto& [v, p] : last_use_) {
      const ir::var_node* g = find(v);
      group_last_[g] = std::max(group_last_[g], p);
    }
  }
  static const ir::var_node* alias_source(const ir::binding& b) {
    return ir::dyn_cast<ir::var_node>(b.value);  // y = x, or y = match_cast(x, T)
  }
  void use_all(const ir::expr& e, std::int64_t pos) {
    ir::post_order_visit(e, [&](const ir::expr& x) {
      if (auto* v = ir::dyn_cast<ir::var_node>(x)) last_use_[v] = pos;
    });
  }

  // ---- registers ----------------------------------------------------------------------------------

  vm::reg_name take_register() {
    vm::reg_name r;
    if (!free_.empty()) {
      r = *free_.begin();
      free_.erase(free_.begin());
    } else {
      r = next_reg_++;
    }
    max_reg_ = std::max(max_reg_, r);
    return r;
  }
  void give_back(vm::reg_name r) {
    if (opts_.reuse_registers) free_.insert(r);
  }

  // ---- operands -----------------------------------------------------------------------------------

  /// The literal an expression is, if it is one: a small integer as an immediate, anything else
  /// from the constant pool.
  std::optional<vm::instr_arg> literal(const ir::expr& e) {
    auto l = as_literal(e, m_, failer());
    if (!l) return std::nullopt;
    switch (l->kind) {
      case literal::constant: return b_.c(pool_.index(*l->tensor, [&](vm::value v) { return b_.add_constant(std::move(v)); }));
      case literal::value:
        if (l->v.is_int() && vm::instr_arg::fits(l->v.as_int())) return b_.imm(l->v.as_int());
        return b_.c(b_.add_constant(std::move(l->v)));
      case literal::function:
      case literal::native: return b_.f(l->name);
    }
    return std::nullopt;
  }

  // ---- values -------------------------------------------------------------------------------------

  /// One instruction to emit: `func(args...)`, its operands already computed.
  struct call_plan {
    std::string func;
    std::vector<vm::instr_arg> args;
    std::optional<vm::reg_name> fixed_dst;  ///< the instruction writes this register (a kill)
  };

  /// The instruction computing `e`; operands that need computing go to temporaries first.
  call_plan plan_value(const ir::expr& e, std::vector<vm::reg_name>& temps) {
    call_plan p;
    auto all = [&](const std::vector<ir::expr>& xs) {
      for (auto& x : xs) p.args.push_back(operand(x, temps));
    };
    switch (e->kind) {
      case ir::node_kind::call: {
        const lowered_call c = classify_call(static_cast<const ir::call_node&>(*e), m_, failer());
        switch (c.kind) {
          case lowered_call::builtin_with_ctx:
            p.func = c.symbol;
            p.args.push_back(vm::exec_builder::vm());
            break;
          case lowered_call::kill: {
            p.func = "vm.builtin.null_value";
            const vm::instr_arg x = operand(c.args[0], temps);
            if (x.kind() == vm::arg_kind::reg) p.fixed_dst = x.value();
            else p.fixed_dst = vm::void_register;  // a literal: nothing to clear
            return p;
          }
          case lowered_call::null_value: p.func = "vm.builtin.null_value"; return p;
          case lowered_call::native:
          case lowered_call::function: p.func = c.symbol; break;
          case lowered_call::closure:
            p.func = "vm.builtin.invoke_closure";
            p.args.push_back(vm::exec_builder::vm());
            p.args.push_back(operand(*c.callee, temps));
            break;
        }
        for (auto& x : c.args) p.args.push_back(operand(x, temps));
        return p;
      }
      case ir::node_kind::tuple:
        p.func = "vm.builtin.make_tuple";
        all(static_cast<const ir::tuple_node&>(*e).fields);
        return p;
      case ir::node_kind::tuple_get_item: {
        auto& g = static_cast<const ir::tuple_get_item_node&>(*e);
        p.func = "vm.builtin.tuple_getitem";
        p.args = {operand(g.tuple, temps), b_.imm(g.index)};
        return p;
      }
      default:
        p.func = "vm.builtin.copy";
        p.args = {operand(e, temps)};
        return p;
    }
  }

  void emit(const call_plan& p, vm::reg_name dst) {
    b_.emit_call(p.func, std::span<const vm::instr_arg>(p.args), p.fixed_dst ? *p.fixed_dst : dst);
  }

  /// The operand for `e`: a register, or a literal. A tuple literal, an element access or a call
  /// (a function's result, say) is computed into a temporary register, recorded in `temps` for
  /// release after the instruction.
  vm::instr_arg operand(const ir::expr& e, std::vector<vm::reg_name>& temps) {
    if (auto* v = ir::dyn_cast<ir::var_node>(e)) {
      const ir::var_node* g = find(v);
      if (auto it = literal_of_.find(g); it != literal_of_.end()) return it->second;
      auto it = group_reg_.find(g);
      if (it == group_reg_.end()) fail("variable '" + v->name_hint + "' has no value here");
      return vm::exec_builder::r(it->second);
    }
    if (auto lit = literal(e)) return *lit;
    if (ir::isa<ir::tuple_node>(e) || ir::isa<ir::tuple_get_item_node>(e) || ir::isa<ir::call_node>(e)) {
      call_plan p = plan_value(e, temps);
      const vm::reg_name r = take_register();
      temps.push_back(r);
      emit(p, r);
      return vm::exec_builder::r(r);
    }
    fail("cannot use this expression (an if or a sequence) as an operand; bind it to a variable first");
  }
  void release(std::vector<vm::reg_name>& temps) {
    for (auto r : temps) give_back(r);
    temps.clear();
  }

  /// Returns to the free set the registers of the values whose last use is the current position.
  void release_dying() {
    auto it = dying_.find(pos_);
    if (it == dying_.end()) return;
    for (auto* g : it->second)
      if (auto r = group_reg_.find(g); r != group_reg_.end()) {
        give_back(r->second);
        group_reg_.erase(r);
      }
    dying_.erase(it);
  }
  void schedule_death(const ir::var_node* g) {
    if (auto lu = group_last_.find(g); lu != group_last_.end()) dying_[lu->second].push_back(g);
  }

  /// Emits a sequence's bindings; returns the register holding its result, and sets `fresh` when
  /// that register is a temporary the caller gives back.
  vm::reg_name emit_seq_result(const ir::seq_expr_node& s, bool& fresh) {
    for (auto& block : s.blocks)
      for (auto& b : block.bindings) emit_binding(b);
    binding_.clear();
    std::vector<vm::reg_name> temps;
    vm::instr_arg a = operand(s.body, temps);
    fresh = false;
    vm::reg_name r;
    if (a.kind() == vm::arg_kind::reg && temps.empty()) {
      r = a.value();
    } else if (a.kind() == vm::arg_kind::reg) {
      r = a.value();  // a temporary holding a tuple
      fresh = true;
    } else {
      r = take_register();
      b_.emit_call("vm.builtin.copy", {a}, r);
      fresh = true;
      release(temps);
    }
    release_dying();  // the result's register is read by the very next instruction only
    ++pos_;
    return r;
  }

  void emit_binding(const ir::binding& b) {
    binding_ = b.variable->name_hint;
    const ir::var_node* v = b.variable.get();
    const ir::var_node* g = find(v);
    const bool used = group_last_.count(g) != 0;
    if (auto* i = ir::dyn_cast<ir::if_node>(b.value)) return emit_if(*i, g, used);
    if (g == v) {
      if (auto lit = literal(b.value); lit && !ir::isa<ir::call_node>(b.value)) {
        literal_of_[g] = *lit;  // no instruction: uses read the literal
      } else if (used || ir::isa<ir::call_node>(b.value)) {
        std::vector<vm::reg_name> temps;
        call_plan p = plan_value(b.value, temps);
        release_dying();  // operands dying here give their registers back: the result may take one
        const vm::reg_name dst = used ? take_register() : vm::void_register;
        emit(p, dst);
        release(temps);
        if (used) {
          group_reg_[g] = dst;
          schedule_death(g);
        }
      }
    }  // else y = x: y is x, nothing to emit
    release_dying();
    ++pos_;
  }

  void emit_if(const ir::if_node& i, const ir::var_node* g, bool used) {
    std::vector<vm::reg_name> temps;
    vm::instr_arg cond = operand(i.cond, temps);
    const bool is_prim = ir::isa<ir::prim_type_node>(i.cond->checked_type);
    vm::reg_name c;
    if (cond.kind() == vm::arg_kind::reg && is_prim) {
      c = cond.value();
    } else {
      c = take_register();
      temps.push_back(c);
      b_.emit_call(is_prim ? "vm.builtin.copy" : "vm.builtin.read_if_cond", {cond}, c);
    }
    const vm::reg_name merge = take_register();  // taken before the branches, so they cannot use it
    auto else_label = b_.new_label(), end_label = b_.new_label();
    b_.emit_if(c, else_label);
    release(temps);
    release_dying();
    ++pos_;
    auto branch = [&](const ir::expr& s) {
      bool fresh = false;
      const vm::reg_name r = emit_seq_result(static_cast<const ir::seq_expr_node&>(*s), fresh);
      b_.emit_call("vm.builtin.copy", {vm::exec_builder::r(r)}, used ? merge : vm::void_register);
      if (fresh) give_back(r);
    };
    branch(i.then_branch);
    b_.emit_goto(end_label);
    b_.bind(else_label);
    branch(i.else_branch);
    b_.bind(end_label);
    if (used) {
      group_reg_[g] = merge;
      schedule_death(g);
    } else {
      give_back(merge);
    }
  }

  vm::exec_builder& b_;
  const ir::ir_module& m_;
  std::string name_;
  ir::function f_;
  vm_codegen_options opts_;
  constant_pool& pool_;

  std::string binding_;
  std::unordered_map<const ir::var_node*, const ir::var_node*> alias_;
  std::unordered_map<const ir::var_node*, std::int64_t> last_use_, group_last_;
  std::unordered_map<const ir::var_node*, vm::reg_name> group_reg_;
  std::unordered_map<const ir::var_node*, vm::instr_arg> literal_of_;
  std::map<std::int64_t, std::vector<const ir::var_node*>> dying_;
  std::set<vm::reg_name> free_;
  vm::reg_name next_reg_ = 0, max_reg_ = -1;
  std::int64_t pos_ = 0;
};

}  // namespace detail

/// The executable of a lowered module: one bytecode function per graph-level function, named as in
/// the module, with its parameter names and types and its result type.
inline vm::executable vm_codegen(const ir::ir_module& m, vm_codegen_options options = {}) {
  vm::exec_builder b;
  // Declared first, so that calls in either direction (and recursion) find them.
  for (auto& e : m->functions())
    if (auto* f = ir::dyn_cast<ir::function_node>(e.func)) b.declare_function(e.gv->name, vm::function_kind::bytecode, std::int64_t(f->params.size()));
  constant_pool pool;
  for (auto& e : m->functions())
    if (auto f = ir::ref_cast<ir::function_node>(e.func)) detail::function_emitter(b, m, e.gv->name, f, options, pool).run();
  return b.get();
}

}  // namespace kiln::codegen
