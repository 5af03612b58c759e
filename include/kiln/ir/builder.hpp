// SPDX-License-Identifier: Apache-2.0
/// \file
/// `block_builder`: constructs IR in C++ (Relax's BlockBuilder).
///
/// \code
///   ir::block_builder bb;
///   auto n = ir::make_size_var("n");
///   auto x = ir::make_var("x", ir::tensor_type({n, 784}, kiln::dtype::float32));
///   auto w = ir::make_var("w", ir::tensor_type({784, 10}, kiln::dtype::float32));
///   bb.function("main", {x, w}, [&] {
///     auto y = bb.dataflow([&] {
///       auto mm = bb.emit(ir::call_op("matmul", {x, w}));
///       return bb.emit_output(ir::call_op("nn.relu", {mm}));
///     });
///     return y;
///   });
///   ir::ir_module m = bb.module();
/// \endcode
///
/// Calls are type-checked as they are built (`call_op` infers their types); `emit` binds a value to
/// a new variable in the current block, a dataflow variable inside `dataflow`. A scope left by an
/// exception is discarded, leaving the builder as it was before the scope opened.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>

namespace kiln::ir {

class block_builder {
public:
  explicit block_builder(ir_module m = make_module()) : module_(std::move(m)) {}

  /// The module built so far.
  const ir_module& module() const noexcept { return module_; }

  /// Adds (or replaces) a function of the module and returns its global variable.
  global_var add_function(const std::string& name, base_func f) {
    module_ = with_function(module_, name, std::move(f));
    return module_->get_global_var(name);
  }
  /// The global variable of function `name`; an error if the module has none.
  global_var get_global_var(const std::string& name) const {
    if (auto gv = module_->get_global_var(name)) return gv;
    throw usage_error("kiln::ir::block_builder: the module has no function named '" + name + "'");
  }

  // ---- functions ---------------------------------------------------------------------------------

  /// Opens a function; bindings emitted until `end_function` form its body.
  void begin_function(std::string name, std::vector<var> params, attr_map attrs = {}) {
    if (in_function_) throw usage_error("kiln::ir::block_builder: begin_function('" + name + "') inside function '" + fn_name_ + "'");
    in_function_ = true;
    fn_name_ = std::move(name);
    fn_params_ = std::move(params);
    fn_attrs_ = std::move(attrs);
    blocks_.clear();
    blocks_.push_back({false, {}});
  }
  /// Closes the function with `result` as its value, adds it to the module and returns its global
  /// variable. The return type is `ret_type`, or the result's type when not given.
  global_var end_function(expr result, type ret_type = {}) {
    require_function("end_function");
    if (in_dataflow()) throw usage_error("kiln::ir::block_builder: end_function inside an open dataflow block");
    ir::function f = make_function(fn_params_, make_seq(std::move(blocks_), std::move(result)), std::move(ret_type), fn_attrs_);
    std::string name = fn_name_;
    reset_function();
    return add_function(name, f);
  }
  /// `begin_function`, then `body()` (which returns the result), then `end_function`.
  template <class Body>
  global_var function(std::string name, std::vector<var> params, Body&& body, attr_map attrs = {}, type ret_type = {}) {
    begin_function(std::move(name), std::move(params), std::move(attrs));
    try {
      expr result = body();
      return end_function(std::move(result), std::move(ret_type));
    } catch (...) {
      reset_function();
      throw;
    }
  }

  // ---- dataflow blocks ---------------------------------------------------------------------------

  /// Opens a dataflow block: `emit` now creates dataflow variables.
  void begin_dataflow() {
    require_function("begin_dataflow");
    if (in_dataflow()) throw usage_error("kiln::ir::block_builder: dataflow blocks cannot nest");
    blocks_.push_back({true, {}});
  }
  void end_dataflow() {
    if (!in_dataflow()) throw usage_error("kiln::ir::block_builder: end_dataflow without an open dataflow block");
    blocks_.push_back({false, {}});
  }
  /// `begin_dataflow`, `body()`, `end_dataflow`; returns what `body` returns.
  template <class Body>
  auto dataflow(Body&& body) -> decltype(body()) {
    begin_dataflow();
    const std::size_t mark = blocks_.size() - 1;
    try {
      if constexpr (std::is_void_v<decltype(body())>) {
        body();
        end_dataflow();
      } else {
        auto r = body();
        end_dataflow();
        return r;
      }
    } catch (...) {
      blocks_.resize(mark);  // drop the block and anything after it
      if (blocks_.empty() || blocks_.back().dataflow) blocks_.push_back({false, {}});
      throw;
    }
  }

  // ---- emitting bindings ---------------------------------------------------------------------------

  /// Binds `value` to a new variable (a dataflow variable inside a dataflow block).
  var emit(expr value, std::string name_hint = {}) {
    require_function("emit");
    var v = new_binding_var(std::move(name_hint), value->checked_type);
    blocks_.back().bindings.push_back({v, std::move(value), {}});
    return v;
  }
  /// Binds `value` to a variable visible after the current dataflow block (an output of it).
  var emit_output(expr value, std::string name_hint = "gv") {
    require_function("emit_output");
    if (!in_dataflow()) throw usage_error("kiln::ir::block_builder: emit_output is only meaningful inside a dataflow block");
    var v = make_var(std::move(name_hint), value->checked_type);
    blocks_.back().bindings.push_back({v, std::move(value), {}});
    return v;
  }
  /// Binds `value`, checked at run time to have type `t` (defining any new size variables of `t`).
  var emit_match_cast(expr value, type t, std::string name_hint = {}) {
    require_function("emit_match_cast");
    if (value->checked_type->kind != t->kind && value->checked_type->kind != node_kind::object_type)
      throw type_error("kiln::ir::block_builder: match_cast of a value of type " + to_string(value->checked_type) + " to " +
                       to_string(t) + " can never succeed");
    var v = new_binding_var(std::move(name_hint), t);
    blocks_.back().bindings.push_back({v, std::move(value), t});
    return v;
  }

  /// A call to function `name` of the module (declared earlier through this builder or the module).
  expr call(const std::string& name, std::vector<expr> args) const { return call_function(get_global_var(name), std::move(args)); }

  /// Discards the function being built (what `function` does when its body throws; for bindings to
  /// languages whose scopes are not C++ lambdas).
  void abandon_function() noexcept { reset_function(); }
  /// Discards the open dataflow block and its bindings (what `dataflow` does when its body throws).
  void abandon_dataflow() {
    if (!in_dataflow()) return;
    blocks_.pop_back();
    if (blocks_.empty() || blocks_.back().dataflow) blocks_.push_back({false, {}});
  }

  bool in_function() const noexcept { return in_function_; }
  bool in_dataflow() const noexcept { return in_function_ && !blocks_.empty() && blocks_.back().dataflow; }

private:
  void require_function(const char* what) const {
    if (!in_function_) throw usage_error(std::string("kiln::ir::block_builder: ") + what + " outside of a function");
  }
  /// The variable a binding in the current block defines: a dataflow variable named "lv" by
  /// default inside a dataflow block, a plain one named "gv" outside.
  var new_binding_var(std::string name_hint, type t) const {
    const bool df = in_dataflow();
    if (name_hint.empty()) name_hint = df ? "lv" : "gv";
    return df ? make_dataflow_var(std::move(name_hint), std::move(t)) : make_var(std::move(name_hint), std::move(t));
  }

  void reset_function() {
    in_function_ = false;
    fn_name_.clear();
    fn_params_.clear();
    fn_attrs_ = {};
    blocks_.clear();
  }

  ir_module module_;
  bool in_function_ = false;
  std::string fn_name_;
  std::vector<var> fn_params_;
  attr_map fn_attrs_;
  std::vector<binding_block> blocks_;
};

}  // namespace kiln::ir
