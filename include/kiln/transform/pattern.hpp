// SPDX-License-Identifier: Apache-2.0
/// \file
/// Dataflow patterns: values that describe a subgraph of the IR by operator names, attributes,
/// types and structure, and match it (the role of Relax's dataflow pattern language and of ONNX
/// Runtime's graph-transformer selectors). `pattern_rewrite.hpp` rewrites what they match; kiln's
/// fusions are written with them.
///
/// \code
/// using namespace kiln::transform::patterns;
/// const pattern x = wildcard("x"), w = wildcard("w"), b = wildcard("b");
/// const pattern dense = is_op("add")(is_op("matmul")(x, w), b).commutative();
/// const pattern p = is_op("nn.relu")(dense).has_dtype(dtype::float32);
/// std::cout << p;     // nn.relu(add(matmul(x, w), b) commutative) : float32
/// \endcode
///
/// A pattern is one of:
///  - `wildcard()` — any expression;
///  - `is_op(name)` — a call of operator `name` with any operands, or, called with patterns,
///    `is_op(name)(p1, p2, ...)` — with exactly those operands; `is_op_where(description, test)`
///    matches any operator the test accepts (`is_elementwise()` those the registry marks
///    elementwise or broadcast);
///  - `is_const()` — a constant tensor; `is_var()` — a variable that no binding of the scope
///    produces (a parameter, or a value from outside the block);
///  - `p | q` — either.
///
/// and is refined by `.named(n)` (what it matched is bound to `n`; a name bound twice must match
/// the same expression), `.has_dtype`, `.has_rank`, `.has_shape`, `.has_attr` and `.where(test)`
/// (checked on the matched expression), and, for a binary operator, `.commutative()` (the two
/// operands in either order).
///
/// **Looking through bindings.** In a function, operands are mostly variables: `lv1 = R.add(lv0,
/// b)` where `lv0 = R.matmul(x, w)`. When an operator pattern meets a variable that the scope
/// says an earlier binding of the same block produces, it matches that binding's value, and the
/// binding joins the match as an *intermediate*: a rewrite of the match removes it. An
/// intermediate must have no use outside the match (a value used elsewhere cannot disappear), or
/// the whole match fails. Wildcards never look through: they bind the variable itself. The
/// expression matched may itself be a variable (a binding `gv = lv` that renames a value): an
/// operator pattern then looks through it too, and `match_result::root()` is that variable.
#pragma once

#include <kiln/ir/op.hpp>
#include <kiln/ir/printer.hpp>
#include <kiln/ir/structural_equal.hpp>
#include <kiln/support/error.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::transform {

/// What a match may look through: which earlier binding produces a variable, and how many times
/// each variable is used. The rewriter (`pattern_rewrite.hpp`) is one; an empty scope (the
/// default) looks through nothing.
class match_scope {
public:
  virtual ~match_scope() = default;
  /// The plain binding of the same block, before the match's root, that defines `v`, or null.
  virtual const ir::binding* producer(const ir::var_node&) const { return nullptr; }
  /// How many times `v` is used in the function.
  virtual std::size_t uses(const ir::var_node&) const { return 0; }
};

/// What a successful match found.
class match_result {
public:
  /// The expression bound to `name`; a `usage_error` naming the bound names when there is none.
  const ir::expr& operator[](std::string_view name) const {
    if (const ir::expr* e = find(name)) return *e;
    std::string known;
    for (auto& [n, e] : bound_) known += (known.empty() ? "" : ", ") + n;
    throw usage_error(kiln::detail::concat("kiln::transform::match_result: no expression is bound to '", name, "' (bound: ",
                                           known.empty() ? "none" : known, ")"));
  }
  const ir::expr* find(std::string_view name) const {
    auto it = bound_.find(name);
    return it == bound_.end() ? nullptr : &it->second;
  }
  /// Every name and what it matched.
  const std::map<std::string, ir::expr, std::less<>>& bound() const noexcept { return bound_; }
  /// The expression the match started from.
  const ir::expr& root() const noexcept { return root_; }
  /// The bindings the match looked through, in the order it met them: a rewrite removes them.
  const std::vector<const ir::binding*>& intermediates() const noexcept { return intermediates_; }

private:
  friend class pattern;
  ir::expr root_;
  std::map<std::string, ir::expr, std::less<>> bound_;
  std::vector<const ir::binding*> intermediates_;
  std::unordered_map<const ir::var_node*, std::size_t> refs_;  // uses of each intermediate inside the match
};

/// A pattern over the IR (see the file comment). Immutable and cheap to copy; the refining
/// methods return a new pattern.
class pattern {
public:
  /// A test on a matched expression, with what it checks in words (for printing).
  struct predicate {
    std::string description;
    std::function<bool(const ir::expr&)> test;
  };

  /// `wildcard()`, the pattern that matches anything.
  pattern() : n_(std::make_shared<const node>()) {}

  /// This operator pattern with exactly `operands` (patterns, or names of wildcards).
  template <class... P>
  pattern operator()(const P&... operands) const {
    std::vector<pattern> ops{to_pattern(operands)...};
    return with_operands(std::move(ops));
  }
  pattern with_operands(std::vector<pattern> operands) const {
    if (n_->kind == node::alternative) {
      node n = *n_;
      n.left = std::make_shared<pattern>(n.left->with_operands(operands));
      n.right = std::make_shared<pattern>(n.right->with_operands(std::move(operands)));
      return pattern(std::move(n));
    }
    if (n_->kind != node::op_call)
      throw usage_error("kiln::transform::pattern: only an operator pattern (is_op) takes operands, not " + to_string());
    node n = *n_;
    n.operands = std::move(operands);
    n.operands_given = true;
    return pattern(std::move(n));
  }

  /// What this pattern matches is bound to `name` in the result.
  pattern named(std::string name) const {
    node n = *n_;
    n.name = std::move(name);
    return pattern(std::move(n));
  }
  /// The matched expression satisfies `test` (`description` says what it checks).
  pattern where(std::string description, std::function<bool(const ir::expr&)> test) const {
    node n = *n_;
    n.predicates.push_back({std::move(description), std::move(test)});
    return pattern(std::move(n));
  }
  /// A tensor of dtype `dt`.
  pattern has_dtype(dtype dt) const {
    return where(std::string(name(dt)), [dt](const ir::expr& e) {
      auto* t = ir::dyn_cast<ir::tensor_type_node>(e->checked_type);
      return t && t->dt == dt;
    });
  }
  /// A tensor of rank `ndim`.
  pattern has_rank(int ndim) const {
    return where("rank " + std::to_string(ndim), [ndim](const ir::expr& e) {
      auto* t = ir::dyn_cast<ir::tensor_type_node>(e->checked_type);
      return t && t->ndim == ndim;
    });
  }
  /// A tensor whose shape is known to be `shape` (a dimension of -1 matches any).
  pattern has_shape(std::vector<std::int64_t> shape) const {
    std::string d = "shape (";
    for (std::size_t i = 0; i < shape.size(); ++i) d += (i ? ", " : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
    return where(d + ")", [shape](const ir::expr& e) {
      auto* t = ir::dyn_cast<ir::tensor_type_node>(e->checked_type);
      if (!t || !t->shape || t->shape->size() != shape.size()) return false;
      for (std::size_t i = 0; i < shape.size(); ++i)
        if (shape[i] >= 0 && t->static_dim(int(i)) != shape[i]) return false;
      return true;
    });
  }
  /// A call whose attribute `key` equals `value`.
  pattern has_attr(std::string key, ir::attr_value value) const {
    std::string d = key + "=" + ir::detail::attr_text(value);
    return where(std::move(d), [key, value](const ir::expr& e) {
      auto* c = ir::dyn_cast<ir::call_node>(e);
      const ir::attr_value* v = c ? c->attrs.find(key) : nullptr;
      return v && *v == value;
    });
  }
  /// A binary operator pattern whose operands may come in either order.
  pattern commutative() const {
    if (n_->kind != node::op_call || !n_->operands_given || n_->operands.size() != 2)
      throw usage_error("kiln::transform::pattern: commutative() needs an operator pattern with two operands, not " + to_string());
    node n = *n_;
    n.commutative = true;
    return pattern(std::move(n));
  }

  /// Either pattern (the left one is tried first).
  friend pattern operator|(const pattern& a, const pattern& b) {
    node n;
    n.kind = node::alternative;
    n.left = std::make_shared<pattern>(a);
    n.right = std::make_shared<pattern>(b);
    return pattern(std::move(n));
  }

  /// Matches `e`, looking through the bindings `scope` offers; the result, or nothing.
  std::optional<match_result> match(const ir::expr& e, const match_scope& scope = match_scope()) const {
    match_result r;
    r.root_ = e;
    if (!match_node(*n_, e, scope, r)) return std::nullopt;
    // Every intermediate must be used only inside the match.
    for (const ir::binding* b : r.intermediates_)
      if (r.refs_[b->variable.get()] != scope.uses(*b->variable)) return std::nullopt;
    return r;
  }

  /// The pattern as text: `nn.relu(add(matmul(x, w), b))`, with refinements after a `:`.
  std::string to_string() const {
    std::string s;
    print(*n_, s);
    return s;
  }
  friend std::ostream& operator<<(std::ostream& os, const pattern& p) { return os << p.to_string(); }

  /// For the builders (`patterns::`).
  struct node {
    enum kind_t : std::uint8_t { wildcard, op_call, constant, variable, alternative } kind = wildcard;
    std::string op;  ///< op_call: the operator, or a description of `op_test`
    std::function<bool(const ir::op_node&)> op_test;
    std::vector<pattern> operands;
    bool operands_given = false, commutative = false;
    std::string name;
    std::vector<predicate> predicates;
    std::shared_ptr<const pattern> left, right;
  };
  explicit pattern(node n) : n_(std::make_shared<const node>(std::move(n))) {}

private:
  static pattern to_pattern(const pattern& p) { return p; }
  static pattern to_pattern(const char* name) { return pattern().named(name); }
  static pattern to_pattern(const std::string& name) { return pattern().named(name); }

  static bool match_node(const node& n, const ir::expr& e, const match_scope& scope, match_result& r) {
    switch (n.kind) {
      case node::alternative: {
        match_result saved = r;
        if (match_node(*n.left->n_, e, scope, r)) return true;
        r = std::move(saved);
        return match_node(*n.right->n_, e, scope, r);
      }
      case node::wildcard: return finish(n, e, r);
      case node::constant: return ir::isa<ir::constant_node>(e) && finish(n, e, r);
      case node::variable: {
        auto* v = ir::dyn_cast<ir::var_node>(e);
        return v && !scope.producer(*v) && finish(n, e, r);
      }
      case node::op_call: break;
    }
    // An operator call, or a variable an earlier binding of the block gives one.
    ir::expr value = e;
    const ir::binding* through = nullptr;
    if (auto* v = ir::dyn_cast<ir::var_node>(e)) {
      through = scope.producer(*v);
      if (!through || through->is_match_cast()) return false;
      value = through->value;
    }
    auto* c = ir::dyn_cast<ir::call_node>(value);
    auto* o = c ? ir::dyn_cast<ir::op_node>(c->callee) : nullptr;
    if (!o) return false;
    if (n.op_test ? !n.op_test(*o) : o->name() != n.op) return false;
    match_result saved;
    if (n.commutative) saved = r;
    if (through) {
      std::size_t& refs = r.refs_[through->variable.get()];
      if (refs++ == 0) r.intermediates_.push_back(through);
    }
    if (n.operands_given) {
      if (c->args.size() != n.operands.size()) return false;
      auto operands_match = [&](bool swapped) {
        for (std::size_t i = 0; i < c->args.size(); ++i) {
          const std::size_t k = swapped ? c->args.size() - 1 - i : i;
          if (!match_node(*n.operands[k].n_, c->args[i], scope, r)) return false;
        }
        return true;
      };
      if (!operands_match(false)) {
        if (!n.commutative) return false;
        r = saved;
        if (through) {
          std::size_t& refs = r.refs_[through->variable.get()];
          if (refs++ == 0) r.intermediates_.push_back(through);
        }
        if (!operands_match(true)) return false;
      }
    }
    return finish(n, value, r);
  }

  /// The predicates and the name of `n`, on what it matched.
  static bool finish(const node& n, const ir::expr& e, match_result& r) {
    for (const predicate& p : n.predicates)
      if (!p.test(e)) return false;
    if (n.name.empty()) return true;
    auto [it, fresh] = r.bound_.emplace(n.name, e);
    return fresh || it->second == e || ir::structural_equal(it->second, e);
  }

  static void print(const node& n, std::string& s) {
    switch (n.kind) {
      case node::alternative:
        s += "(";
        print(*n.left->n_, s);
        s += " | ";
        print(*n.right->n_, s);
        s += ")";
        break;
      case node::wildcard: s += n.name.empty() ? "*" : n.name; break;
      case node::constant: s += "const"; break;
      case node::variable: s += "var"; break;
      case node::op_call:
        s += n.op;
        if (n.operands_given) {
          s += "(";
          for (std::size_t i = 0; i < n.operands.size(); ++i) {
            if (i) s += ", ";
            print(*n.operands[i].n_, s);
          }
          s += ")";
        }
        if (n.commutative) s += " commutative";
        break;
    }
    if (n.kind != node::wildcard && !n.name.empty()) s += " as " + n.name;
    if (!n.predicates.empty()) {
      s += " :";
      for (std::size_t i = 0; i < n.predicates.size(); ++i) s += (i ? ", " : " ") + n.predicates[i].description;
    }
  }

  std::shared_ptr<const node> n_;
};

/// The pattern builders: `using namespace kiln::transform::patterns;`.
namespace patterns {

using kiln::transform::pattern;

/// Any expression (bound to `name` when one is given).
inline pattern wildcard(std::string name = {}) { return name.empty() ? pattern() : pattern().named(std::move(name)); }

/// A call of operator `op_name` (any operands until called with some).
inline pattern is_op(std::string op_name) {
  pattern::node n;
  n.kind = pattern::node::op_call;
  n.op = std::move(op_name);
  return pattern(std::move(n));
}

/// A call of any operator `test` accepts.
inline pattern is_op_where(std::string description, std::function<bool(const ir::op_node&)> test) {
  pattern::node n;
  n.kind = pattern::node::op_call;
  n.op = "<" + std::move(description) + ">";
  n.op_test = std::move(test);
  return pattern(std::move(n));
}

/// A call of an operator the registry marks elementwise or broadcast.
inline pattern is_elementwise() {
  return is_op_where("elementwise", [](const ir::op_node& o) {
    return o.pattern() == ir::op_pattern::elemwise || o.pattern() == ir::op_pattern::broadcast;
  });
}

/// A constant tensor.
inline pattern is_const() {
  pattern::node n;
  n.kind = pattern::node::constant;
  return pattern(std::move(n));
}

/// A variable not produced by a binding the match can look through.
inline pattern is_var() {
  pattern::node n;
  n.kind = pattern::node::variable;
  return pattern(std::move(n));
}

}  // namespace patterns

}  // namespace kiln::transform
