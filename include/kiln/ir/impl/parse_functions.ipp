// SPDX-License-Identifier: Apache-2.0
// The IR text parser (<kiln/ir/parser.hpp>): the module, function signatures and bodies, bindings, `if` and dataflow blocks.
// Included by that header.
#pragma once

#include <kiln/ir/parser.hpp>

namespace kiln::ir::detail {

inline ir_module ir_parser::parse() {
  skip_newlines();
  expect("@");
  expect_word("I");
  expect(".");
  expect_word("ir_module");
  expect_newline();
  expect_word("class");
  expect_ident("the module's class name");
  expect(":");
  expect_newline();
  expect_kind(tok::indent, "an indented class body");
  // Pass 1: the signature of every function, so that calls may refer forward.
  attr_map module_attrs;
  std::vector<std::size_t> starts;
  while (!at_kind(tok::dedent) && !at_kind(tok::eof)) {
    if (at_word("I")) {
      const token& t = cur();
      expect_word("I");
      expect(".");
      expect_word("module_attrs");
      if (!module_attrs.empty()) fail_at(t, "module attributes are given twice");
      expect("(");
      module_attrs = parse_dict();
      expect(")");
      expect_newline();
    } else if (at_word("pass")) {
      next();
      expect_newline();
    } else {
      starts.push_back(pos_);
      declare_function();
    }
  }
  expect_kind(tok::dedent, "the end of the class body");
  skip_newlines();
  if (!at_kind(tok::eof)) fail("expected the end of the text after the module");
  // Pass 2: the bodies.
  std::vector<ir_module_node::entry> entries;
  for (std::size_t s : starts) {
    pos_ = s;
    entries.push_back(define_function());
  }
  return make_module(std::move(entries), std::move(module_attrs));
}

inline ir_parser::header ir_parser::parse_header() {
  header h;
  expect("@");
  const token& ns = expect_ident("R.function or T.prim_func");
  expect(".");
  const token& kind = expect_ident("R.function or T.prim_func");
  if (ns.text == "R" && kind.text == "function") {
    h.prim = false;
  } else if (ns.text == "T" && kind.text == "prim_func") {
    h.prim = true;
    if (accept("(")) {
      expect_word("num_outputs");
      expect("=");
      h.num_outputs = static_cast<int>(parse_int());
      expect(")");
    }
  } else {
    fail_at(ns, "expected @R.function or @T.prim_func but found @" + ns.text + "." + kind.text);
  }
  expect_newline();
  expect_word("def");
  h.name = &expect_ident("a function name");
  expect("(");
  size_vars_.clear();
  define_size_vars_ = true;
  while (!at(")")) {
    const token& p = expect_ident("a parameter name");
    expect(":");
    h.params.emplace_back(&p, parse_type());
    if (!accept(",")) break;
  }
  expect(")");
  define_size_vars_ = false;
  if (accept("->")) h.ret = parse_type();
  expect(":");
  expect_newline();
  return h;
}

inline void ir_parser::declare_function() {
  const token& start = cur();
  header h = parse_header();
  if (globals_.count(h.name->text)) fail_at(*h.name, "function '" + h.name->text + "' is defined twice");
  std::vector<type> params;
  for (auto& [t, ty] : h.params) params.push_back(ty);
  type sig;
  if (h.prim) {
    if (h.num_outputs < 1 || static_cast<std::size_t>(h.num_outputs) > params.size())
      fail_at(start, "prim_func '" + h.name->text + "' has " + std::to_string(params.size()) + " parameters, so it cannot have " +
                         std::to_string(h.num_outputs) + " outputs");
    std::vector<type> in(params.begin(), params.end() - h.num_outputs);
    std::vector<type> outs(params.end() - h.num_outputs, params.end());
    sig = func_type(std::move(in), outs.size() == 1 ? outs[0] : tuple_type(outs));
  } else {
    if (!h.ret) fail_at(*h.name, "function '" + h.name->text + "' needs a return type annotation (-> R.Tensor(...))");
    sig = func_type(std::move(params), h.ret);
  }
  globals_.emplace(h.name->text, make_global_var(h.name->text, sig));
  signatures_.emplace(h.name->text, declared{size_vars_, h.params, h.ret});
  skip_block();
}

inline ir_module_node::entry ir_parser::define_function() {
  header h = parse_header();
  const declared& d = signatures_.at(h.name->text);
  size_vars_ = d.size_vars;
  h.params = d.params;
  h.ret = d.ret;
  scopes_.assign(1, {});
  expired_.clear();
  std::vector<var> params;
  for (auto& [t, ty] : h.params) {
    if (scopes_.back().count(t->text)) fail_at(*t, "parameter '" + t->text + "' is declared twice");
    var v = make_var(t->text, ty);
    scopes_.back().emplace(t->text, v);
    params.push_back(v);
  }
  expect_kind(tok::indent, "the indented function body");
  attr_map attrs;
  if ((at_word("R") || at_word("T")) && peek().text == "." && peek(2).text == "func_attr") {
    next();
    next();
    next();
    expect("(");
    attrs = parse_dict();
    expect(")");
    expect_newline();
  }
  global_var gv = globals_.at(h.name->text);
  if (h.prim && at_word("pass")) {
    next();
    expect_newline();
    expect_kind(tok::dedent, "the end of the function");
    return {gv, guarded(*h.name, [&] { return base_func(make_prim_func(params, h.num_outputs, {}, attrs)); })};
  }
  expr body = parse_body(/*in_branch=*/false, nullptr);
  if (h.prim) return {gv, guarded(*h.name, [&] { return base_func(make_prim_func(params, h.num_outputs, body, attrs)); })};
  return {gv, guarded(*h.name, [&] { return base_func(make_function(params, body, h.ret, attrs)); })};
}

template <class F>
inline auto ir_parser::guarded(const token& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const parse_error&) {
    throw;
  } catch (const error& e) {
    fail_at(where, e.what());
  }
}

inline expr ir_parser::parse_body(bool in_branch, std::string* result_name, type* result_annot) {
  const nesting guard(*this);
  std::vector<binding_block> blocks{{false, {}}};
  expr result;
  while (!at_kind(tok::dedent)) {
    if (result)
      fail(in_branch ? "the binding of the if's result must be the last statement of a branch"
                     : "'return' must be the last statement of a function");
    if (at_word("return")) {
      if (in_branch) fail("'return' is not allowed inside an if branch; bind the branch's result instead");
      next();
      result = parse_expr();
      expect_newline();
      continue;
    }
    if (at_word("with")) {
      parse_dataflow(blocks);
      continue;
    }
    if (at_word("if")) {
      parse_if(blocks.back());
      continue;
    }
    if (in_branch && is_last_statement()) {
      const token& n = expect_ident("the name of the if's result");
      *result_name = n.text;
      if (accept(":")) *result_annot = parse_type();
      expect("=");
      result = parse_expr();
      expect_newline();
      continue;
    }
    parse_binding(blocks.back(), /*dataflow=*/false, {});
  }
  expect_kind(tok::dedent, "the end of the block");
  if (!result) {
    fail(in_branch ? "an if branch must end by binding the if's result (name = value)"
                   : "the function body must end with 'return'");
  }
  return make_seq(std::move(blocks), std::move(result));
}

inline bool ir_parser::is_last_statement() const {
  std::size_t p = pos_;
  int depth = 0;
  for (; p < toks_.size(); ++p) {
    if (toks_[p].kind == tok::indent) ++depth;
    if (toks_[p].kind == tok::dedent) {
      if (depth == 0) return false;
      --depth;
    }
    if (toks_[p].kind == tok::newline && depth == 0) break;
  }
  return p + 1 < toks_.size() && toks_[p + 1].kind == tok::dedent;
}

inline void ir_parser::parse_dataflow(std::vector<binding_block>& blocks) {
  next();  // with
  expect_word("R");
  expect(".");
  expect_word("dataflow");
  expect("(");
  expect(")");
  expect(":");
  expect_newline();
  if (!at_kind(tok::indent)) expected("an indented dataflow block");
  // find the R.output(...) names first: they decide which bindings create non-dataflow variables
  std::unordered_set<std::string> outputs = scan_outputs();
  next();  // indent
  blocks.push_back({true, {}});
  scopes_.emplace_back();
  bool saw_output = false;
  while (!at_kind(tok::dedent)) {
    if (saw_output) fail("R.output must be the last statement of a dataflow block");
    if (at_word("R") && peek().text == "." && peek(2).text == "output") {
      next();
      next();
      next();
      expect("(");
      while (!at(")")) {
        const token& n = expect_ident("a variable name");
        if (!lookup_local(n.text)) fail_at(n, "R.output names '" + n.text + "', which is not bound in this dataflow block");
        if (!accept(",")) break;
      }
      expect(")");
      expect_newline();
      saw_output = true;
      continue;
    }
    if (at_word("if")) fail("an if is not allowed inside a dataflow block (dataflow blocks hold pure, straight-line code)");
    if (at_word("return")) fail("'return' is not allowed inside a dataflow block");
    if (at_word("with")) fail("dataflow blocks cannot nest");
    parse_binding(blocks.back(), /*dataflow=*/true, outputs);
  }
  next();  // dedent
  // dataflow variables go out of scope; outputs stay visible
  auto inner = std::move(scopes_.back());
  scopes_.pop_back();
  for (auto& [name, v] : inner) {
    if (v->is_dataflow()) expired_.insert(name);
    else scopes_.back()[name] = v, expired_.erase(name);
  }
  blocks.push_back({false, {}});
}

inline std::unordered_set<std::string> ir_parser::scan_outputs() const {
  std::unordered_set<std::string> names;
  int depth = 0;
  for (std::size_t p = pos_; p < toks_.size(); ++p) {
    if (toks_[p].kind == tok::indent) ++depth;
    if (toks_[p].kind == tok::dedent && --depth == 0) break;
    if (depth == 1 && toks_[p].text == "R" && toks_[p].kind == tok::ident && p + 3 < toks_.size() && toks_[p + 1].text == "." &&
        toks_[p + 2].text == "output" && toks_[p + 3].text == "(") {
      for (std::size_t q = p + 4; q < toks_.size() && toks_[q].text != ")"; ++q)
        if (toks_[q].kind == tok::ident) names.insert(toks_[q].text);
    }
  }
  return names;
}

inline void ir_parser::parse_if(binding_block& block) {
  const token& kw = next();
  expr cond = parse_expr();
  expect(":");
  expect_newline();
  if (!at_kind(tok::indent)) expected("an indented if branch");
  next();
  std::string then_name, else_name;
  type then_annot, else_annot;
  scopes_.emplace_back();
  expr then_branch = parse_body(true, &then_name, &then_annot);
  scopes_.pop_back();
  const token& e = cur();
  expect_word("else");
  expect(":");
  expect_newline();
  if (!at_kind(tok::indent)) expected("an indented else branch");
  next();
  scopes_.emplace_back();
  expr else_branch = parse_body(true, &else_name, &else_annot);
  scopes_.pop_back();
  if (then_name != else_name)
    fail_at(e,
            "both branches of an if must bind the same variable last, but they bind '" + then_name + "' and '" + else_name + "'");
  expr value = guarded(kw, [&] { return make_if(cond, then_branch, else_branch); });
  type t = then_annot ? then_annot : else_annot ? else_annot : value->checked_type;
  if (then_annot && else_annot && !types_equal(then_annot, else_annot))
    fail_at(e, "the branches annotate '" + then_name + "' with different types, " + to_string(then_annot) + " and " +
                   to_string(else_annot));
  if (!is_base_of(t, value->checked_type))
    fail_at(kw, "'" + then_name + "' is annotated " + to_string(t) + ", but the if produces " + to_string(value->checked_type));
  var v = make_var(then_name, t);
  block.bindings.push_back({v, value, {}});
  scopes_.back()[then_name] = v;
  expired_.erase(then_name);
}

inline void ir_parser::parse_binding(binding_block& block, bool dataflow, const std::unordered_set<std::string>& outputs) {
  const token& n = expect_ident("a statement (a binding 'name = value', if, with or return)");
  type annot;
  if (accept(":")) annot = parse_type();
  if (!at("=")) expected("'=' after the name being bound");
  const token& eq = next();
  const bool is_cast = at_word("R") && peek().text == "." && peek(2).text == "match_cast";
  expr value;
  type cast;
  const token& vstart = cur();
  if (is_cast) {
    next();
    next();
    next();
    expect("(");
    value = parse_expr();
    expect(",");
    define_size_vars_ = true;
    cast = parse_type();
    define_size_vars_ = false;
    expect(")");
    if (value->checked_type->kind != cast->kind && value->checked_type->kind != node_kind::object_type)
      fail_at(vstart, "R.match_cast of a value of type " + to_string(value->checked_type) + " to " + to_string(cast) +
                          " can never succeed");
  } else {
    value = parse_expr();
  }
  expect_newline();
  type t = is_cast ? cast : annot ? annot : value->checked_type;
  if (is_cast && annot && !types_equal(annot, cast))
    fail_at(eq, "the annotation " + to_string(annot) + " differs from the R.match_cast type " + to_string(cast));
  if (!is_cast && annot && !is_base_of(annot, value->checked_type))
    fail_at(eq,
            "'" + n.text + "' is annotated " + to_string(annot) + ", but the value has type " + to_string(value->checked_type));
  var v = dataflow && !outputs.count(n.text) ? make_dataflow_var(n.text, t) : make_var(n.text, t);
  block.bindings.push_back({v, value, cast});
  scopes_.back()[n.text] = v;
  expired_.erase(n.text);
}

}  // namespace kiln::ir::detail
