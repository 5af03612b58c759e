// SPDX-License-Identifier: Apache-2.0
// The IR text parser (<kiln/ir/parser.hpp>): tokens, literals, symbolic dimensions and types. Included by that header.
#pragma once

#include <kiln/ir/parser.hpp>

namespace kiln::ir::detail {

inline const token& ir_parser::next() {
  const token& t = toks_[pos_];
  if (pos_ + 1 < toks_.size()) ++pos_;
  return t;
}

inline std::string ir_parser::describe(const token& t) {
  switch (t.kind) {
    case tok::newline: return "the end of the line";
    case tok::indent: return "an indented block";
    case tok::dedent: return "the end of the block";
    case tok::eof: return "the end of the text";
    case tok::string: return quote(t.text);
    default: return "'" + t.text + "'";
  }
}

inline void ir_parser::expect(std::string_view p) {
  if (!at(p)) expected("'" + std::string(p) + "'");
  next();
}

inline void ir_parser::expect_word(std::string_view w) {
  if (!at_word(w)) expected("'" + std::string(w) + "'");
  next();
}

inline const token& ir_parser::expect_ident(const std::string& what) {
  if (!at_kind(tok::ident)) expected(what);
  return next();
}

inline void ir_parser::expect_kind(tok k, const std::string& what) {
  if (!at_kind(k)) expected(what);
  next();
}

inline void ir_parser::expect_newline() {
  if (!at_kind(tok::newline)) expected("the end of the line");
  next();
}

inline void ir_parser::skip_newlines() {
  while (at_kind(tok::newline)) next();
}

inline bool ir_parser::accept(std::string_view p) {
  if (!at(p)) return false;
  next();
  return true;
}

template <class T, class Item>
inline std::vector<T> ir_parser::comma_list(std::string_view close, Item&& item) {
  std::vector<T> out;
  while (!at(close)) {
    out.push_back(item());
    if (!accept(",")) break;
  }
  expect(close);
  return out;
}

inline void ir_parser::skip_block() {
  expect_kind(tok::indent, "an indented block");
  int depth = 1;
  while (depth > 0) {
    if (at_kind(tok::eof)) fail("unexpected end of text inside a block");
    if (at_kind(tok::indent)) ++depth;
    if (at_kind(tok::dedent)) --depth;
    next();
  }
}

inline std::int64_t ir_parser::parse_int() {
  bool neg = accept("-");
  if (!at_kind(tok::integer)) expected("an integer");
  const token& t = next();
  std::int64_t v = 0;
  auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size()) fail_at(t, "integer literal " + t.text + " is out of range");
  return neg ? -v : v;
}

inline std::string ir_parser::parse_string(const std::string& what) {
  if (!at_kind(tok::string)) expected(what);
  return next().text;
}

inline dtype ir_parser::parse_dtype_string() {
  const token& t = cur();
  std::string s = parse_string("a dtype string such as \"float32\"");
  auto d = parse_dtype(s);
  if (!d) fail_at(t, "unknown dtype \"" + s + "\" (known: bool, int8, int32, int64, uint8, float16, float32, float64, void)");
  return *d;
}

inline double ir_parser::to_double(const std::string& text, bool neg) {
  if (text == "inf") return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  double v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return neg ? -v : v;
}

inline attr_value ir_parser::parse_attr_value() {
  const nesting guard(*this);
  if (at("{")) {
    next();
    int_dict d;
    while (!at("}")) {
      const token& t = cur();
      std::string key = parse_string("a string key");
      if (d.count(key)) fail_at(t, "key \"" + key + "\" is given twice");
      expect(":");
      d[std::move(key)] = parse_int();
      if (!accept(",")) break;
    }
    expect("}");
    return attr_value(std::move(d));
  }
  if (at_word("None")) return next(), attr_value();
  if (at_word("True")) return next(), attr_value(true);
  if (at_word("False")) return next(), attr_value(false);
  if (at_kind(tok::string)) return attr_value(next().text);
  if (at("[") || at("(")) {
    const std::string close = at("[") ? "]" : ")";
    next();
    // a list of integers, or of floats as soon as one element is written as a float
    int_array ints;
    float_array floats;
    comma_list<bool>(close, [&] {
      const bool neg = accept("-");
      if (at_kind(tok::integer)) {
        if (neg) --pos_;  // let parse_int read the sign
        ints.push_back(parse_int());
        floats.push_back(static_cast<double>(ints.back()));
        return true;
      }
      if (!at_kind(tok::floating) && !at_word("inf") && !at_word("nan")) expected("a number");
      floats.push_back(to_double(next().text, neg));
      return false;
    });
    if (floats.size() != ints.size()) return attr_value(std::move(floats));
    return attr_value(std::move(ints));
  }
  const bool neg = accept("-");
  if (at_kind(tok::integer)) {
    if (neg) --pos_;  // let parse_int read the sign
    return attr_value(parse_int());
  }
  if (at_kind(tok::floating) || at_word("inf") || at_word("nan")) return attr_value(to_double(next().text, neg));
  expected("an attribute value (None, True, False, a number, a string, a list of numbers or a dict of integers)");
}

inline attr_map ir_parser::parse_dict() {
  attr_map m;
  expect("{");
  while (!at("}")) {
    const token& t = cur();
    std::string key = parse_string("an attribute name string");
    if (m.contains(key)) fail_at(t, "attribute \"" + key + "\" is given twice");
    expect(":");
    m.set(std::move(key), parse_attr_value());
    if (!accept(",")) break;
  }
  expect("}");
  return m;
}

inline prim_expr ir_parser::parse_dim() {
  prim_expr e = parse_dim_term();
  while (at("+") || at("-")) {
    const token& t = next();
    prim_expr r = parse_dim_term();
    e = binary_at(t, t.text == "+" ? prim_op::add : prim_op::sub, e, r);
  }
  return e;
}

inline prim_expr ir_parser::binary_at(const token& where, prim_op op, const prim_expr& a, const prim_expr& b) {
  return guarded(where, [&] { return make_binary(op, a, b); });
}

inline prim_expr ir_parser::parse_dim_term() {
  prim_expr e = parse_dim_factor();
  while (at("*") || at("//") || at("%")) {
    const token& t = next();
    prim_op op = t.text == "*" ? prim_op::mul : t.text == "//" ? prim_op::floordiv : prim_op::floormod;
    prim_expr r = parse_dim_factor();
    e = binary_at(t, op, e, r);
  }
  return e;
}

inline prim_expr ir_parser::parse_dim_factor() {
  const nesting guard(*this);
  if (at("-")) {
    next();
    if (at_kind(tok::integer)) {
      --pos_;
      return make_int(parse_int());
    }
    return make_int(0) - parse_dim_factor();
  }
  if (at_kind(tok::integer)) return make_int(parse_int());
  if (accept("(")) {
    prim_expr e = parse_dim();
    expect(")");
    return e;
  }
  if (at_word("T") && peek().text == ".") {
    next();
    next();
    const token& f = expect_ident("T.min or T.max");
    if (f.text != "min" && f.text != "max") fail_at(f, "expected T.min or T.max but found T." + f.text);
    expect("(");
    prim_expr a = parse_dim();
    expect(",");
    prim_expr b = parse_dim();
    expect(")");
    return binary_at(f, f.text == "min" ? prim_op::min : prim_op::max, a, b);
  }
  if (!at_kind(tok::ident)) expected("a dimension (an integer or a symbolic variable)");
  const token& t = next();
  auto it = size_vars_.find(t.text);
  if (it != size_vars_.end()) return it->second;
  if (!define_size_vars_)
    fail_at(t, "undefined symbolic variable '" + t.text +
                   "' (symbolic dimensions are introduced by parameter types and R.match_cast)" +
                   did_you_mean(t.text, size_var_names()));
  size_var v = make_size_var(t.text);
  size_vars_.emplace(t.text, v);
  return v;
}

inline std::vector<std::string> ir_parser::size_var_names() const {
  std::vector<std::string> r;
  for (auto& [k, v] : size_vars_) r.push_back(k);
  return r;
}

inline std::vector<prim_expr> ir_parser::parse_dim_list(std::string_view close) {
  return comma_list<prim_expr>(close, [&] { return parse_dim(); });
}

inline type ir_parser::parse_type() {
  const nesting guard(*this);
  if (!at_word("R") || peek().text != ".") expected("a type (R.Tensor, R.Shape, R.Tuple, R.Prim, R.Object or R.Callable)");
  next();
  next();
  const token& t = expect_ident("a type name");
  if (t.text == "Object") return object_type();
  if (t.text == "Prim") {
    expect("(");
    dtype d = parse_dtype_string();
    expect(")");
    return prim_type(d);
  }
  if (t.text == "Tuple") {
    expect("(");
    return tuple_type(comma_list<type>(")", [&] { return parse_type(); }));
  }
  if (t.text == "Callable") {
    expect("(");
    expect("(");
    std::vector<type> params = comma_list<type>(")", [&] { return parse_type(); });
    expect(",");
    type ret = parse_type();
    expect(")");
    return func_type(std::move(params), std::move(ret));
  }
  if (t.text == "Shape") {
    if (!accept("(")) return shape_type_of_rank(-1);
    if (at_word("ndim")) {
      next();
      expect("=");
      int n = static_cast<int>(parse_int());
      expect(")");
      return shape_type_of_rank(n);
    }
    expect("[");
    auto dims = parse_dim_list("]");
    expect(")");
    return shape_type(std::move(dims));
  }
  if (t.text == "Tensor") {
    if (!accept("(")) return tensor_type_of_rank(dtype::void_, -1);
    std::optional<std::vector<prim_expr>> shape;
    dtype d = dtype::void_;
    int ndim = -1;
    if (accept("(")) {
      shape = parse_dim_list(")");
      accept(",");
    }
    if (at_kind(tok::string)) {
      d = parse_dtype_string();
      accept(",");
    }
    if (at_word("ndim")) {
      next();
      expect("=");
      const token& nt = cur();
      ndim = static_cast<int>(parse_int());
      if (ndim < -1) fail_at(nt, "ndim must be -1 (unknown) or more");
      if (shape && static_cast<int>(shape->size()) != ndim) fail_at(nt, "ndim does not match the shape's rank");
      accept(",");
    }
    expect(")");
    if (shape) return tensor_type(std::move(*shape), d);
    return tensor_type_of_rank(d, ndim);
  }
  fail_at(t, "unknown type R." + t.text + " (expected R.Tensor, R.Shape, R.Tuple, R.Prim, R.Object or R.Callable)");
}

inline std::vector<type> ir_parser::parse_type_list() {
  std::vector<type> ts;
  if (accept("[")) {
    ts = comma_list<type>("]", [&] { return parse_type(); });
  } else {
    ts.push_back(parse_type());
  }
  return ts;
}

}  // namespace kiln::ir::detail
