// SPDX-License-Identifier: Apache-2.0
// The IR text parser (<kiln/ir/parser.hpp>): expressions: variables, operator calls, `R.*` forms and constants. Included by that
// header.
#pragma once

#include <kiln/ir/parser.hpp>

namespace kiln::ir::detail {

inline var ir_parser::lookup_local(const std::string& name) const {
  auto it = scopes_.back().find(name);
  return it == scopes_.back().end() ? var() : it->second;
}

inline expr ir_parser::lookup(const token& t) const {
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
    auto it = s->find(t.text);
    if (it != s->end()) return it->second;
  }
  if (expired_.count(t.text))
    fail_at(t, "'" + t.text +
                   "' is a dataflow variable of an earlier dataflow block and is not visible here (list it in R.output to use it "
                   "after the block)");
  std::vector<std::string> visible;
  for (auto& s : scopes_)
    for (auto& [k, v] : s) visible.push_back(k);
  fail_at(t, "undefined variable '" + t.text + "'" + did_you_mean(t.text, visible));
}

inline expr ir_parser::parse_expr() {
  const nesting guard(*this);
  expr e = parse_primary();
  for (;;) {
    if (at("[")) {
      const token& b = next();
      std::int64_t i = parse_int();
      expect("]");
      e = guarded(b, [&] { return make_tuple_get_item(e, static_cast<int>(i)); });
    } else if (at("(")) {
      const token& p = cur();
      std::vector<expr> args = parse_args_only();
      e = guarded(p, [&] {
        type t = infer_call_result(e->checked_type, args, "call");
        return make_call(e, args, {}, {}, t);
      });
    } else {
      return e;
    }
  }
}

inline std::vector<expr> ir_parser::parse_args_only() {
  expect("(");
  return comma_list<expr>(")", [&] { return parse_expr(); });
}

inline expr ir_parser::parse_primary() {
  const token& t = cur();
  if (at("(")) {
    next();
    std::vector<expr> fields;
    bool comma = false;
    while (!at(")")) {
      fields.push_back(parse_expr());
      if (!accept(",")) break;
      comma = true;
    }
    expect(")");
    if (fields.size() == 1 && !comma) return fields[0];
    return make_tuple(std::move(fields));
  }
  if (!at_kind(tok::ident)) expected("an expression");
  if (t.text == "cls" && peek().text == ".") {
    next();
    next();
    const token& n = expect_ident("a function name");
    auto it = globals_.find(n.text);
    if (it == globals_.end()) {
      std::vector<std::string> names;
      for (auto& [k, v] : globals_) names.push_back(k);
      fail_at(n, "the module has no function named '" + n.text + "'" + did_you_mean(n.text, names));
    }
    if (!at("(")) return it->second;
    std::vector<expr> args = parse_args_only();
    return guarded(t, [&] { return call_function(it->second, args); });
  }
  if (t.text == "R" && peek().text == ".") return parse_r_call();
  next();
  return lookup(t);
}

inline expr ir_parser::parse_r_call() {
  const token& start = next();  // R
  next();                       // .
  const token& first = expect_ident("an operator or R.<form> name");
  std::string name = first.text;
  while (at(".")) {
    next();
    name += "." + expect_ident("the rest of the operator name").text;
  }
  if (name == "const") return parse_const(start);
  if (name == "shape") {
    expect("(");
    expect("[");
    auto dims = parse_dim_list("]");
    expect(")");
    return make_shape_expr(std::move(dims));
  }
  if (name == "prim_value") return parse_prim_value(start);
  if (name == "str") {
    expect("(");
    std::string s = parse_string("a string");
    expect(")");
    return make_string_imm(std::move(s));
  }
  if (name == "ExternFunc") {
    expect("(");
    std::string s = parse_string("a symbol name string");
    expect(")");
    return make_extern_func(std::move(s));
  }
  if (name == "match_cast")
    fail_at(first, "R.match_cast can only be the whole value of a binding (name = R.match_cast(value, type))");
  if (name == "call_packed") {
    expect("(");
    std::string sym = parse_string("the symbol name of the external function");
    std::vector<expr> args;
    std::vector<type> sinfo;
    while (accept(",")) {
      if (at(")")) break;
      if (at_word("sinfo_args") && peek().text == "=") {
        next();
        next();
        sinfo = parse_type_list();
        continue;
      }
      args.push_back(parse_expr());
    }
    expect(")");
    if (sinfo.size() != 1) fail_at(start, "R.call_packed needs its result type as sinfo_args=<type>");
    return call_extern(std::move(sym), std::move(args), sinfo[0]);
  }
  op o = op_registry::global().find(name);
  if (!o) fail_at(first, "unknown operator R." + name + did_you_mean(name, op_registry::global().names()));
  expect("(");
  std::vector<expr> args;
  attr_map attrs;
  std::vector<type> type_args;
  while (!at(")")) {
    if (at_kind(tok::ident) && peek().text == "=") {
      const token& k = next();
      next();
      if (k.text == "out_sinfo" || k.text == "type_args") type_args = parse_type_list();
      else {
        if (attrs.contains(k.text)) fail_at(k, "attribute '" + k.text + "' is given twice");
        attrs.set(k.text, parse_attr_value());
      }
    } else {
      if (!attrs.empty()) fail("positional arguments must come before attributes");
      args.push_back(parse_expr());
    }
    if (!accept(",")) break;
  }
  expect(")");
  return guarded(start, [&] { return call_op(o, args, attrs, type_args); });
}

inline expr ir_parser::parse_prim_value(const token& start) {
  expect("(");
  bool neg = false;
  if (at("-") && (peek().kind == tok::floating || peek().text == "inf" || peek().text == "nan")) neg = true, next();
  if (at_kind(tok::floating) || at_word("inf") || at_word("nan")) {
    std::string text = next().text;
    expect(",");
    dtype d = parse_dtype_string();
    expect(")");
    return guarded(start, [&] { return make_float_prim_value(to_double(text, neg), d); });
  }
  prim_expr v;
  if (at_word("True") || at_word("False")) v = make_int(next().text == "True" ? 1 : 0);
  else v = parse_dim();
  dtype d = dtype::int64;
  if (accept(",")) d = parse_dtype_string();
  expect(")");
  return guarded(start, [&] { return make_prim_value(v, d); });
}

inline const_literal ir_parser::parse_const_literal(const char* what) {
  const_literal lit;
  lit.where = &cur();
  const bool neg = accept("-");
  if (at_word("True") || at_word("False")) lit.is_bool = true, lit.text = next().text;
  else if (at_kind(tok::integer)) lit.text = next().text;
  else if (at_kind(tok::floating) || at_word("inf") || at_word("nan")) lit.is_float = true, lit.text = next().text;
  else expected(what);
  if (neg) lit.text = "-" + lit.text;
  return lit;
}

inline void ir_parser::parse_const_list(std::vector<const_literal>& flat, std::vector<std::int64_t>& shape, std::size_t depth,
                                        std::vector<bool>& seen) {
  const token& open = cur();
  expect("[");
  std::int64_t count = 0;
  while (!at("]")) {
    if (at("[")) {
      parse_const_list(flat, shape, depth + 1, seen);
    } else {
      if (depth + 1 < seen.size() && seen[depth + 1]) fail("expected a nested list here, like its siblings");
      const_literal lit = parse_const_literal("a number");
      if (shape.size() > depth + 1) fail_at(*lit.where, "expected a nested list here, like its siblings");
      flat.push_back(std::move(lit));
    }
    ++count;
    if (!accept(",")) break;
  }
  expect("]");
  if (seen.size() <= depth) seen.resize(depth + 1, false), shape.resize(depth + 1, -1);
  if (seen[depth] && shape[depth] != count)
    fail_at(open, "ragged constant: this list has " + std::to_string(count) + " elements, but its siblings have " +
                      std::to_string(shape[depth]));
  seen[depth] = true;
  shape[depth] = count;
}

inline expr ir_parser::parse_elided_const(const token& start) {
  const token& meta = cur();
  expect_word("meta");
  expect("[");
  const std::int64_t index = parse_int();
  expect("]");
  expect(",");
  const dtype d = parse_dtype_string();
  expect(",");
  expect_word("shape");
  expect("=");
  expect("(");
  std::vector<std::int64_t> shape = comma_list<std::int64_t>(")", [&] { return parse_int(); });
  expect(")");
  const std::string described = std::string(name(d)) + " of shape (" + tuple_contents(shape) + ")";
  if (opt_.constants.empty())
    fail_at(meta, "constants elided: meta[" + std::to_string(index) + "] stands for a " + described +
                      " constant the printer left out, and the text alone cannot give it back; print the module with "
                      "every constant (kiln-opt's output, --print-full-constants, Python's mod.script(show_meta=True)) "
                      "or pass the elided constants (parse_options::constants)");
  if (index < 0 || static_cast<std::size_t>(index) >= opt_.constants.size())
    fail_at(meta, "meta[" + std::to_string(index) + "] is not among the " + std::to_string(opt_.constants.size()) +
                      " elided constants given");
  const ndarray& a = opt_.constants[static_cast<std::size_t>(index)];
  if (a.dt() != d || a.shape() != shape)
    fail_at(meta, "meta[" + std::to_string(index) + "] is printed as a " + described + " constant, but the one given is " +
                      std::string(name(a.dt())) + " of another shape");
  return guarded(start, [&] { return make_constant(a); });
}

inline expr ir_parser::parse_const(const token& start) {
  expect("(");
  if (at_word("meta")) return parse_elided_const(start);
  std::vector<const_literal> flat;
  std::vector<std::int64_t> shape;
  bool scalar = false;
  if (at("[")) {
    std::vector<bool> seen;
    parse_const_list(flat, shape, 0, seen);
  } else {
    scalar = true;
    flat.push_back(parse_const_literal("a number or a (nested) list of numbers"));
  }
  expect(",");
  dtype d = parse_dtype_string();
  if (!is_known(d)) fail_at(start, "a constant needs a concrete dtype, not void");
  if (accept(",")) {
    expect_word("shape");
    expect("=");
    expect("(");
    shape = comma_list<std::int64_t>(")", [&] { return parse_int(); });
    std::size_t n = 1;
    for (auto s : shape) {
      if (s < 0) fail_at(start, "constant shape dimensions must not be negative");
      n *= static_cast<std::size_t>(s);
    }
    if (n != flat.size())
      fail_at(start, "the constant has " + std::to_string(flat.size()) + " values but shape=(...) needs " + std::to_string(n));
  } else if (scalar) {
    shape.clear();
  }
  expect(")");
  std::vector<std::byte> bytes(flat.size() * size_of(d));
  for (std::size_t i = 0; i < flat.size(); ++i) store_literal(flat[i], d, bytes.data() + i * size_of(d));
  return guarded(start, [&] { return make_constant(ndarray(d, shape, std::move(bytes))); });
}

inline void ir_parser::store_literal(const const_literal& lit, dtype d, std::byte* p) {
  if (d == dtype::bool_) {
    if (!lit.is_bool) fail_at(*lit.where, "a bool constant takes True or False, not " + lit.text);
    *p = std::byte(lit.text == "True" ? 1 : 0);
    return;
  }
  if (lit.is_bool) fail_at(*lit.where, "True/False in a constant of dtype " + std::string(name(d)));
  if (is_int(d)) {
    if (lit.is_float) fail_at(*lit.where, "an integer constant of dtype " + std::string(name(d)) + " cannot hold " + lit.text);
    std::int64_t v = 0;
    auto r = std::from_chars(lit.text.data(), lit.text.data() + lit.text.size(), v);
    if (r.ec != std::errc()) fail_at(*lit.where, "integer " + lit.text + " is out of range");
    std::int64_t lo = d == dtype::int8 ? -128 : d == dtype::uint8 ? 0 : d == dtype::int32 ? INT32_MIN : INT64_MIN;
    std::int64_t hi = d == dtype::int8 ? 127 : d == dtype::uint8 ? 255 : d == dtype::int32 ? INT32_MAX : INT64_MAX;
    if (v < lo || v > hi) fail_at(*lit.where, lit.text + " does not fit in " + std::string(name(d)));
    if (d == dtype::int64) std::memcpy(p, &v, 8);
    else ndarray::store(d, p, static_cast<double>(v));
    return;
  }
  const bool neg = !lit.text.empty() && lit.text[0] == '-';
  const std::string body = neg ? lit.text.substr(1) : lit.text;
  if (d == dtype::float64) {
    double v = to_double(body, neg);
    std::memcpy(p, &v, 8);
    return;
  }
  float f;
  if (body == "inf" || body == "nan") f = static_cast<float>(to_double(body, neg));
  else {
    std::from_chars(lit.text.data(), lit.text.data() + lit.text.size(), f);
  }
  ndarray::store(d, p, static_cast<double>(f));
}

}  // namespace kiln::ir::detail
