// SPDX-License-Identifier: Apache-2.0
/// \file
/// Small string utilities for error messages: close-match suggestions and joining.
#pragma once

#include <algorithm>
#include <charconv>
#include <string>
#include <type_traits>
#include <string_view>
#include <vector>

namespace kiln::detail {

/// The parts one after another: strings, string views, characters, integers and floating-point
/// numbers (shortest round-trip form: 1.5, 300, 1e-07). A message
/// builder that only appends, so it never meets GCC 12's false -Wrestrict at -O3 on
/// `"literal" + std::string(...)`.
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string s;
  auto add = [&](const auto& p) {
    using P = std::decay_t<decltype(p)>;
    if constexpr (std::is_integral_v<P> && !std::is_same_v<P, char>) s.append(std::to_string(p));
    else if constexpr (std::is_same_v<P, char>) s.push_back(p);
    else if constexpr (std::is_floating_point_v<P>) {
      char buf[32];
      s.append(buf, std::to_chars(buf, buf + sizeof buf, p).ptr);
    } else s.append(std::string_view(p));
  };
  (add(parts), ...);
  return s;
}

/// Levenshtein distance between `a` and `b`.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// Up to `limit` candidates close to `word`, closest first. A candidate is close when its edit
/// distance is at most a third of the word's length (at least 2) and smaller than the word itself,
/// or when it contains the word; a dotted candidate (`nn.softmax`) is also compared by its last
/// component.
inline std::vector<std::string> close_matches(std::string_view word, const std::vector<std::string>& candidates,
                                              std::size_t limit = 3) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  const std::size_t budget = std::max<std::size_t>(2, word.size() / 3);
  for (auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (auto dot = c.rfind('.'); dot != std::string::npos) d = std::min(d, edit_distance(word, std::string_view(c).substr(dot + 1)));
    if ((d <= budget && d < word.size()) || (word.size() >= 3 && c.find(word) != std::string::npos)) scored.emplace_back(d, c);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (auto& [d, c] : scored)
    if (out.size() < limit) out.push_back(c);
  return out;
}

/// `"a, b, c"`.
/// `text` in single quotes, for messages ('path/to/file'). Built by appending: GCC 12 at -O2/-O3
/// warns falsely (-Wrestrict, PR105651) on `"'" + s + "'"` where it inlines it.
inline std::string quote(std::string_view text) {
  std::string s;
  s.reserve(text.size() + 2);
  s.append(1, '\'').append(text).append(1, '\'');
  return s;
}

/// `text` as it may be shown in a message when it comes from untrusted bytes: printable ASCII
/// as is, a backslash doubled, every other byte as `\xNN`; at most `limit` bytes of it, then
/// "..." (a message never carries raw input bytes: NULs, escapes, a megabyte name).
inline std::string printable(std::string_view text, std::size_t limit = 80) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') s.append("\\\\");
    else if (c >= 0x20 && c < 0x7f) s.push_back(char(c));
    else s.append("\\x").append(1, hex[c >> 4]).append(1, hex[c & 15]);
  }
  if (text.size() > limit) s.append("...");
  return s;
}

/// `message` with every control character but the newline and the tab shown as `\xNN` (C0
/// controls, DEL, and C1 controls in their UTF-8 form), other bytes as they are: a message that
/// quotes names from a file cannot clear or retitle the terminal it is printed on.
inline std::string escape_controls(std::string_view message) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  s.reserve(message.size());
  const auto escape = [&](unsigned char c) { s.append("\\x").append(1, hex[c >> 4]).append(1, hex[c & 15]); };
  for (std::size_t i = 0; i < message.size(); ++i) {
    const auto c = static_cast<unsigned char>(message[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      escape(c);
    } else if (c == 0xc2 && i + 1 < message.size() && static_cast<unsigned char>(message[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(message[i + 1]) < 0xa0) {
      escape(c);
      escape(static_cast<unsigned char>(message[++i]));
    } else {
      s.push_back(char(c));
    }
  }
  return s;
}

inline std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) s += sep;
    s += items[i];
  }
  return s;
}

/// `" (did you mean 'x' or 'y'?)"`, or empty when there is no close match.
inline std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto m = close_matches(word, candidates);
  if (m.empty()) return {};
  std::string s = " (did you mean ";
  for (std::size_t i = 0; i < m.size(); ++i) s += (i == 0 ? "'" : i + 1 == m.size() ? " or '" : ", '") + m[i] + "'";
  return s + "?)";
}

}  // namespace kiln::detail
