// SPDX-License-Identifier: Apache-2.0
/// \file
/// `fixed_string`: a string literal usable as a template argument (`make_pass<"fold_constant", 2>(f)`).
#pragma once

#include <cstddef>
#include <string_view>

namespace kiln {

/// A string literal held by value, so that it can be a non-type template parameter. `N` counts the
/// terminating zero, as for the literal it is made from.
template <std::size_t N>
struct fixed_string {
  char chars[N]{};

  constexpr fixed_string() = default;
  constexpr fixed_string(const char (&s)[N]) noexcept {  // NOLINT: implicit on purpose, from a literal
    for (std::size_t i = 0; i < N; ++i) chars[i] = s[i];
  }
  constexpr std::string_view view() const noexcept { return {chars, N - 1}; }
  constexpr operator std::string_view() const noexcept { return view(); }
};

}  // namespace kiln
