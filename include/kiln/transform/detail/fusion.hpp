// SPDX-License-Identifier: Apache-2.0
/// \file
/// What the fusion passes share: growing the largest tree of elementwise operators that ends at
/// the binding being rewritten, and writing it as a fused kernel's description (the s-expression
/// of `kernels::fused_expr`).
#pragma once

#include <kiln/ir/expr.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/transform/pattern_rewrite.hpp>

#include <charconv>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::transform::detail {

/// The most inputs a fused kernel takes, and the most operators one description holds (a value
/// used twice inside a group is computed twice, so the description may be larger than the group).
inline constexpr std::size_t max_fused_inputs = 8;
inline constexpr std::size_t max_fused_operations = 48;

/// The float dtype of a tensor type, or void.
inline dtype float_dtype(const ir::type& t) {
  auto* tt = ir::dyn_cast<ir::tensor_type_node>(t);
  return tt && (tt->dt == dtype::float32 || tt->dt == dtype::float64) ? tt->dt : dtype::void_;
}

/// True when the type is a tensor whose shape is known (the output can be allocated).
inline bool has_shape(const ir::type& t) {
  auto* tt = ir::dyn_cast<ir::tensor_type_node>(t);
  return tt && tt->shape.has_value();
}

/// The fused-kernel operator (and clip bounds) of a call of an elementwise operator on tensors
/// of dtype `dt` giving `dt`, or nothing when a fused kernel cannot compute it.
struct fused_op {
  std::string name;
  std::string bounds;  ///< " lo hi" for clip
};
inline std::optional<fused_op> fused_operator(const ir::expr& e, dtype dt) {
  auto* c = ir::dyn_cast<ir::call_node>(e);
  auto* o = c ? ir::dyn_cast<ir::op_node>(c->callee) : nullptr;
  if (!o || float_dtype(c->checked_type) != dt) return std::nullopt;
  for (const ir::expr& a : c->args)
    if (float_dtype(a->checked_type) != dt) return std::nullopt;
  static const std::unordered_set<std::string> same = {"add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "negative",
                                                       "abs",  "exp",      "log",      "sqrt",   "rsqrt", "tanh",    "sigmoid", "erf"};
  const std::string& n = o->name();
  if (same.count(n)) return fused_op{n, {}};
  if (n == "nn.relu") return fused_op{"relu", {}};
  if (n == "nn.gelu") return fused_op{c->attrs.get_or<std::string>("approximate", "none") == "tanh" ? "gelu_tanh" : "gelu", {}};
  if (n == "clip") {
    const double inf = std::numeric_limits<double>::infinity();
    auto number = [](double v) {
      char buf[32];
      return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    };
    return fused_op{"clip", " " + number(c->attrs.get_or<double>("min", -inf)) + " " + number(c->attrs.get_or<double>("max", inf))};
  }
  return std::nullopt;
}

/// A group of elementwise bindings that one fused kernel computes: the root (the binding being
/// rewritten), the elementwise calls nested in its operands, and the bindings it absorbs, each
/// used only inside the group (once, or for one arithmetic operator on inputs, more than once).
class elementwise_group {
public:
  /// Grows the group from the current binding of `ctx`, whose value `root` is an elementwise
  /// call of dtype `dt`; `keep` is never absorbed (the epilogue's product, computed elsewhere).
  elementwise_group(rewrite_context& ctx, const ir::expr& root, dtype dt, const ir::var_node* keep = nullptr)
      : ctx_(ctx), root_(root), dt_(dt) {
    std::unordered_set<const ir::var_node*> rejected;
    if (keep) rejected.insert(keep);
    for (bool grew = true; grew;) {
      grew = false;
      std::unordered_map<const ir::var_node*, std::size_t> refs;
      std::vector<const ir::var_node*> order;  // first seen, for a deterministic result
      for_each_operand([&](const ir::var_node* v) {
        if (refs[v]++ == 0) order.push_back(v);
      });
      for (const ir::var_node* v : order) {
        if (members_.count(v) || rejected.count(v)) continue;
        const ir::binding* b = ctx_.producer(*v);
        // Used only here. A value used more than once is computed once per use (a description
        // has no shared subexpressions), so only one arithmetic operator on inputs is taken in
        // that way: the bias add a hard-swish or SiLU reads twice, x * sigmoid(x) over a
        // convolution's output (else the convolution's output would make a trip through memory
        // for one addition).
        if (!b || !fused_operator(b->value, dt_) || refs[v] != ctx_.uses(*v) || (refs[v] > 1 && !shareable(b->value))) continue;
        members_.emplace(v, b);
        if (operations() > max_fused_operations || inputs().size() > max_fused_inputs) {
          members_.erase(v);
          rejected.insert(v);
          continue;
        }
        grew = true;
      }
    }
  }

  /// The bindings absorbed (not the root).
  std::size_t size() const noexcept { return members_.size(); }
  /// Operators in the description.
  std::size_t operations() const { return count_operations(root_); }
  /// The tensors the group reads, in the order the description first reads them.
  std::vector<ir::expr> inputs() const {
    std::vector<ir::expr> in;
    collect(root_, in);
    return in;
  }
  /// The description, the inputs numbered in the order of `order` (which holds each input once),
  /// followed by "; " and the names of the bindings it replaces in block order, root last: the
  /// group's and those of `also` (a product and what it absorbs).
  std::string description(const std::vector<ir::expr>& order, const std::vector<const ir::var_node*>& also = {}) const {
    std::string s;
    render(root_, order, s);
    s += " ;";
    std::vector<std::pair<std::ptrdiff_t, std::string>> names;
    for (auto& [v, b] : members_) names.emplace_back(position(*v), v->name_hint);
    for (const ir::var_node* v : also) names.emplace_back(position(*v), v->name_hint);
    std::sort(names.begin(), names.end());
    for (auto& [p, n] : names) s += " " + n;
    s += " " + ctx_.current().variable->name_hint;
    return s;
  }
  /// How many times the group's operators use `v`.
  std::size_t references(const ir::var_node& v) const {
    std::size_t n = 0;
    for_each_operand([&](const ir::var_node* x) { n += x == &v; });
    return n;
  }
  /// Absorbs the group's bindings into the rewrite.
  void absorb() const {
    for (auto& [v, b] : members_) ctx_.absorb(*v);
  }

private:
  /// Where `v`'s binding is, relative to the root's (bindings of one block are contiguous).
  std::ptrdiff_t position(const ir::var_node& v) const { return ctx_.producer(v) - &ctx_.current(); }
  /// The value computing `e` inside the group: a member's binding value, or `e` itself when it is
  /// an operator call nested in an operand (`R.nn.relu(R.add(x, b))`); null for an input.
  const ir::expr* inner(const ir::expr& e) const {
    if (auto* v = ir::dyn_cast<ir::var_node>(e)) {
      if (auto it = members_.find(v); it != members_.end()) return &it->second->value;
    } else if (ir::isa<ir::call_node>(e) && fused_operator(e, dt_)) {
      return &e;
    }
    return nullptr;
  }
  /// Calls `f(v)` for each variable operand of the group's operators (once per use).
  template <class F>
  void for_each_operand(F&& f) const {
    auto walk = [&](auto& self, const ir::expr& call) -> void {
      for (const ir::expr& a : static_cast<const ir::call_node&>(*call).args) {
        if (auto* v = ir::dyn_cast<ir::var_node>(a)) f(v);
        else if (const ir::expr* in = inner(a)) self(self, *in);
      }
    };
    walk(walk, root_);
    for (auto& [v, b] : members_) walk(walk, b->value);
  }
  /// Whether `value` is cheap enough to compute once per use: one add, subtract, multiply or
  /// divide whose operands are not calls.
  static bool shareable(const ir::expr& value) {
    const ir::op_node* o = callee_op(value);
    if (!o || (o->name() != "add" && o->name() != "subtract" && o->name() != "multiply" && o->name() != "divide")) return false;
    for (const ir::expr& a : static_cast<const ir::call_node&>(*value).args)
      if (ir::isa<ir::call_node>(a)) return false;
    return true;
  }
  static bool is_number(const ir::expr& e) {
    auto* c = ir::dyn_cast<ir::constant_node>(e);
    return c && c->data.shape().empty();
  }
  std::size_t count_operations(const ir::expr& call) const {
    std::size_t n = 1;
    for (const ir::expr& a : static_cast<const ir::call_node&>(*call).args)
      if (const ir::expr* v = inner(a)) n += count_operations(*v);
    return n;
  }
  void collect(const ir::expr& call, std::vector<ir::expr>& in) const {
    for (const ir::expr& a : static_cast<const ir::call_node&>(*call).args) {
      if (const ir::expr* v = inner(a)) collect(*v, in);
      else if (!is_number(a) && std::find(in.begin(), in.end(), a) == in.end()) in.push_back(a);
    }
  }
  void render(const ir::expr& call, const std::vector<ir::expr>& order, std::string& s) const {
    const fused_op op = *fused_operator(call, dt_);
    s += "(" + op.name;
    for (const ir::expr& a : static_cast<const ir::call_node&>(*call).args) {
      s += " ";
      if (const ir::expr* v = inner(a)) {
        render(*v, order, s);
      } else if (is_number(a)) {
        char buf[32];
        s.append(buf, std::to_chars(buf, buf + sizeof buf, static_cast<const ir::constant_node&>(*a).data.element(0)).ptr);
      } else {
        s += "x" + std::to_string(std::find(order.begin(), order.end(), a) - order.begin());
      }
    }
    s += op.bounds + ")";
  }

  rewrite_context& ctx_;
  ir::expr root_;
  dtype dt_;
  std::unordered_map<const ir::var_node*, const ir::binding*> members_;
};

/// Binds operator calls nested in the operands of another operator that is not elementwise
/// (`R.nn.layer_norm(R.add(x, R.matmul(c, w)), ...)`) to variables of their own, named after the
/// operator, so that the fusion rules, which start from bindings, see them. Elementwise calls
/// nested in elementwise calls stay: a group takes them in as they are.
inline ir::ir_module bind_nested_calls(const ir::ir_module& m) {
  auto is_elementwise = [](const ir::expr& e) {
    const ir::op_node* o = callee_op(e);
    return o && (o->pattern() == ir::op_pattern::elemwise || o->pattern() == ir::op_pattern::broadcast);
  };
  auto is_operator_call = [](const ir::expr& e) {
    const ir::op_node* o = callee_op(e);
    return o && o->name() != "call_tir" && o->name() != "call_dps_packed" && o->name() != "call_builtin_with_ctx" && o->name() != "null_value" &&
           o->name().rfind("memory.", 0) != 0 && o->name().rfind("builtin.", 0) != 0;
  };
  // Hoisted calls bind dataflow variables in a dataflow block (even when the binding they come
  // from is one of its outputs) and ordinary variables elsewhere.
  std::function<void(const ir::binding&, std::vector<ir::binding>&, bool)> on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out,
                                                                                            bool dataflow) {
    auto* c = ir::dyn_cast<ir::call_node>(b.value);
    if (!c || !is_operator_call(b.value) || is_elementwise(b.value)) return out.push_back(b);
    std::vector<ir::expr> args;
    bool changed = false;
    for (const ir::expr& a : c->args) {
      if (!is_operator_call(a)) {
        args.push_back(a);
        continue;
      }
      std::string name = callee_op(a)->name();
      name = name.substr(name.rfind('.') + 1);
      ir::var v = dataflow ? ir::make_dataflow_var(name, a->checked_type) : ir::make_var(name, a->checked_type);
      on_binding(ir::binding{v, a, {}}, out, dataflow);  // its own nested calls first
      args.push_back(v);
      changed = true;
    }
    out.push_back(changed ? ir::binding{b.variable, ir::expr_mutator::rebuild_call(*c, c->callee, std::move(args)), b.cast_type} : b);
  };
  auto on_body = [](const ir::expr& e) { return e; };
  ir::ir_module out = m;
  for (auto& e : m->functions()) {
    auto f = ir::ref_cast<ir::function_node>(e.func);
    if (!f || ir::detail::has_skip_optimization(*f)) continue;
    ir::function g = with_body(f, rewrite_seq(f->body, on_binding, on_body));
    if (g != f) out = ir::with_function(out, e.gv->name, g);
  }
  return out;
}

}  // namespace kiln::transform::detail
