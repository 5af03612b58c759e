// SPDX-License-Identifier: Apache-2.0
/// \file
/// Symbolic integer expressions: the dimensions of tensor shapes.
///
/// A dimension is a constant (`int_imm`), a symbolic variable (`size_var`, e.g. a dynamic batch
/// size `n`), or arithmetic on them. Constructors fold constants and apply identities, and
/// `prove_equal` compares two dimensions through a linear canonical form, so `n * 4` and `4 * n`
/// or `(n + 1) - 1` and `n` are recognised as equal.
#pragma once

#include <kiln/ir/node.hpp>
#include <kiln/support/error.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::ir {

class prim_expr_node : public node {
public:
  static bool classof(const node& n) noexcept {
    return n.kind >= node_kind::int_imm && n.kind <= node_kind::prim_binary;
  }

protected:
  using node::node;
};
using prim_expr = ref<prim_expr_node>;

/// An integer constant.
class int_imm_node final : public prim_expr_node {
public:
  const std::int64_t value;
  explicit int_imm_node(std::int64_t v) noexcept : prim_expr_node(node_kind::int_imm), value(v) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::int_imm; }
};

/// A symbolic, non-negative integer variable (a dimension known only at run time). Two size
/// variables are the same variable only if they are the same object; the name is a hint.
class size_var_node final : public prim_expr_node {
public:
  const std::string name;
  explicit size_var_node(std::string n) : prim_expr_node(node_kind::size_var), name(std::move(n)) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::size_var; }
};
using size_var = ref<size_var_node>;

enum class prim_op : std::uint8_t { add, sub, mul, floordiv, floormod, min, max };

/// `a op b` on integers; division and modulo round towards negative infinity.
class prim_binary_node final : public prim_expr_node {
public:
  const prim_op op;
  const prim_expr a, b;
  prim_binary_node(prim_op o, prim_expr x, prim_expr y)
      : prim_expr_node(node_kind::prim_binary), op(o), a(std::move(x)), b(std::move(y)) {
    nest(a);
    nest(b);
  }
  static bool classof(const node& n) noexcept { return n.kind == node_kind::prim_binary; }
};

/// The operator's spelling in the text format.
constexpr const char* spelling(prim_op op) noexcept {
  switch (op) {
    case prim_op::add: return "+";
    case prim_op::sub: return "-";
    case prim_op::mul: return "*";
    case prim_op::floordiv: return "//";
    case prim_op::floormod: return "%";
    case prim_op::min: return "T.min";
    case prim_op::max: return "T.max";
  }
  return "?";
}

namespace detail {
constexpr std::int64_t floordiv(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
constexpr std::int64_t floormod(std::int64_t a, std::int64_t b) noexcept { return a - floordiv(a, b) * b; }
}  // namespace detail

inline prim_expr make_int(std::int64_t v) { return make_ref<int_imm_node>(v); }
inline size_var make_size_var(std::string name) { return make_ref<size_var_node>(std::move(name)); }

/// The value of a constant dimension, or nullopt when it is symbolic.
inline std::optional<std::int64_t> as_int(const prim_expr& e) noexcept {
  if (auto* i = dyn_cast<int_imm_node>(e)) return i->value;
  return std::nullopt;
}

/// Builds `a op b`, folding constants and simple identities.
inline prim_expr make_binary(prim_op op, prim_expr a, prim_expr b) {
  auto ca = as_int(a), cb = as_int(b);
  if (ca && cb) {
    std::int64_t r = 0;
    bool overflow = false;
    switch (op) {
      case prim_op::add: overflow = __builtin_add_overflow(*ca, *cb, &r); break;
      case prim_op::sub: overflow = __builtin_sub_overflow(*ca, *cb, &r); break;
      case prim_op::mul: overflow = __builtin_mul_overflow(*ca, *cb, &r); break;
      case prim_op::floordiv:
        if (*cb == 0) throw error("kiln::ir: division by zero in a shape expression");
        overflow = *ca == INT64_MIN && *cb == -1;
        if (!overflow) r = detail::floordiv(*ca, *cb);
        break;
      case prim_op::floormod:
        if (*cb == 0) throw error("kiln::ir: modulo by zero in a shape expression");
        return make_int(*cb == -1 ? 0 : detail::floormod(*ca, *cb));
      case prim_op::min: return make_int(std::min(*ca, *cb));
      case prim_op::max: return make_int(std::max(*ca, *cb));
    }
    if (overflow)
      throw error("kiln::ir: a shape expression overflows int64: " + std::to_string(*ca) + " " + spelling(op) + " " +
                  std::to_string(*cb));
    return make_int(r);
  }
  switch (op) {
    case prim_op::add:
      if (ca == 0) return b;
      if (cb == 0) return a;
      if (ca && !cb) std::swap(a, b), std::swap(ca, cb);  // constants on the right: n + 1
      if (cb && *cb < 0 && *cb != INT64_MIN) return make_binary(prim_op::sub, a, make_int(-*cb));  // n - 3, not n + -3
      break;
    case prim_op::sub:
      if (cb == 0) return a;
      if (a == b) return make_int(0);
      if (cb && *cb < 0 && *cb != INT64_MIN) return make_binary(prim_op::add, a, make_int(-*cb));
      break;
    case prim_op::mul:
      if (ca == 1) return b;
      if (cb == 1) return a;
      if (ca == 0 || cb == 0) return make_int(0);
      if (ca && !cb) std::swap(a, b);  // constants on the right: n * 4
      break;
    case prim_op::floordiv:
      if (cb == 1) return a;
      if (cb == 0) throw error("kiln::ir: division by zero in a shape expression");
      break;
    case prim_op::floormod:
      if (cb == 1) return make_int(0);
      if (cb == 0) throw error("kiln::ir: modulo by zero in a shape expression");
      break;
    case prim_op::min:
    case prim_op::max:
      if (a == b) return a;
      break;
  }
  return make_ref<prim_binary_node>(op, std::move(a), std::move(b));
}

inline prim_expr operator+(const prim_expr& a, const prim_expr& b) { return make_binary(prim_op::add, a, b); }
inline prim_expr operator-(const prim_expr& a, const prim_expr& b) { return make_binary(prim_op::sub, a, b); }
inline prim_expr operator*(const prim_expr& a, const prim_expr& b) { return make_binary(prim_op::mul, a, b); }
inline prim_expr operator+(const prim_expr& a, std::int64_t b) { return a + make_int(b); }
inline prim_expr operator-(const prim_expr& a, std::int64_t b) { return a - make_int(b); }
inline prim_expr operator*(const prim_expr& a, std::int64_t b) { return a * make_int(b); }
inline prim_expr floordiv(const prim_expr& a, const prim_expr& b) { return make_binary(prim_op::floordiv, a, b); }
inline prim_expr floormod(const prim_expr& a, const prim_expr& b) { return make_binary(prim_op::floormod, a, b); }

namespace detail {
inline int precedence(const prim_expr& e) noexcept {
  auto* b = dyn_cast<prim_binary_node>(e);
  if (!b) return 3;
  switch (b->op) {
    case prim_op::add:
    case prim_op::sub: return 1;
    case prim_op::mul:
    case prim_op::floordiv:
    case prim_op::floormod: return 2;
    default: return 3;  // function-call syntax
  }
}
}  // namespace detail

/// Prints a dimension in the text format; `name_of` gives the printed name of a size variable.
template <class NameOf>
std::string to_string(const prim_expr& e, NameOf&& name_of) {
  switch (e->kind) {
    case node_kind::int_imm: return std::to_string(static_cast<const int_imm_node&>(*e).value);
    case node_kind::size_var: return name_of(static_cast<const size_var_node&>(*e));
    default: break;
  }
  const auto& b = static_cast<const prim_binary_node&>(*e);
  if (b.op == prim_op::min || b.op == prim_op::max)
    return std::string(spelling(b.op)) + "(" + to_string(b.a, name_of) + ", " + to_string(b.b, name_of) + ")";
  const int p = detail::precedence(e);
  std::string l = to_string(b.a, name_of), r = to_string(b.b, name_of);
  if (detail::precedence(b.a) < p) l = "(" + l + ")";
  if (detail::precedence(b.b) <= p) r = "(" + r + ")";  // left-associative operators
  return l + " " + spelling(b.op) + " " + r;
}
inline std::string to_string(const prim_expr& e) {
  return to_string(e, [](const size_var_node& v) { return v.name; });
}

/// Prints a list of dimensions between `open` and `close`; a one-element list in parentheses
/// gets the tuple comma, `(n,)`.
template <class NameOf>
std::string to_string(const std::vector<prim_expr>& dims, NameOf&& name_of, const char* open = "(", const char* close = ")") {
  std::string s = open;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += to_string(dims[i], name_of);
  }
  if (dims.size() == 1 && open[0] == '(') s += ',';
  return s + close;
}
inline std::string to_string(const std::vector<prim_expr>& dims) {
  return to_string(dims, [](const size_var_node& v) { return v.name; });
}

namespace detail {
/// A linear form `sum(coeff * atom) + constant`, where atoms are size variables or non-linear terms
/// (identified by pointer, after their own canonicalisation to a printed key).
struct linear_form {
  std::map<std::string, std::int64_t> terms;
  std::int64_t constant = 0;
};

/// The printed key of a non-linear term `l op r`, from its operands' linear forms (commutative
/// operators order their operands, so `a * b` and `b * a` are one atom).
inline std::string atom_key(prim_op op, const linear_form& lf, const linear_form& rf) {
  // Strings are built by appending: GCC 12 at -O2/-O3 warns falsely (-Wrestrict, PR105651) on
  // "literal" + std::string, which breaks -Werror builds.
  auto text_of = [](const linear_form& f) {
    std::string s = std::to_string(f.constant);
    for (auto& [k, v] : f.terms) {
      s += '+';
      s += std::to_string(v);
      s += '*';
      s += k;
    }
    return s;
  };
  std::string l = text_of(lf), r = text_of(rf);
  if ((op == prim_op::mul || op == prim_op::min || op == prim_op::max) && r < l) std::swap(l, r);
  std::string key(1, '(');
  key.append(spelling(op)).append(1, ' ').append(l).append(1, ' ').append(r).append(1, ')');
  return key;
}

/// The linear form of `e`. Each sub-expression is linearized once (its form serves both the sum
/// or product it is part of and, when that is not linear, the key of the atom), so the cost is
/// linear in the size of `e` times the length of the keys, however the products nest.
inline linear_form linearize(const prim_expr& e) {
  linear_form f;
  if (auto c = as_int(e)) {
    f.constant = *c;
    return f;
  }
  if (auto* v = dyn_cast<size_var_node>(e)) {
    std::string key(1, 'v');
    key += std::to_string(reinterpret_cast<std::uintptr_t>(v));
    f.terms.emplace(std::move(key), 1);
    return f;
  }
  const auto& b = static_cast<const prim_binary_node&>(*e);
  linear_form l = linearize(b.a), r = linearize(b.b);
  // A coefficient that would overflow int64 makes the term an atom (equal only to itself).
  bool overflow = false;
  if (b.op == prim_op::add || b.op == prim_op::sub) {
    linear_form sum = l;
    for (auto& [k, v] : r.terms) {
      std::int64_t& c = sum.terms[k];
      overflow |= b.op == prim_op::add ? __builtin_add_overflow(c, v, &c) : __builtin_sub_overflow(c, v, &c);
    }
    overflow |= b.op == prim_op::add ? __builtin_add_overflow(sum.constant, r.constant, &sum.constant)
                                     : __builtin_sub_overflow(sum.constant, r.constant, &sum.constant);
    std::erase_if(sum.terms, [](const auto& kv) { return kv.second == 0; });
    if (!overflow) return sum;
  } else if (b.op == prim_op::mul && (l.terms.empty() || r.terms.empty())) {
    const linear_form& scaled = l.terms.empty() ? r : l;
    const std::int64_t k = l.terms.empty() ? l.constant : r.constant;
    linear_form out;
    for (auto& [key, v] : scaled.terms) {
      std::int64_t c = 0;
      overflow |= __builtin_mul_overflow(v, k, &c);
      if (c != 0) out.terms[key] = c;
    }
    overflow |= __builtin_mul_overflow(scaled.constant, k, &out.constant);
    if (!overflow) return out;
  }
  f.terms.emplace(atom_key(b.op, l, r), 1);
  return f;
}
}  // namespace detail

/// True when `a` and `b` are provably equal for every value of their size variables (a sound but
/// incomplete check: false means "could not prove", not "different").
inline bool prove_equal(const prim_expr& a, const prim_expr& b) {
  if (a == b) return true;
  auto ca = as_int(a), cb = as_int(b);
  if (ca && cb) return *ca == *cb;
  detail::linear_form fa = detail::linearize(a), fb = detail::linearize(b);
  return fa.constant == fb.constant && fa.terms == fb.terms;
}

/// True when `a` and `b` are provably different (both constant and unequal, or differing by a
/// non-zero constant).
inline bool prove_not_equal(const prim_expr& a, const prim_expr& b) {
  auto ca = as_int(a), cb = as_int(b);
  if (ca && cb) return *ca != *cb;
  detail::linear_form fa = detail::linearize(a), fb = detail::linearize(b);
  return fa.terms == fb.terms && fa.constant != fb.constant;
}

/// Collects the size variables that occur in `e`, in first-occurrence order, without duplicates.
inline void collect_size_vars(const prim_expr& e, std::vector<size_var>& out) {
  if (auto* v = dyn_cast<size_var_node>(e)) {
    for (auto& o : out)
      if (o.get() == v) return;
    out.emplace_back(v);
  } else if (auto* b = dyn_cast<prim_binary_node>(e)) {
    collect_size_vars(b->a, out);
    collect_size_vars(b->b, out);
  }
}

/// Replaces size variables using `lookup` (returns null to keep a variable), re-simplifying.
template <class Lookup>
prim_expr substitute(const prim_expr& e, Lookup&& lookup) {
  if (auto* v = dyn_cast<size_var_node>(e)) {
    prim_expr r = lookup(*v);
    return r ? r : e;
  }
  if (auto* b = dyn_cast<prim_binary_node>(e)) {
    prim_expr a = substitute(b->a, lookup), c = substitute(b->b, lookup);
    if (a == b->a && c == b->b) return e;
    return make_binary(b->op, a, c);
  }
  return e;
}

/// The largest value `e` can take when each size variable `v` lies in [0, bound_of(v)]
/// (`bound_of` returns nothing for an unbounded variable), by interval arithmetic; nothing when
/// a variable is unbounded, a division or modulo is by a non-constant, or a bound overflows.
template <class BoundOf>
std::optional<std::int64_t> upper_bound(const prim_expr& e, BoundOf&& bound_of) {
  struct interval {
    std::int64_t lo, hi;
  };
  auto eval = [&](auto& self, const prim_expr& x) -> std::optional<interval> {
    if (auto c = as_int(x)) return interval{*c, *c};
    if (auto* v = dyn_cast<size_var_node>(x)) {
      std::optional<std::int64_t> b = bound_of(*v);
      if (!b || *b < 0) return std::nullopt;
      return interval{0, *b};
    }
    auto* bin = dyn_cast<prim_binary_node>(x);
    if (!bin) return std::nullopt;
    auto a = self(self, bin->a), b = self(self, bin->b);
    if (!a || !b) return std::nullopt;
    std::int64_t r[4];
    bool overflow = false;
    switch (bin->op) {
      case prim_op::add:
        overflow = __builtin_add_overflow(a->lo, b->lo, &r[0]) || __builtin_add_overflow(a->hi, b->hi, &r[1]);
        return overflow ? std::nullopt : std::optional<interval>(interval{r[0], r[1]});
      case prim_op::sub:
        overflow = __builtin_sub_overflow(a->lo, b->hi, &r[0]) || __builtin_sub_overflow(a->hi, b->lo, &r[1]);
        return overflow ? std::nullopt : std::optional<interval>(interval{r[0], r[1]});
      case prim_op::mul:
        overflow = __builtin_mul_overflow(a->lo, b->lo, &r[0]) || __builtin_mul_overflow(a->lo, b->hi, &r[1]) ||
                   __builtin_mul_overflow(a->hi, b->lo, &r[2]) || __builtin_mul_overflow(a->hi, b->hi, &r[3]);
        if (overflow) return std::nullopt;
        return interval{std::min({r[0], r[1], r[2], r[3]}), std::max({r[0], r[1], r[2], r[3]})};
      case prim_op::floordiv: {
        if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
        auto fdiv = [d = b->lo](std::int64_t n) { return n / d - ((n % d != 0) && (n < 0)); };
        return interval{fdiv(a->lo), fdiv(a->hi)};
      }
      case prim_op::floormod:
        if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
        return interval{0, b->lo - 1};
      case prim_op::min: return interval{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
      case prim_op::max: return interval{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    }
    return std::nullopt;
  };
  auto r = eval(eval, e);
  if (!r) return std::nullopt;
  return r->hi;
}

}  // namespace kiln::ir
