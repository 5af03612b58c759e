// SPDX-License-Identifier: Apache-2.0
/// \file
/// The well-formedness verifier: checks what the IR's constructors cannot check locally.
///
/// Reports, each naming the function and the binding where it happens:
/// - a variable used where it is not defined, or defined twice;
/// - a dataflow variable bound outside a dataflow block, or used after its block;
/// - an `if` inside a dataflow block, an `if` not bound to a variable, or a nested sequence;
/// - a type that does not match what the value produces (a binding's declared type, a call's
///   recorded type against the operator's inference rule, a function's return type);
/// - a symbolic dimension used before a parameter type or `match_cast` defines it;
/// - a call to a function the module does not have, a stale signature, a kernel function called
///   other than through `R.call_tir`, or a kernel whose body calls anything but operators.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/ir/printer.hpp>

#include <unordered_set>

namespace kiln::ir {

/// One problem found by `verify`.
struct diagnostic {
  std::string function;  ///< the function it is in
  std::string binding;   ///< the variable being bound, "return", or "signature"
  std::string message;
  std::string to_string() const { return "in function '" + function + "', " + (binding == "signature" || binding == "return" ? binding : "binding '" + binding + "'") + ": " + message; }
};

/// Thrown by `verify_or_throw`; `what()` lists every diagnostic, one per line.
class verify_error : public error {
public:
  explicit verify_error(std::vector<diagnostic> d) : error(render(d)), diagnostics_(std::move(d)) {}
  const std::vector<diagnostic>& diagnostics() const noexcept { return diagnostics_; }

private:
  static std::string render(const std::vector<diagnostic>& d) {
    std::string s = "kiln::ir::verify: the module is not well formed (" + std::to_string(d.size()) + " problem" + (d.size() == 1 ? "" : "s") + "):";
    for (auto& x : d) s += "\n  " + x.to_string();
    return s;
  }
  std::vector<diagnostic> diagnostics_;
};

namespace detail {

class well_formed_checker {
public:
  explicit well_formed_checker(const ir_module& m) : mod_(m) {}

  std::vector<diagnostic> run() {
    for (auto& e : mod_->functions()) {
      fn_ = e.gv->name;
      reset();
      if (!types_equal(e.gv->checked_type, e.func->signature()))
        report("signature", "the module's global variable has type " + to_string(e.gv->checked_type) + ", but the function's signature is " +
                                to_string(e.func->signature()));
      if (auto* f = dyn_cast<function_node>(e.func)) check_function(*f);
      else check_prim_func(static_cast<const prim_func_node&>(*e.func));
    }
    return std::move(diags_);
  }

private:
  void reset() {
    visible_.clear();
    defined_.clear();
    expired_.clear();
    size_vars_.clear();
    in_kernel_ = false;
  }
  void report(const std::string& binding, std::string msg) { diags_.push_back({fn_, binding, std::move(msg)}); }

  void define_params(const std::vector<var>& params) {
    binding_ = "signature";
    for (auto& p : params) {
      if (!defined_.insert(p.get()).second) report("signature", "parameter '" + p->name_hint + "' appears twice");
      if (p->is_dataflow()) report("signature", "parameter '" + p->name_hint + "' is a dataflow variable");
      visible_.insert(p.get());
      std::vector<size_var> sv;
      collect_size_vars(p->checked_type, sv);
      for (auto& v : sv) size_vars_.insert(v.get());
    }
  }

  void check_function(const function_node& f) {
    define_params(f.params);
    check_body(f.body);
    binding_ = "return";
    check_size_vars_defined(f.ret_type);
    if (!is_base_of(f.ret_type, f.body->checked_type))
      report("return", "the body has type " + to_string(f.body->checked_type) + ", which does not match the declared return type " +
                           to_string(f.ret_type));
  }

  void check_prim_func(const prim_func_node& f) {
    define_params(f.params);
    in_kernel_ = true;
    if (f.body) {
      check_body(f.body);
      if (!is_base_of(f.output_type(), f.body->checked_type))
        report("return", "the kernel computes " + to_string(f.body->checked_type) + ", which does not match its outputs " + to_string(f.output_type()));
    }
  }

  void check_body(const expr& body) {
    auto* s = dyn_cast<seq_expr_node>(body);
    if (!s) {
      binding_ = "return";
      report("return", "a function body must be a sequence expression");
      check(body);
      return;
    }
    check_seq(*s);
  }

  void check_seq(const seq_expr_node& s) {
    for (auto& b : s.blocks) check_block(b);
    binding_ = "return";
    check_value(s.body, /*bound=*/false);
  }

  void check_block(const binding_block& b) {
    std::vector<const var_node*> dataflow_vars;
    for (auto& bd : b.bindings) {
      binding_ = bd.variable->name_hint;
      if (b.dataflow && isa<if_node>(bd.value)) report(binding_, "an if expression is not allowed inside a dataflow block");
      check_value(bd.value, /*bound=*/true);
      const var& v = bd.variable;
      if (!defined_.insert(v.get()).second) report(binding_, "variable '" + v->name_hint + "' is defined twice");
      if (v->is_dataflow() && !b.dataflow) report(binding_, "dataflow variable '" + v->name_hint + "' is bound outside a dataflow block");
      if (bd.is_match_cast()) {
        std::vector<size_var> sv;
        collect_size_vars(bd.cast_type, sv);
        for (auto& x : sv) size_vars_.insert(x.get());
        if (!types_equal(v->checked_type, bd.cast_type))
          report(binding_, "the variable has type " + to_string(v->checked_type) + ", but the match_cast is to " + to_string(bd.cast_type));
        if (bd.cast_type->kind != bd.value->checked_type->kind && bd.value->checked_type->kind != node_kind::object_type)
          report(binding_, "match_cast of a value of type " + to_string(bd.value->checked_type) + " to " + to_string(bd.cast_type) + " can never succeed");
      } else {
        check_size_vars_defined(v->checked_type);
        if (!is_base_of(v->checked_type, bd.value->checked_type))
          report(binding_, "variable '" + v->name_hint + "' is declared " + to_string(v->checked_type) + ", but its value has type " +
                               to_string(bd.value->checked_type));
      }
      visible_.insert(v.get());
      if (v->is_dataflow()) dataflow_vars.push_back(v.get());
    }
    for (auto* v : dataflow_vars) {
      visible_.erase(v);
      expired_.insert(v);
    }
  }

  /// Reports the size variables of `t` (a type or a dimension) that nothing has defined yet.
  template <class TypeOrDim>
  void check_size_vars_defined(const TypeOrDim& t) {
    std::vector<size_var> sv;
    collect_size_vars(t, sv);
    for (auto& v : sv)
      if (!size_vars_.count(v.get()))
        report(binding_, "symbolic variable '" + v->name + "' is used but not defined (by a parameter type or a match_cast)");
  }

  /// A binding's value (or a body's result): `if` is allowed here when bound.
  void check_value(const expr& e, bool bound) {
    if (auto* i = dyn_cast<if_node>(e)) {
      if (!bound) report(binding_, "an if expression must be bound to a variable");
      check(i->cond);
      const std::string saved = binding_;
      for (const expr* branch : {&i->then_branch, &i->else_branch}) {
        auto* s = dyn_cast<seq_expr_node>(*branch);
        if (!s) {
          report(saved, "an if branch must be a sequence expression");
          continue;
        }
        auto scope = visible_;
        check_seq(*s);
        visible_ = std::move(scope);  // branch-local variables end with the branch
        binding_ = saved;
      }
      if (!is_base_of(e->checked_type, join(i->then_branch->checked_type, i->else_branch->checked_type)))
        report(binding_, "the if has type " + to_string(e->checked_type) + ", which does not cover its branches");
      return;
    }
    check(e);
  }

  void check(const expr& e) {
    switch (e->kind) {
      case node_kind::var:
      case node_kind::dataflow_var: {
        auto* v = static_cast<const var_node*>(e.get());
        if (visible_.count(v)) return;
        if (expired_.count(v)) report(binding_, "dataflow variable '" + v->name_hint + "' is used outside its dataflow block");
        else report(binding_, "variable '" + v->name_hint + "' is used but not defined");
        return;
      }
      case node_kind::global_var: {
        auto& g = static_cast<const global_var_node&>(*e);
        if (!mod_->contains(g.name)) report(binding_, "refers to function '" + g.name + "', which is not in the module");
        return;
      }
      case node_kind::call: return check_call(static_cast<const call_node&>(*e));
      case node_kind::tuple:
        for (auto& f : static_cast<const tuple_node&>(*e).fields) check(f);
        return;
      case node_kind::tuple_get_item: return check(static_cast<const tuple_get_item_node&>(*e).tuple);
      case node_kind::if_: report(binding_, "an if expression must be bound to a variable"); return check_value(e, true);
      case node_kind::seq: report(binding_, "a sequence expression can only be a function body or an if branch"); return;
      case node_kind::shape_expr:
        for (auto& d : static_cast<const shape_expr_node&>(*e).values) check_size_vars_defined(d);
        return;
      case node_kind::prim_value:
        if (auto& p = static_cast<const prim_value_node&>(*e); p.int_value) check_size_vars_defined(p.int_value);
        return;
      default: return;
    }
  }

  void check_call(const call_node& c) {
    if (!isa<op_node>(c.callee) || static_cast<const op_node&>(*c.callee).name() != "call_tir") check(c.callee);
    for (auto& a : c.args) check(a);
    for (auto& t : c.type_args) check_size_vars_defined(t);
    if (auto* o = dyn_cast<op_node>(c.callee)) {
      if (in_kernel_ && o->name() == "call_tir") report(binding_, "a kernel function may only call operators, not R.call_tir");
      if (o->name() == "call_tir" && !c.args.empty()) {
        auto* g = dyn_cast<global_var_node>(c.args[0]);
        if (g) {
          base_func f = mod_->lookup(g->name);
          if (!f) report(binding_, "R.call_tir refers to function '" + g->name + "', which is not in the module");
          else if (!isa<prim_func_node>(f)) report(binding_, "R.call_tir target '" + g->name + "' is not a kernel function (prim_func)");
        }
      }
      try {
        attr_map attrs = o->normalize_attrs(c.attrs);
        if (c.args.size() != o->arg_names().size())
          throw type_error(o->name() + ": expects " + std::to_string(o->arg_names().size()) + " arguments, but the call has " + std::to_string(c.args.size()));
        type t = o->infer(c.args, attrs, c.type_args);
        if (!types_equal(t, c.checked_type))
          report(binding_, "the call to R." + o->name() + " records type " + to_string(c.checked_type) + ", but its operands give " + to_string(t));
      } catch (const error& err) {
        report(binding_, err.what());
      }
      return;
    }
    if (in_kernel_) {
      report(binding_, "a kernel function may only call operators");
      return;
    }
    if (auto* g = dyn_cast<global_var_node>(c.callee)) {
      base_func f = mod_->lookup(g->name);
      if (!f) return;  // reported by check(callee)
      if (isa<prim_func_node>(f)) {
        report(binding_, "kernel function '" + g->name + "' must be called through R.call_tir");
        return;
      }
      try {
        type t = infer_call_result(f->signature(), c.args, "call to '" + g->name + "'");
        if (!types_equal(t, c.checked_type))
          report(binding_, "the call to '" + g->name + "' records type " + to_string(c.checked_type) + ", but the function returns " + to_string(t));
      } catch (const error& err) {
        report(binding_, err.what());
      }
    }
  }

  const ir_module& mod_;
  std::string fn_, binding_;
  std::vector<diagnostic> diags_;
  std::unordered_set<const var_node*> visible_, defined_, expired_;
  std::unordered_set<const size_var_node*> size_vars_;
  bool in_kernel_ = false;
};

}  // namespace detail

/// Every well-formedness problem of `m` (empty when it is well formed).
inline std::vector<diagnostic> verify(const ir_module& m) { return detail::well_formed_checker(m).run(); }

/// Throws a `verify_error` listing every problem when `m` is not well formed.
inline void verify_or_throw(const ir_module& m) {
  auto d = verify(m);
  if (!d.empty()) throw verify_error(std::move(d));
}

}  // namespace kiln::ir
