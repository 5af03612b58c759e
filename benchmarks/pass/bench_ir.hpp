// SPDX-License-Identifier: Apache-2.0
// The IR of the pass-overhead benchmarks: a module of F functions, each a 64-bit state that every
// pass mixes a little (a fixed, small amount of work per function). Functions are updated in
// place, so the figures measure the pass infrastructure and the work, not copying modules.
#pragma once

#include <kiln/pass/make_pass.hpp>
#include <kiln/pass/module_traits.hpp>
#include <kiln/support/fixed_string.hpp>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string_view>
#include <utility>
#include <vector>

namespace bench {

struct function {
  std::uint64_t state = 0;
  bool skip = false;
};

/// A handle on shared, mutable function storage (the benchmark owns it).
struct module {
  std::vector<function>* functions = nullptr;
};

inline std::vector<function> make_functions(std::size_t n) {
  std::vector<function> fns(n);
  for (std::size_t i = 0; i < n; ++i) fns[i].state = i * 0x9E3779B97F4A7C15ull + 1;
  return fns;
}

/// The work of pass `I` on one function: a few rounds of multiply-xorshift.
template <int I>
inline function work(const function& f) {
  std::uint64_t x = f.state + static_cast<std::uint64_t>(I);
  for (int r = 0; r < 4; ++r) {
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
  }
  return {x, f.skip};
}

/// "p0" .. "p99".
template <int I>
constexpr kiln::fixed_string<4> pass_name() {
  static_assert(I >= 0 && I < 100);
  kiln::fixed_string<4> s;
  s.chars[0] = 'p';
  if constexpr (I < 10) {
    s.chars[1] = char('0' + I);
  } else {
    s.chars[1] = char('0' + I / 10);
    s.chars[2] = char('0' + I % 10);
  }
  return s;
}

/// Pass `I`: a function pass doing `work<I>`.
template <int I>
struct work_pass {
  static constexpr kiln::fixed_string<4> stored = pass_name<I>();
  static constexpr std::string_view name{stored.chars};
  function operator()(const function& f) const { return work<I>(f); }
};

}  // namespace bench

template <>
struct kiln::module_traits<bench::module> {
  using function_type = bench::function;
  template <class Fn>
  static bench::module map_functions(const bench::module& m, Fn&& fn) {
    for (bench::function& f : *m.functions) f = fn(std::string_view(), f);
    return m;
  }
  static bool skip_optimization(const bench::function& f) { return f.skip; }
  static bool same(const bench::module& a, const bench::module& b) { return a.functions == b.functions; }
  static void print(std::ostream& os, const bench::module& m) { os << "bench module of " << m.functions->size() << " functions"; }
};

namespace bench {

/// (a) hand-written: each pass's work applied to every function, as the function-pass driver
/// would, without any infrastructure.
template <int... I>
inline module handwritten(const module& m, std::integer_sequence<int, I...>) {
  module out = m;
  ((out = kiln::module_traits<module>::map_functions(out, [](std::string_view, const function& f) {
      return kiln::module_traits<module>::skip_optimization(f) ? f : work<I>(f);
    })),
   ...);
  return out;
}

}  // namespace bench
