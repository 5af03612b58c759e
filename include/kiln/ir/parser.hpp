// SPDX-License-Identifier: Apache-2.0
/// \file
/// The text format, parsing side: `parse_module(text)` reads what `print` writes.
///
/// Errors are `parse_error`s carrying the line and column, with a message that says what was
/// expected and shows the offending line with a caret under the position:
/// \code
///   kiln::ir::parse_module: line 6, column 46: expected ')' but found 'w'
///       lv: R.Tensor((n, 10), "float32") = R.matmul(x w)
///                                                    ^
/// \endcode
/// Type errors found while building the IR (a wrong operand shape, an unknown attribute) are
/// reported the same way, at the call that caused them. Functions may call functions defined
/// later in the module: signatures are read in a first pass.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/ir/printer.hpp>
#include <kiln/support/strings.hpp>

#include <charconv>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace kiln::ir {

/// A syntax or type error in IR text, with its position (1-based line and column).
class parse_error : public error {
public:
  parse_error(std::string message, int line, int column, std::string full)
      : error(std::move(full)), message_(std::move(message)), line_(line), column_(column) {}
  /// The error without position and source excerpt.
  const std::string& message() const noexcept { return message_; }
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }

private:
  std::string message_;
  int line_, column_;
};

namespace detail {

using kiln::detail::did_you_mean;

enum class tok : std::uint8_t { ident, integer, floating, string, punct, newline, indent, dedent, eof };

struct token {
  tok kind;
  std::string text;  ///< identifier, punctuation, number literal, or decoded string
  int line, column;
};

class lexer {
public:
  explicit lexer(std::string_view src) : src_(src) {
    std::size_t start = 0;
    while (start <= src.size()) {
      std::size_t end = src.find('\n', start);
      if (end == std::string_view::npos) end = src.size();
      lines_.emplace_back(src.substr(start, end - start));
      start = end + 1;
    }
  }
  const std::vector<std::string>& lines() const noexcept { return lines_; }

  std::vector<token> run() {
    std::vector<token> out;
    std::vector<int> indents{0};
    int depth = 0;  // bracket nesting: newlines inside brackets are ignored
    for (std::size_t ln = 0; ln < lines_.size(); ++ln) {
      const std::string& l = lines_[ln];
      const int line = static_cast<int>(ln) + 1;
      std::size_t i = 0;
      if (depth == 0) {
        int width = 0;
        while (i < l.size() && (l[i] == ' ' || l[i] == '\t')) {
          if (l[i] == '\t') fail("tabs are not allowed in indentation; use spaces", line, static_cast<int>(i) + 1);
          ++width, ++i;
        }
        if (i == l.size() || l[i] == '#' || l[i] == '\r') continue;  // blank or comment line
        if (width > indents.back()) {
          indents.push_back(width);
          out.push_back({tok::indent, "<indent>", line, width + 1});
        } else {
          while (width < indents.back()) {
            indents.pop_back();
            out.push_back({tok::dedent, "<dedent>", line, width + 1});
          }
          if (width != indents.back()) fail("this line's indentation does not match any enclosing block", line, width + 1);
        }
      }
      while (i < l.size()) {
        const char c = l[i];
        const int col = static_cast<int>(i) + 1;
        if (c == ' ' || c == '\t' || c == '\r') {
          ++i;
          continue;
        }
        if (c == '#') break;
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
          std::size_t j = i;
          while (j < l.size() && (std::isalnum(static_cast<unsigned char>(l[j])) || l[j] == '_')) ++j;
          out.push_back({tok::ident, l.substr(i, j - i), line, col});
          i = j;
          continue;
        }
        if (std::isdigit(static_cast<unsigned char>(c))) {
          std::size_t j = i;
          bool is_float = false;
          while (j < l.size() && std::isdigit(static_cast<unsigned char>(l[j]))) ++j;
          if (j < l.size() && l[j] == '.') {
            is_float = true;
            ++j;
            while (j < l.size() && std::isdigit(static_cast<unsigned char>(l[j]))) ++j;
          }
          if (j < l.size() && (l[j] == 'e' || l[j] == 'E')) {
            std::size_t k = j + 1;
            if (k < l.size() && (l[k] == '+' || l[k] == '-')) ++k;
            if (k < l.size() && std::isdigit(static_cast<unsigned char>(l[k]))) {
              is_float = true;
              j = k;
              while (j < l.size() && std::isdigit(static_cast<unsigned char>(l[j]))) ++j;
            }
          }
          out.push_back({is_float ? tok::floating : tok::integer, l.substr(i, j - i), line, col});
          i = j;
          continue;
        }
        if (c == '"' || c == '\'') {
          std::string s;
          std::size_t j = i + 1;
          for (;; ++j) {
            if (j >= l.size()) fail("unterminated string literal", line, col);
            if (l[j] == c) break;
            if (l[j] != '\\') {
              s += l[j];
              continue;
            }
            if (++j >= l.size()) fail("unterminated string literal", line, col);
            switch (l[j]) {
              case 'n': s += '\n'; break;
              case 't': s += '\t'; break;
              case '\\': s += '\\'; break;
              case '"': s += '"'; break;
              case '\'': s += '\''; break;
              case 'x': {
                unsigned v = 0;
                if (j + 2 >= l.size() || std::from_chars(l.data() + j + 1, l.data() + j + 3, v, 16).ptr != l.data() + j + 3)
                  fail("\\x must be followed by two hex digits", line, static_cast<int>(j));
                s += static_cast<char>(v);
                j += 2;
                break;
              }
              default: fail(std::string("unknown escape sequence '\\") + l[j] + "'", line, static_cast<int>(j));
            }
          }
          out.push_back({tok::string, std::move(s), line, col});
          i = j + 1;
          continue;
        }
        static constexpr std::string_view two[] = {"->", "//"};
        bool matched = false;
        for (auto p : two)
          if (l.compare(i, 2, p) == 0) {
            out.push_back({tok::punct, std::string(p), line, col});
            i += 2;
            matched = true;
          }
        if (matched) continue;
        if (std::string_view("()[]{},:.=@+-*%").find(c) == std::string_view::npos)
          fail(std::string("unexpected character '") + c + "'", line, col);
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        out.push_back({tok::punct, std::string(1, c), line, col});
        ++i;
      }
      if (depth == 0 && (out.empty() || out.back().kind != tok::newline)) out.push_back({tok::newline, "<newline>", line, static_cast<int>(l.size()) + 1});
    }
    const int last = static_cast<int>(lines_.size());
    if (depth != 0) fail("unbalanced brackets: the text ends inside ( [ or {", last, 1);
    while (indents.size() > 1) {
      indents.pop_back();
      out.push_back({tok::dedent, "<dedent>", last, 1});
    }
    out.push_back({tok::eof, "<end of text>", last + 1, 1});
    return out;
  }

  [[noreturn]] void fail(const std::string& msg, int line, int col) const { throw make_error(lines_, msg, line, col); }

  static parse_error make_error(const std::vector<std::string>& lines, const std::string& msg, int line, int col) {
    std::string full = "kiln::ir::parse_module: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + msg;
    if (line >= 1 && static_cast<std::size_t>(line) <= lines.size()) {
      const std::string& src = lines[static_cast<std::size_t>(line) - 1];
      full += "\n    " + src + "\n    " + std::string(static_cast<std::size_t>(std::max(col, 1) - 1), ' ') + "^";
    }
    return parse_error(msg, line, col, std::move(full));
  }

private:
  std::string_view src_;
  std::vector<std::string> lines_;
};

/// A literal element of an `R.const` list, kept as text so each dtype can parse it exactly.
struct const_literal {
  std::string text;
  bool is_float = false;
  bool is_bool = false;
  const token* where = nullptr;
};

}  // namespace detail

/// How `parse_module` reads text.
struct parse_options {
  /// The constants an elided print left out (`print_options::elided_constants`): `meta[i]` in
  /// `R.const(meta[i], ...)` reads as `constants[i]`. Empty: such text is a `parse_error` that
  /// says the constants were elided.
  std::span<const ndarray> constants = {};
};

namespace detail {

class ir_parser {
public:
  explicit ir_parser(std::string_view text, parse_options opt = {}) : opt_(opt), lex_(text), toks_(lex_.run()) {}

  ir_module parse() {
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

private:
  // ---- tokens ----------------------------------------------------------------------------------
  const token& cur() const { return toks_[pos_]; }
  const token& peek(std::size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const token& next() {
    const token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at(std::string_view p) const { return cur().kind == tok::punct && cur().text == p; }
  bool at_word(std::string_view w) const { return cur().kind == tok::ident && cur().text == w; }
  bool at_kind(tok k) const { return cur().kind == k; }
  static std::string describe(const token& t) {
    switch (t.kind) {
      case tok::newline: return "the end of the line";
      case tok::indent: return "an indented block";
      case tok::dedent: return "the end of the block";
      case tok::eof: return "the end of the text";
      case tok::string: return quote(t.text);
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void fail_at(const token& t, const std::string& msg) const { throw lexer::make_error(lex_.lines(), msg, t.line, t.column); }
  [[noreturn]] void fail(const std::string& msg) const { fail_at(cur(), msg); }

  /// The deepest nesting of expressions, types, dimensions, attribute values and `if` bodies the
  /// parser accepts: deeper text is an error at the token where it goes too deep, not a stack
  /// overflow. Real modules nest a few levels.
  static constexpr int max_nesting = 256;
  /// Counts one level of nesting while it lives.
  struct nesting {
    explicit nesting(ir_parser& p) : parser(p) {
      if (++parser.depth_ > max_nesting) {
        --parser.depth_;
        parser.fail("nested too deeply (limit " + std::to_string(max_nesting) + ")");
      }
    }
    ~nesting() { --parser.depth_; }
    nesting(const nesting&) = delete;
    nesting& operator=(const nesting&) = delete;
    ir_parser& parser;
  };
  int depth_ = 0;
  [[noreturn]] void expected(const std::string& what) const { fail("expected " + what + " but found " + describe(cur())); }
  void expect(std::string_view p) {
    if (!at(p)) expected("'" + std::string(p) + "'");
    next();
  }
  void expect_word(std::string_view w) {
    if (!at_word(w)) expected("'" + std::string(w) + "'");
    next();
  }
  const token& expect_ident(const std::string& what) {
    if (!at_kind(tok::ident)) expected(what);
    return next();
  }
  void expect_kind(tok k, const std::string& what) {
    if (!at_kind(k)) expected(what);
    next();
  }
  void expect_newline() {
    if (!at_kind(tok::newline)) expected("the end of the line");
    next();
  }
  void skip_newlines() {
    while (at_kind(tok::newline)) next();
  }
  bool accept(std::string_view p) {
    if (!at(p)) return false;
    next();
    return true;
  }
  /// Items read by `item`, separated by commas (a trailing comma is allowed), up to and including
  /// the closing bracket `close`.
  template <class T, class Item>
  std::vector<T> comma_list(std::string_view close, Item&& item) {
    std::vector<T> out;
    while (!at(close)) {
      out.push_back(item());
      if (!accept(",")) break;
    }
    expect(close);
    return out;
  }

  /// Skips an indented block (INDENT ... matching DEDENT).
  void skip_block() {
    expect_kind(tok::indent, "an indented block");
    int depth = 1;
    while (depth > 0) {
      if (at_kind(tok::eof)) fail("unexpected end of text inside a block");
      if (at_kind(tok::indent)) ++depth;
      if (at_kind(tok::dedent)) --depth;
      next();
    }
  }

  // ---- literals --------------------------------------------------------------------------------
  std::int64_t parse_int() {
    bool neg = accept("-");
    if (!at_kind(tok::integer)) expected("an integer");
    const token& t = next();
    std::int64_t v = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size()) fail_at(t, "integer literal " + t.text + " is out of range");
    return neg ? -v : v;
  }
  std::string parse_string(const std::string& what) {
    if (!at_kind(tok::string)) expected(what);
    return next().text;
  }
  dtype parse_dtype_string() {
    const token& t = cur();
    std::string s = parse_string("a dtype string such as \"float32\"");
    auto d = parse_dtype(s);
    if (!d) fail_at(t, "unknown dtype \"" + s + "\" (known: bool, int8, int32, int64, uint8, float16, float32, float64, void)");
    return *d;
  }
  static double to_double(const std::string& text, bool neg) {
    if (text == "inf") return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    double v = 0;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return neg ? -v : v;
  }
  /// An attribute value: None, True/False, an int, a float, a string, a list of ints or a dict
  /// of ints (`{"n": 1024}`).
  attr_value parse_attr_value() {
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
  attr_map parse_dict() {
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

  // ---- symbolic dimensions -----------------------------------------------------------------------
  prim_expr parse_dim() {
    prim_expr e = parse_dim_term();
    while (at("+") || at("-")) {
      const token& t = next();
      prim_expr r = parse_dim_term();
      e = binary_at(t, t.text == "+" ? prim_op::add : prim_op::sub, e, r);
    }
    return e;
  }
  /// `make_binary`, its errors (a too long chain: kiln::ir::depth_error) reported at `where`.
  prim_expr binary_at(const token& where, prim_op op, const prim_expr& a, const prim_expr& b) {
    return guarded(where, [&] { return make_binary(op, a, b); });
  }
  prim_expr parse_dim_term() {
    prim_expr e = parse_dim_factor();
    while (at("*") || at("//") || at("%")) {
      const token& t = next();
      prim_op op = t.text == "*" ? prim_op::mul : t.text == "//" ? prim_op::floordiv : prim_op::floormod;
      prim_expr r = parse_dim_factor();
      e = binary_at(t, op, e, r);
    }
    return e;
  }
  prim_expr parse_dim_factor() {
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
                     "' (symbolic dimensions are introduced by parameter types and R.match_cast)" + did_you_mean(t.text, size_var_names()));
    size_var v = make_size_var(t.text);
    size_vars_.emplace(t.text, v);
    return v;
  }
  std::vector<std::string> size_var_names() const {
    std::vector<std::string> r;
    for (auto& [k, v] : size_vars_) r.push_back(k);
    return r;
  }
  std::vector<prim_expr> parse_dim_list(std::string_view close) {
    return comma_list<prim_expr>(close, [&] { return parse_dim(); });
  }

  // ---- types -----------------------------------------------------------------------------------
  type parse_type() {
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
  std::vector<type> parse_type_list() {
    std::vector<type> ts;
    if (accept("[")) {
      ts = comma_list<type>("]", [&] { return parse_type(); });
    } else {
      ts.push_back(parse_type());
    }
    return ts;
  }

  // ---- functions -------------------------------------------------------------------------------
  struct header {
    bool prim = false;
    int num_outputs = 1;
    const token* name = nullptr;
    std::vector<std::pair<const token*, type>> params;
    type ret;
  };

  header parse_header() {
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

  void declare_function() {
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

  /// What the first pass read of a signature; the second pass reuses these very objects so that
  /// the function's signature is identical to its global variable's type.
  struct declared {
    std::unordered_map<std::string, size_var> size_vars;
    std::vector<std::pair<const token*, type>> params;
    type ret;
  };

  ir_module_node::entry define_function() {
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

  /// Runs `f`, turning a kiln error into a parse error at `where`.
  template <class F>
  auto guarded(const token& where, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const parse_error&) {
      throw;
    } catch (const error& e) {
      fail_at(where, e.what());
    }
  }

  /// Statements until the end of the current indented block. A function body ends with `return`;
  /// an if branch ends with the binding of the if's variable (`result_name`).
  expr parse_body(bool in_branch, std::string* result_name, type* result_annot = nullptr) {
    const nesting guard(*this);
    std::vector<binding_block> blocks{{false, {}}};
    expr result;
    while (!at_kind(tok::dedent)) {
      if (result) fail(in_branch ? "the binding of the if's result must be the last statement of a branch"
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
      fail(in_branch ? "an if branch must end by binding the if's result (name = value)" : "the function body must end with 'return'");
    }
    return make_seq(std::move(blocks), std::move(result));
  }

  /// True when the statement at the cursor is the last one of its block.
  bool is_last_statement() const {
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

  void parse_dataflow(std::vector<binding_block>& blocks) {
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

  std::unordered_set<std::string> scan_outputs() const {
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

  void parse_if(binding_block& block) {
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
      fail_at(e, "both branches of an if must bind the same variable last, but they bind '" + then_name + "' and '" + else_name + "'");
    expr value = guarded(kw, [&] { return make_if(cond, then_branch, else_branch); });
    type t = then_annot ? then_annot : else_annot ? else_annot : value->checked_type;
    if (then_annot && else_annot && !types_equal(then_annot, else_annot))
      fail_at(e, "the branches annotate '" + then_name + "' with different types, " + to_string(then_annot) + " and " + to_string(else_annot));
    if (!is_base_of(t, value->checked_type))
      fail_at(kw, "'" + then_name + "' is annotated " + to_string(t) + ", but the if produces " + to_string(value->checked_type));
    var v = make_var(then_name, t);
    block.bindings.push_back({v, value, {}});
    scopes_.back()[then_name] = v;
    expired_.erase(then_name);
  }

  void parse_binding(binding_block& block, bool dataflow, const std::unordered_set<std::string>& outputs) {
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
        fail_at(vstart, "R.match_cast of a value of type " + to_string(value->checked_type) + " to " + to_string(cast) + " can never succeed");
    } else {
      value = parse_expr();
    }
    expect_newline();
    type t = is_cast ? cast : annot ? annot : value->checked_type;
    if (is_cast && annot && !types_equal(annot, cast))
      fail_at(eq, "the annotation " + to_string(annot) + " differs from the R.match_cast type " + to_string(cast));
    if (!is_cast && annot && !is_base_of(annot, value->checked_type))
      fail_at(eq, "'" + n.text + "' is annotated " + to_string(annot) + ", but the value has type " + to_string(value->checked_type));
    var v = dataflow && !outputs.count(n.text) ? make_dataflow_var(n.text, t) : make_var(n.text, t);
    block.bindings.push_back({v, value, cast});
    scopes_.back()[n.text] = v;
    expired_.erase(n.text);
  }

  // ---- expressions -----------------------------------------------------------------------------
  var lookup_local(const std::string& name) const {
    auto it = scopes_.back().find(name);
    return it == scopes_.back().end() ? var() : it->second;
  }
  expr lookup(const token& t) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      auto it = s->find(t.text);
      if (it != s->end()) return it->second;
    }
    if (expired_.count(t.text))
      fail_at(t, "'" + t.text + "' is a dataflow variable of an earlier dataflow block and is not visible here (list it in R.output to use it after the block)");
    std::vector<std::string> visible;
    for (auto& s : scopes_)
      for (auto& [k, v] : s) visible.push_back(k);
    fail_at(t, "undefined variable '" + t.text + "'" + did_you_mean(t.text, visible));
  }

  expr parse_expr() {
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

  std::vector<expr> parse_args_only() {
    expect("(");
    return comma_list<expr>(")", [&] { return parse_expr(); });
  }

  expr parse_primary() {
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

  /// `R.<name>(...)`: a built-in form or an operator call.
  expr parse_r_call() {
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
    if (name == "match_cast") fail_at(first, "R.match_cast can only be the whole value of a binding (name = R.match_cast(value, type))");
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

  expr parse_prim_value(const token& start) {
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

  /// One element of an `R.const`: a number (optionally negative), inf, nan, True or False.
  const_literal parse_const_literal(const char* what) {
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

  void parse_const_list(std::vector<const_literal>& flat, std::vector<std::int64_t>& shape, std::size_t depth,
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
      fail_at(open, "ragged constant: this list has " + std::to_string(count) + " elements, but its siblings have " + std::to_string(shape[depth]));
    seen[depth] = true;
    shape[depth] = count;
  }

  /// `R.const(meta[i], "dtype", shape=(...))`: a constant the printer elided.
  expr parse_elided_const(const token& start) {
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

  expr parse_const(const token& start) {
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

  void store_literal(const const_literal& lit, dtype d, std::byte* p) {
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

  parse_options opt_;
  lexer lex_;
  std::vector<token> toks_;
  std::size_t pos_ = 0;
  std::unordered_map<std::string, global_var> globals_;
  std::unordered_map<std::string, declared> signatures_;
  std::unordered_map<std::string, size_var> size_vars_;
  bool define_size_vars_ = false;
  std::vector<std::unordered_map<std::string, var>> scopes_;
  std::unordered_set<std::string> expired_;
};

}  // namespace detail

/// Parses a module from the text format written by `print`. Throws `parse_error`.
inline ir_module parse_module(std::string_view text, parse_options opt = {}) { return detail::ir_parser(text, opt).parse(); }

}  // namespace kiln::ir
