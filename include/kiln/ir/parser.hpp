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
///
/// The parser is one recursive-descent class, `detail::ir_parser`, declared here; its parts are
/// defined in ir/impl/: parse_types.ipp (tokens, literals, symbolic dimensions, types),
/// parse_functions.ipp (the module, signatures, bodies, bindings, `if` and dataflow blocks) and
/// parse_expressions.ipp (expressions, operator calls, constants). The tokens are
/// <kiln/ir/text_lexer.hpp>.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/ir/printer.hpp>
#include <kiln/ir/text_lexer.hpp>
#include <kiln/support/strings.hpp>

#include <charconv>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace kiln::ir {

namespace detail {

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

  ir_module parse();

private:
  // ---- tokens ----------------------------------------------------------------------------------
  const token& cur() const { return toks_[pos_]; }
  const token& peek(std::size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const token& next();
  bool at(std::string_view p) const { return cur().kind == tok::punct && cur().text == p; }
  bool at_word(std::string_view w) const { return cur().kind == tok::ident && cur().text == w; }
  bool at_kind(tok k) const { return cur().kind == k; }
  static std::string describe(const token& t);
  [[noreturn]] void fail_at(const token& t, const std::string& msg) const {
    throw lexer::make_error(lex_.lines(), msg, t.line, t.column);
  }
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
  void expect(std::string_view p);
  void expect_word(std::string_view w);
  const token& expect_ident(const std::string& what);
  void expect_kind(tok k, const std::string& what);
  void expect_newline();
  void skip_newlines();
  bool accept(std::string_view p);
  /// Items read by `item`, separated by commas (a trailing comma is allowed), up to and including
  /// the closing bracket `close`.
  template <class T, class Item>
  std::vector<T> comma_list(std::string_view close, Item&& item);

  /// Skips an indented block (INDENT ... matching DEDENT).
  void skip_block();

  // ---- literals --------------------------------------------------------------------------------
  std::int64_t parse_int();
  std::string parse_string(const std::string& what);
  dtype parse_dtype_string();
  static double to_double(const std::string& text, bool neg);
  /// An attribute value: None, True/False, an int, a float, a string, a list of ints or a dict
  /// of ints (`{"n": 1024}`).
  attr_value parse_attr_value();
  attr_map parse_dict();

  // ---- symbolic dimensions -----------------------------------------------------------------------
  prim_expr parse_dim();
  /// `make_binary`, its errors (a too long chain: kiln::ir::depth_error) reported at `where`.
  prim_expr binary_at(const token& where, prim_op op, const prim_expr& a, const prim_expr& b);
  prim_expr parse_dim_term();
  prim_expr parse_dim_factor();
  std::vector<std::string> size_var_names() const;
  std::vector<prim_expr> parse_dim_list(std::string_view close);

  // ---- types -----------------------------------------------------------------------------------
  type parse_type();
  std::vector<type> parse_type_list();

  // ---- functions -------------------------------------------------------------------------------
  struct header {
    bool prim = false;
    int num_outputs = 1;
    const token* name = nullptr;
    std::vector<std::pair<const token*, type>> params;
    type ret;
  };
  header parse_header();
  void declare_function();

  /// What the first pass read of a signature; the second pass reuses these very objects so that
  /// the function's signature is identical to its global variable's type.
  struct declared {
    std::unordered_map<std::string, size_var> size_vars;
    std::vector<std::pair<const token*, type>> params;
    type ret;
  };
  ir_module_node::entry define_function();

  /// Runs `f`, turning a kiln error into a parse error at `where`.
  template <class F>
  auto guarded(const token& where, F&& f) -> decltype(f());

  /// Statements until the end of the current indented block. A function body ends with `return`;
  /// an if branch ends with the binding of the if's variable (`result_name`).
  expr parse_body(bool in_branch, std::string* result_name, type* result_annot = nullptr);

  /// True when the statement at the cursor is the last one of its block.
  bool is_last_statement() const;
  void parse_dataflow(std::vector<binding_block>& blocks);
  std::unordered_set<std::string> scan_outputs() const;
  void parse_if(binding_block& block);
  void parse_binding(binding_block& block, bool dataflow, const std::unordered_set<std::string>& outputs);

  // ---- expressions -----------------------------------------------------------------------------
  var lookup_local(const std::string& name) const;
  expr lookup(const token& t) const;
  expr parse_expr();
  std::vector<expr> parse_args_only();
  expr parse_primary();

  /// `R.<name>(...)`: a built-in form or an operator call.
  expr parse_r_call();
  expr parse_prim_value(const token& start);

  /// One element of an `R.const`: a number (optionally negative), inf, nan, True or False.
  const_literal parse_const_literal(const char* what);
  void parse_const_list(std::vector<const_literal>& flat, std::vector<std::int64_t>& shape, std::size_t depth,
                        std::vector<bool>& seen);

  /// `R.const(meta[i], "dtype", shape=(...))`: a constant the printer elided.
  expr parse_elided_const(const token& start);
  expr parse_const(const token& start);
  void store_literal(const const_literal& lit, dtype d, std::byte* p);
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

#include <kiln/ir/impl/parse_expressions.ipp>
#include <kiln/ir/impl/parse_functions.ipp>
#include <kiln/ir/impl/parse_types.ipp>
