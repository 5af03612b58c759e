// SPDX-License-Identifier: Apache-2.0
/// \file
/// Passes from lambdas and stateful objects, with name, opt level and requirements given at the
/// call: the C++ form of the design's `module_pass` / `function_pass` decorators.
///
/// \code
/// constexpr auto count_calls = kiln::function_pass<"count_calls", 1>(
///     [](const ir::function& f, const ir::ir_module&, kiln::pass_context& ctx) { ...; return f; });
/// auto inline_small = kiln::module_pass<"inline_small", 2, kiln::pass_list<normalize>>(inliner{threshold});
/// using pipeline = kiln::sequential<decltype(count_calls), normalize>;
/// \endcode
///
/// Each call yields a distinct pass type (its callable's type is part of it), so lambda passes can
/// be listed in `sequential<...>` by `decltype`. `make_pass` deduces the kind from the call shape;
/// the three named helpers fix it, so a generic lambda is fine there.
#pragma once

#include <kiln/pass/analysis.hpp>
#include <kiln/pass/pass_info.hpp>
#include <kiln/support/fixed_string.hpp>

#include <concepts>
#include <functional>
#include <type_traits>
#include <utility>

namespace kiln {

namespace detail {
struct deduced_kind_tag {};
}  // namespace detail

/// A pass made of a callable `F` with the given name, opt level, requirements and, unless
/// deduced, kind.
template <fixed_string Name, int OptLevel, class Required, class Kind, class F>
class callable_pass {
  static_assert(detail::is_pass_list<Required>::value,
                "kiln::make_pass: the requirements must be given as kiln::pass_list<...> of pass types");

public:
  static constexpr std::string_view name = Name.view();
  static constexpr int opt_level = OptLevel;
  using required = Required;
  /// False when the callable says so (`static constexpr bool thread_safe = false`): a function pass
  /// then runs in order even when the context has several threads.
  static constexpr bool thread_safe = thread_safe_of<F>;
  /// The analyses the callable says it preserves (`using preserves = kiln::preserves<...>`).
  using preserves = preserved_analyses_of<F>;

  callable_pass()
    requires std::default_initializable<F>
  = default;
  constexpr explicit callable_pass(F f) : f_(std::move(f)) {}

  template <class... Args>
    requires std::invocable<F&, Args...>
  constexpr decltype(auto) operator()(Args&&... args) {
    return std::invoke(f_, std::forward<Args>(args)...);
  }
  template <class... Args>
    requires std::invocable<const F&, Args...>
  constexpr decltype(auto) operator()(Args&&... args) const {
    return std::invoke(f_, std::forward<Args>(args)...);
  }

  /// The wrapped callable (to read a stateful pass's results).
  F& callable() noexcept { return f_; }
  const F& callable() const noexcept { return f_; }

private:
  F f_;
};

template <fixed_string Name, int OptLevel, class Required, pass_kind K, class F>
class kind_callable_pass : public callable_pass<Name, OptLevel, Required, detail::deduced_kind_tag, F> {
  using base = callable_pass<Name, OptLevel, Required, detail::deduced_kind_tag, F>;

public:
  static constexpr pass_kind kind = K;
  using base::base;
};

/// A pass whose kind is deduced from how `f` can be called.
template <fixed_string Name, int OptLevel = 0, class Required = pass_list<>, class F>
constexpr auto make_pass(F f) {
  return callable_pass<Name, OptLevel, Required, detail::deduced_kind_tag, F>(std::move(f));
}
/// A module pass: `f(module, pass_context&) -> module` or `f(module) -> module`.
template <fixed_string Name, int OptLevel = 0, class Required = pass_list<>, class F>
constexpr auto module_pass(F f) {
  return kind_callable_pass<Name, OptLevel, Required, pass_kind::module, F>(std::move(f));
}
/// A function pass: `f(function, module, pass_context&) -> function` or `f(function) -> function`.
template <fixed_string Name, int OptLevel = 0, class Required = pass_list<>, class F>
constexpr auto function_pass(F f) {
  return kind_callable_pass<Name, OptLevel, Required, pass_kind::function, F>(std::move(f));
}
/// A kernel-function pass (the design's PrimFuncPass), on the IR's `kernel_function_type`.
template <fixed_string Name, int OptLevel = 0, class Required = pass_list<>, class F>
constexpr auto kernel_function_pass(F f) {
  return kind_callable_pass<Name, OptLevel, Required, pass_kind::kernel_function, F>(std::move(f));
}

}  // namespace kiln
