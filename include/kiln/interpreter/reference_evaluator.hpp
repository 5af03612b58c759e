// SPDX-License-Identifier: Apache-2.0
/// \file
/// `reference_evaluator`: runs a module by walking its IR, one kernel call per operator, with no
/// optimisation, no memory planning and no bytecode. It is the oracle the compiler is tested
/// against (the compiled program must give what the evaluator gives), and what `fold_constant`
/// evaluates constant calls with.
///
/// \code
/// interpreter::reference_evaluator eval(module);
/// vm::value y = eval("main", x, w);     // arguments and results are VM values (tensors, tuples, ...)
/// \endcode
///
/// It understands the graph-level IR (operators through `kernel_lowering`, calls between functions
/// and recursion, `if`, tuples, match_cast, closures made with `make_closure` or a function used as
/// a value, `call_tir` of kernel functions with a body or an external symbol) and the lowered forms
/// the compiler's passes produce before code generation (`call_dps_packed`, `call_packed`,
/// `builtin.alloc_tensor`, `memory.*`), so each pass's output can be run and compared too.
///
/// Arguments are checked against the parameter types as the compiled code checks them (dtype,
/// rank, static dimensions, size variables bound consistently); errors are `evaluation_error`s
/// naming the function and the binding or parameter.
///
/// It is an interpreter, not a pass: the compiler's passes use it (`fold_constant`, through
/// `interpreter/fold.hpp`), as does the ONNX importer, which folds shape subgraphs as it converts.
/// It runs each operator by the compiler's own table of operator lowerings
/// (`transform/kernel_lowering.hpp`), so that what it computes and what the compiled program
/// computes are the same kernels with the same arguments.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/tensor_conversion.hpp>
#include <kiln/vm/builtins.hpp>
#include <kiln/vm/context.hpp>
#include <kiln/vm/kernels.hpp>
#include <kiln/vm/native.hpp>

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::interpreter {

using transform::kernel_call;
using transform::kernel_lowering;
using transform::lowering_error;
using transform::to_ndarray;
using transform::to_tensor;

class evaluation_error : public error {
public:
  using error::error;
};

namespace detail {
/// A function of the module with values bound to its last parameters.
struct ir_closure final : runtime::object {
  std::string function;
  std::vector<vm::value> captured;
  ir_closure(std::string f, std::vector<vm::value> c) : function(std::move(f)), captured(std::move(c)) {}
  std::string_view type_name() const noexcept override { return "kiln.IRClosure"; }
};
}  // namespace detail

class reference_evaluator final : public vm::vm_context {
public:
  explicit reference_evaluator(ir::ir_module m, const vm::function_registry& natives = vm::kernel_registry(),
                               const kernel_lowering& lowering = kernel_lowering::global())
      : module_(std::move(m)), natives_(&natives), lowering_(&lowering) {}

  /// Calls function `name` of the module.
  vm::value call(std::string_view name, std::span<const vm::value> args) {
    return call_function(std::string(name), std::vector<vm::value>(args.begin(), args.end()));
  }
  template <class... Args>
  vm::value operator()(std::string_view name, Args&&... args) {
    const std::vector<vm::value> a{vm::value(std::forward<Args>(args))...};
    return call(name, a);
  }

  /// Evaluates an expression that uses no variables (what constant folding asks).
  vm::value evaluate(const ir::expr& e) {
    frame f;
    f.function = "<expression>";
    return eval(e, f);
  }

  /// The deepest nesting of calls between functions before evaluation stops with an error.
  std::size_t max_call_depth = 2000;

  // ---- vm_context (for built-ins called with the VM) ------------------------------------------------
  runtime::allocator& allocator_for(std::int64_t) override { return runtime::default_allocator(); }
  std::int64_t num_devices() const noexcept override { return 1; }
  vm::value call(const vm::value& func, vm::call_args args) override {
    std::vector<vm::value> a;
    for (std::size_t i = 0; i < args.size(); ++i) a.push_back(args[i]);
    return call_value(func, std::move(a), "a built-in");
  }
  const vm::value& constant(std::size_t) const override { throw evaluation_error("kiln::interpreter::reference_evaluator: there is no constant pool"); }

private:
  struct frame {
    std::string function, binding;
    std::unordered_map<const ir::var_node*, vm::value> vars;
    std::unordered_map<const ir::size_var_node*, std::int64_t> dims;
  };

  [[noreturn]] static void fail(const frame& f, const std::string& msg) {
    std::string where = "kiln::interpreter::reference_evaluator: in function '" + f.function + "'";
    if (!f.binding.empty()) where += ", " + f.binding;
    throw evaluation_error(where + ": " + msg);
  }

  vm::value call_function(const std::string& name, std::vector<vm::value> args) {
    ir::base_func bf = module_->lookup(name);
    if (!bf) throw evaluation_error("kiln::interpreter::reference_evaluator: the module has no function '" + name + "'");
    auto* fn = ir::dyn_cast<ir::function_node>(bf);
    if (!fn) throw evaluation_error("kiln::interpreter::reference_evaluator: '" + name + "' is a kernel function; call it through R.call_tir");
    if (depth_ >= max_call_depth)
      throw evaluation_error("kiln::interpreter::reference_evaluator: calls nested deeper than " + std::to_string(max_call_depth) + " (in '" + name + "')");
    frame f;
    f.function = name;
    if (args.size() != fn->params.size())
      fail(f, "expects " + std::to_string(fn->params.size()) + " arguments, but " + std::to_string(args.size()) + " were given");
    std::vector<pending_check> later;
    for (std::size_t i = 0; i < args.size(); ++i) {
      match(fn->params[i]->checked_type, args[i], f, "parameter '" + fn->params[i]->name_hint + "'", later);
      f.vars[fn->params[i].get()] = args[i];
    }
    check_pending(later, f);
    ++depth_;
    struct leave {
      std::size_t& d;
      ~leave() { --d; }
    } guard{depth_};
    return eval(fn->body, f);
  }

  vm::value call_value(const vm::value& callee, std::vector<vm::value> args, const std::string& what) {
    if (callee.kind() == vm::value_kind::object)
      if (auto* c = dynamic_cast<const detail::ir_closure*>(&callee.as_object())) {
        args.insert(args.end(), c->captured.begin(), c->captured.end());
        return call_function(c->function, std::move(args));
      }
    throw evaluation_error("kiln::interpreter::reference_evaluator: " + what + " calls a " + std::string(vm::name(callee.kind())) +
                           ", which is not a function");
  }

  // ---- types against values ---------------------------------------------------------------------------

  struct pending_check {
    ir::prim_expr expected;
    std::int64_t actual;
    std::string what;
  };

  std::int64_t eval_dim(const ir::prim_expr& e, const frame& f) {
    switch (e->kind) {
      case ir::node_kind::int_imm: return static_cast<const ir::int_imm_node&>(*e).value;
      case ir::node_kind::size_var: {
        auto it = f.dims.find(static_cast<const ir::size_var_node*>(e.get()));
        if (it == f.dims.end()) fail(f, "size variable '" + static_cast<const ir::size_var_node&>(*e).name + "' has no value here");
        return it->second;
      }
      default: break;
    }
    auto& b = static_cast<const ir::prim_binary_node&>(*e);
    const std::int64_t x = eval_dim(b.a, f), y = eval_dim(b.b, f);
    std::int64_t r = 0;
    switch (b.op) {
      case ir::prim_op::add:
        if (__builtin_add_overflow(x, y, &r)) fail(f, "overflow computing " + ir::to_string(e));
        return r;
      case ir::prim_op::sub:
        if (__builtin_sub_overflow(x, y, &r)) fail(f, "overflow computing " + ir::to_string(e));
        return r;
      case ir::prim_op::mul:
        if (__builtin_mul_overflow(x, y, &r)) fail(f, "overflow computing " + ir::to_string(e));
        return r;
      case ir::prim_op::floordiv:
      case ir::prim_op::floormod:
        if (y == 0) fail(f, "division by zero computing " + ir::to_string(e));
        if (x == INT64_MIN && y == -1) fail(f, "overflow computing " + ir::to_string(e));
        return b.op == ir::prim_op::floordiv ? ir::detail::floordiv(x, y) : ir::detail::floormod(x, y);
      case ir::prim_op::min: return std::min(x, y);
      case ir::prim_op::max: return std::max(x, y);
    }
    return 0;
  }

  void match_dims(const std::vector<ir::prim_expr>& expected, const runtime::shape_vector& actual, frame& f, const std::string& what,
                  std::vector<pending_check>& later) {
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const std::string dim_what = what + " dimension " + std::to_string(i);
      if (auto* sv = ir::dyn_cast<ir::size_var_node>(expected[i])) {
        auto [it, added] = f.dims.try_emplace(sv, actual[i]);
        if (!added && it->second != actual[i])
          fail(f, dim_what + " is " + std::to_string(actual[i]) + ", but '" + sv->name + "' is " + std::to_string(it->second) + " already");
      } else {
        later.push_back({expected[i], actual[i], dim_what});
      }
    }
  }

  void check_pending(const std::vector<pending_check>& later, frame& f) {
    for (const pending_check& p : later) {
      const std::int64_t want = eval_dim(p.expected, f);
      if (want != p.actual) fail(f, p.what + " is " + std::to_string(p.actual) + ", expected " + ir::to_string(p.expected) +
                                        (ir::as_int(p.expected) ? "" : " = " + std::to_string(want)));
    }
  }

  void match(const ir::type& t, const vm::value& v, frame& f, const std::string& what, std::vector<pending_check>& later) {
    switch (t->kind) {
      case ir::node_kind::object_type: return;
      case ir::node_kind::tensor_type: {
        auto& tt = static_cast<const ir::tensor_type_node&>(*t);
        if (!v.is_tensor()) fail(f, what + " must be a tensor, but is a " + std::string(vm::name(v.kind())));
        const runtime::tensor x = v.as_tensor();
        if (is_known(tt.dt) && x.type() != tt.dt)
          fail(f, what + " has dtype " + std::string(name(x.type())) + ", expected " + std::string(name(tt.dt)));
        if (tt.ndim >= 0 && std::int64_t(x.ndim()) != tt.ndim)
          fail(f, what + " has rank " + std::to_string(x.ndim()) + ", expected " + std::to_string(tt.ndim));
        if (tt.shape) match_dims(*tt.shape, x.shape(), f, what, later);
        return;
      }
      case ir::node_kind::shape_type: {
        auto& st = static_cast<const ir::shape_type_node&>(*t);
        if (!v.is_shape()) fail(f, what + " must be a shape, but is a " + std::string(vm::name(v.kind())));
        if (st.ndim >= 0 && std::int64_t(v.as_shape().size()) != st.ndim)
          fail(f, what + " has " + std::to_string(v.as_shape().size()) + " dimensions, expected " + std::to_string(st.ndim));
        if (st.values) match_dims(*st.values, v.as_shape(), f, what, later);
        return;
      }
      case ir::node_kind::prim_type: {
        const dtype d = static_cast<const ir::prim_type_node&>(*t).dt;
        const bool ok = d == dtype::bool_ ? v.is_bool() : is_float(d) ? (v.is_float() || v.is_int()) : v.is_int();
        if (!ok) fail(f, what + " must be a " + std::string(name(d)) + " value, but is a " + std::string(vm::name(v.kind())));
        return;
      }
      case ir::node_kind::tuple_type: {
        auto& tt = static_cast<const ir::tuple_type_node&>(*t);
        if (!v.is_tuple()) fail(f, what + " must be a tuple, but is a " + std::string(vm::name(v.kind())));
        if (v.as_tuple().size() != tt.fields.size())
          fail(f, what + " has " + std::to_string(v.as_tuple().size()) + " fields, expected " + std::to_string(tt.fields.size()));
        for (std::size_t i = 0; i < tt.fields.size(); ++i) match(tt.fields[i], v.as_tuple()[i], f, what + " field " + std::to_string(i), later);
        return;
      }
      default: return;  // callables: not checked
    }
  }

  // ---- expressions --------------------------------------------------------------------------------------

  vm::value eval(const ir::expr& e, frame& f) {
    switch (e->kind) {
      case ir::node_kind::var:
      case ir::node_kind::dataflow_var: {
        auto it = f.vars.find(static_cast<const ir::var_node*>(e.get()));
        if (it == f.vars.end()) fail(f, "variable '" + static_cast<const ir::var_node&>(*e).name_hint + "' has no value here");
        return it->second;
      }
      case ir::node_kind::constant: {
        auto& c = static_cast<const ir::constant_node&>(*e);
        auto it = constants_.find(&c);
        if (it == constants_.end()) it = constants_.emplace(&c, std::pair{e, vm::value(to_tensor(c.data))}).first;
        return it->second.second;
      }
      case ir::node_kind::global_var:
        return vm::value::from_object(runtime::make_object<detail::ir_closure>(static_cast<const ir::global_var_node&>(*e).name, std::vector<vm::value>{}));
      case ir::node_kind::call: return eval_call(static_cast<const ir::call_node&>(*e), f);
      case ir::node_kind::tuple: {
        std::vector<vm::value> items;
        for (auto& x : static_cast<const ir::tuple_node&>(*e).fields) items.push_back(eval(x, f));
        return vm::value::tuple(std::move(items));
      }
      case ir::node_kind::tuple_get_item: {
        auto& g = static_cast<const ir::tuple_get_item_node&>(*e);
        vm::value t = eval(g.tuple, f);
        if (!t.is_tuple() || std::size_t(g.index) >= t.as_tuple().size()) fail(f, "tuple element " + std::to_string(g.index) + " of a non-tuple or shorter tuple");
        return t.as_tuple()[std::size_t(g.index)];
      }
      case ir::node_kind::if_: {
        auto& n = static_cast<const ir::if_node&>(*e);
        return eval(condition(eval(n.cond, f), f) ? n.then_branch : n.else_branch, f);
      }
      case ir::node_kind::seq: {
        auto& s = static_cast<const ir::seq_expr_node&>(*e);
        for (auto& block : s.blocks)
          for (auto& b : block.bindings) {
            f.binding = "binding '" + b.variable->name_hint + "'";
            vm::value v = eval(b.value, f);
            if (b.is_match_cast()) {
              std::vector<pending_check> later;
              match(b.cast_type, v, f, "the match_cast value", later);
              check_pending(later, f);
            }
            f.vars[b.variable.get()] = std::move(v);
          }
        f.binding = "the result";
        vm::value r = eval(s.body, f);
        f.binding.clear();
        return r;
      }
      case ir::node_kind::shape_expr: {
        runtime::shape_vector dims;
        for (auto& d : static_cast<const ir::shape_expr_node&>(*e).values) dims.push_back(eval_dim(d, f));
        return vm::value::shape(std::move(dims));
      }
      case ir::node_kind::prim_value: {
        auto& p = static_cast<const ir::prim_value_node&>(*e);
        if (!p.int_value) return vm::value(p.float_value);
        const std::int64_t v = eval_dim(p.int_value, f);
        if (p.dt == dtype::bool_) return vm::value(v != 0);
        return vm::value(v);
      }
      case ir::node_kind::string_imm: return vm::value(static_cast<const ir::string_imm_node&>(*e).value);
      default: fail(f, "cannot evaluate this expression (" + std::string(e->kind == ir::node_kind::op ? "an operator used as a value" : "an external function used as a value") + ")");
    }
  }

  bool condition(const vm::value& v, const frame& f) {
    if (v.is_bool()) return v.as_bool();
    if (v.is_int()) return v.as_int() != 0;
    if (v.is_tensor() && v.as_tensor().numel() == 1) return vm::detail::truth_of_element(v.as_tensor());
    fail(f, "the condition of an if must be a bool, but is a " + std::string(vm::name(v.kind())));
  }

  /// Allocates the outputs a destination-passing call of type `t` writes.
  vm::value allocate(const ir::type& t, frame& f) {
    if (auto* tt = ir::dyn_cast<ir::tuple_type_node>(t)) {
      std::vector<vm::value> items;
      for (auto& x : tt->fields) items.push_back(allocate(x, f));
      return vm::value::tuple(std::move(items));
    }
    auto* tt = ir::dyn_cast<ir::tensor_type_node>(t);
    if (!tt || !tt->shape || !is_known(tt->dt)) fail(f, "cannot allocate an output of type " + ir::to_string(t) + " (shape or dtype unknown)");
    runtime::shape_vector dims;
    for (auto& d : *tt->shape) dims.push_back(eval_dim(d, f));
    return vm::value(runtime::tensor::empty(std::move(dims), tt->dt));
  }

  vm::value call_native(const std::string& symbol, const std::vector<vm::value>& args, const frame& f) {
    auto it = native_cache_.find(symbol);
    if (it == native_cache_.end()) {
      std::optional<vm::native_function> n = natives_->find(symbol);
      if (!n) fail(f, "no native function is registered as '" + symbol + "'");
      it = native_cache_.emplace(symbol, std::move(*n)).first;
    }
    std::vector<const vm::value*> ptrs;
    for (auto& a : args) ptrs.push_back(&a);
    return it->second(vm::call_args(ptrs.data(), ptrs.size()));
  }

  /// Destination-passing: allocates the outputs of type `out`, calls `symbol(args..., outputs)`
  /// (outputs of a tuple type as one tuple).
  vm::value call_dps(const std::string& symbol, std::vector<vm::value> args, const ir::type& out, frame& f) {
    vm::value outputs = allocate(out, f);  // several outputs go as one tuple argument
    args.push_back(outputs);
    call_native(symbol, args, f);
    return outputs;
  }

  std::vector<vm::value> eval_all(const std::vector<ir::expr>& xs, frame& f) {
    std::vector<vm::value> out;
    for (auto& x : xs) out.push_back(eval(x, f));
    return out;
  }
  std::vector<vm::value> eval_tuple(const ir::expr& t, frame& f) {
    vm::value v = eval(t, f);
    if (!v.is_tuple()) fail(f, "expected a tuple of arguments");
    return std::vector<vm::value>(v.as_tuple().begin(), v.as_tuple().end());
  }

  vm::value eval_call(const ir::call_node& c, frame& f) {
    try {
      if (auto* o = ir::dyn_cast<ir::op_node>(c.callee)) return eval_op_call(*o, c, f);
      if (auto* x = ir::dyn_cast<ir::extern_func_node>(c.callee)) return call_native(x->symbol, eval_all(c.args, f), f);
      if (auto* g = ir::dyn_cast<ir::global_var_node>(c.callee)) return call_function(g->name, eval_all(c.args, f));
      vm::value callee = eval(c.callee, f);
      return call_value(callee, eval_all(c.args, f), "function '" + f.function + "'");
    } catch (const evaluation_error&) {
      throw;
    } catch (const error& e) {
      fail(f, e.what());
    }
  }

  vm::value eval_op_call(const ir::op_node& o, const ir::call_node& c, frame& f) {
    const std::string& n = o.name();
    if (n == "call_tir") {
      auto& gv = static_cast<const ir::global_var_node&>(*c.args[0]);
      auto pf = ir::ref_cast<ir::prim_func_node>(module_->lookup(gv.name));
      if (!pf) fail(f, "R.call_tir target '" + gv.name + "' is not a kernel function of the module");
      std::vector<vm::value> inputs = eval_tuple(c.args[1], f);
      if (pf->body) {
        frame k;
        k.function = gv.name;
        for (std::size_t i = 0; i < inputs.size() && i < pf->num_inputs(); ++i) k.vars[pf->params[i].get()] = inputs[i];
        std::vector<pending_check> later;
        for (std::size_t i = 0; i < inputs.size() && i < pf->num_inputs(); ++i)
          match(pf->params[i]->checked_type, inputs[i], k, "parameter '" + pf->params[i]->name_hint + "'", later);
        check_pending(later, k);
        return eval(pf->body, k);
      }
      return call_dps(pf->attrs.get_or<std::string>(ir::attr::global_symbol, gv.name), std::move(inputs), c.type_args[0], f);
    }
    if (n == "call_dps_packed")
      return call_dps(static_cast<const ir::extern_func_node&>(*c.args[0]).symbol, eval_tuple(c.args[1], f), c.type_args[0], f);
    if (n == "call_builtin_with_ctx") {
      std::vector<vm::value> args{vm::value(static_cast<vm::vm_context*>(this))};
      for (auto& a : eval_tuple(c.args[1], f)) args.push_back(std::move(a));
      return call_native(static_cast<const ir::extern_func_node&>(*c.args[0]).symbol, args, f);
    }
    if (n == "null_value" || n == "memory.kill_tensor" || n == "memory.kill_storage" || n == "vm.kill_object") return vm::value();
    if (n == "make_closure") {
      auto& gv = static_cast<const ir::global_var_node&>(*c.args[0]);
      return vm::value::from_object(runtime::make_object<detail::ir_closure>(gv.name, eval_tuple(c.args[1], f)));
    }
    if (n == "builtin.alloc_tensor") return allocate(c.checked_type, f);
    if (n == "memory.alloc_storage") {
      const vm::value size = eval(c.args[0], f);
      return vm::value::from_object(runtime::make_storage(std::size_t(size.as_shape().at(0))));
    }
    if (n == "memory.alloc_tensor") {
      const vm::value st = eval(c.args[0], f);
      const vm::value shape = eval(c.args[1], f);
      return vm::value(runtime::tensor::from_storage(st.as_object<runtime::storage>(), std::size_t(c.attrs.get_or<std::int64_t>("offset", 0)),
                                                     c.attrs.find("dtype")->as<dtype>(), shape.as_shape()));
    }
    kernel_call k;
    try {
      k = lowering_->lower(c);
    } catch (const lowering_error& e) {
      fail(f, "R." + n + ": " + e.what());
    }
    std::vector<vm::value> args = eval_all(k.args, f);
    if (k.kind == kernel_call::form::returns_view) return call_native(k.kernel, args, f);
    return call_dps(k.kernel, std::move(args), c.checked_type, f);
  }

  ir::ir_module module_;
  const vm::function_registry* natives_;
  const kernel_lowering* lowering_;
  /// Each constant's tensor, made once. The entry holds the node too: a node freed while its
  /// entry stayed would let a new constant at the same address read the old one's value (the
  /// ONNX importer folds with one evaluator and drops the intermediate constants).
  std::unordered_map<const ir::constant_node*, std::pair<ir::expr, vm::value>> constants_;
  std::unordered_map<std::string, vm::native_function> native_cache_;
  std::size_t depth_ = 0;
};

}  // namespace kiln::interpreter
