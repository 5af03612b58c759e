// SPDX-License-Identifier: Apache-2.0
/// \file
/// The text format's tokens: `detail::lexer` turns IR text into identifiers, numbers, strings,
/// punctuation and the INDENT / DEDENT / NEWLINE tokens of Python's layout rule, and
/// `parse_error`, the error both the lexer and the parser (`<kiln/ir/parser.hpp>`) raise, which
/// carries the line and column and shows the offending line with a caret under the position.
#pragma once

#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
      if (depth == 0 && (out.empty() || out.back().kind != tok::newline))
        out.push_back({tok::newline, "<newline>", line, static_cast<int>(l.size()) + 1});
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

}  // namespace detail

}  // namespace kiln::ir
