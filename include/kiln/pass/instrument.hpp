// SPDX-License-Identifier: Apache-2.0
/// \file
/// Pass instruments: any type with any subset of the hooks below, detected at compile time (the
/// design's `pass_instrument` decorator, without a base class), and `kiln::instrument`, the
/// type-erased value a `pass_context` holds.
///
/// The hooks, all optional:
///
/// \code
/// void enter_pass_ctx();                       // the context's scope opens (or instruments are set)
/// void exit_pass_ctx();                        // the scope closes (or the instruments are replaced)
/// bool should_run(M, const pass_info&);        // false skips the pass (may return kiln::skip_reason)
/// void run_before_pass(M, const pass_info&);
/// void run_after_pass(M, const pass_info&);
/// void run_before_skipped_pass(M, const pass_info&, kiln::skip_reason);  // beyond the design
/// void run_after_pass_failed(M, const pass_info&, const kiln::pass_error&);  // beyond the design
/// \endcode
///
/// `M` is `const kiln::module_view&`, or, for instruments given to a pipeline as compile-time
/// policies, also the typed `const Module&`; a hook may also leave the module out
/// (`void run_before_pass(const pass_info&)`). A hook that is present but fits none of these forms
/// is a compile error, so a misspelt parameter list is not silently ignored; so is, in a type that
/// has some hook, a member named like a common misspelling of one (`run_afterpass`,
/// `enter_pass_context`, TVM's `RunBeforePass`: the list is in `detail::has_misspelt_hook`).
///
/// The protocol, for a pass P run on module m in context ctx with instruments I1..In (policies
/// first, then the context's list, each hook called on each instrument in that order):
///
/// \code
/// if P is a pipeline's step (not a pass called directly, as in TVM) and is disabled by name, or below
///   ctx.opt_level and not needed: Ii.run_before_skipped_pass(m, P, why); return m
/// if P is not in ctx.required_passes:
///   run = true; for Ii: run &= Ii.should_run(m, P)     -- every instrument is asked, no short-circuit
///   if !run: Ii.run_before_skipped_pass(m, P, should_run) for all i; return m
/// for Ii: Ii.run_before_pass(m, P)
/// m2 = P(m)   -- if it throws or reports an error: Ii.run_after_pass_failed(m, P, e); throw e
/// for Ii: Ii.run_after_pass(m2, P)
/// return m2
/// \endcode
///
/// An exception from a hook leaves at once. `enter_pass_ctx` and `exit_pass_ctx` follow the
/// design's rules; see `pass_context`.
#pragma once

#include <kiln/pass/diagnostics.hpp>
#include <kiln/pass/module_traits.hpp>
#include <kiln/pass/pass_info.hpp>

#include <boost/core/demangle.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>

namespace kiln {

/// Why a pass did not run.
enum class skip_reason : std::uint8_t {
  none,          ///< it runs
  disabled,      ///< its name is in the context's disabled passes
  opt_level,     ///< its opt_level is above the context's and nothing that runs requires it
  should_run,    ///< an instrument's should_run said no
  bisect_limit,  ///< a bisect instrument's limit was reached
  not_needed,    ///< pulled in as a requirement, but no pass that requires it runs
};

constexpr std::string_view to_string(skip_reason r) noexcept {
  switch (r) {
    case skip_reason::none: return "runs";
    case skip_reason::disabled: return "disabled";
    case skip_reason::opt_level: return "opt level";
    case skip_reason::should_run: return "should_run";
    case skip_reason::bisect_limit: return "bisect limit";
    case skip_reason::not_needed: return "not needed";
  }
  return "skipped";
}

/// The hooks, as bits.
enum class hook : std::uint8_t {
  enter_pass_ctx = 1 << 0,
  exit_pass_ctx = 1 << 1,
  should_run = 1 << 2,
  run_before_pass = 1 << 3,
  run_after_pass = 1 << 4,
  run_before_skipped_pass = 1 << 5,
  run_after_pass_failed = 1 << 6,
};
constexpr unsigned operator|(hook a, hook b) noexcept { return unsigned(a) | unsigned(b); }

namespace detail {

// Each hook is tried with the typed module, then the module_view, then no module. `if constexpr`
// keeps the absent forms out of the generated code entirely.

#define KILN_DETAIL_MODULE_HOOK(HOOK)                                                           \
  template <class I, class M, class... Extra>                                                                    \
  constexpr bool HOOK##_typed = requires(I& i, const M& m, const pass_info& info, Extra&&... extra) {            \
    i.HOOK(m, info, extra...);                                                                                   \
  };                                                                                                             \
  template <class I, class... Extra>                                                                             \
  constexpr bool HOOK##_erased = requires(I& i, const module_view& m, const pass_info& info, Extra&&... extra) { \
    i.HOOK(m, info, extra...);                                                                                   \
  };                                                                                                             \
  template <class I, class... Extra>                                                                             \
  constexpr bool HOOK##_bare = requires(I& i, const pass_info& info, Extra&&... extra) { i.HOOK(info, extra...); }; \
  template <class I, class M, class... Extra>                                                                    \
  constexpr bool has_##HOOK = HOOK##_typed<I, M, Extra...> || HOOK##_erased<I, Extra...> || HOOK##_bare<I, Extra...>; \
  /* a member with the hook's name, whatever its signature (checked by check_instrument) */                      \
  template <class I>                                                                                             \
  constexpr bool names_##HOOK = requires { &I::HOOK; };                                                          \
  template <class I, class M, class... Extra>                                                                    \
  decltype(auto) call_##HOOK(I& i, const M& m, const pass_info& info, Extra&&... extra) {                        \
    if constexpr (HOOK##_typed<I, M, Extra...>)                                                                  \
      return i.HOOK(m, info, extra...);                                                                          \
    else if constexpr (HOOK##_erased<I, Extra...>)                                                               \
      return i.HOOK(module_view(m), info, extra...);                                                             \
    else                                                                                                         \
      return i.HOOK(info, extra...);                                                                             \
  }

KILN_DETAIL_MODULE_HOOK(should_run)
KILN_DETAIL_MODULE_HOOK(run_before_pass)
KILN_DETAIL_MODULE_HOOK(run_after_pass)
KILN_DETAIL_MODULE_HOOK(run_before_skipped_pass)
KILN_DETAIL_MODULE_HOOK(run_after_pass_failed)
#undef KILN_DETAIL_MODULE_HOOK

template <class I>
constexpr bool has_enter_pass_ctx = requires(I& i) { i.enter_pass_ctx(); };
template <class I>
constexpr bool has_exit_pass_ctx = requires(I& i) { i.exit_pass_ctx(); };

// A member with a hook's name that fits none of the accepted forms is a mistake worth a diagnostic.
template <class I>
constexpr bool names_enter_pass_ctx = requires { &I::enter_pass_ctx; };
template <class I>
constexpr bool names_exit_pass_ctx = requires { &I::exit_pass_ctx; };

/// The hooks `I` provides when run on modules of type `M` (`module_view` for run-time instruments).
template <class I, class M>
constexpr unsigned hooks_of() {
  unsigned h = 0;
  if constexpr (has_enter_pass_ctx<I>) h |= unsigned(hook::enter_pass_ctx);
  if constexpr (has_exit_pass_ctx<I>) h |= unsigned(hook::exit_pass_ctx);
  if constexpr (has_should_run<I, M>) h |= unsigned(hook::should_run);
  if constexpr (has_run_before_pass<I, M>) h |= unsigned(hook::run_before_pass);
  if constexpr (has_run_after_pass<I, M>) h |= unsigned(hook::run_after_pass);
  if constexpr (has_run_before_skipped_pass<I, M, skip_reason>) h |= unsigned(hook::run_before_skipped_pass);
  if constexpr (has_run_after_pass_failed<I, M, const pass_error&>) h |= unsigned(hook::run_after_pass_failed);
  return h;
}

// Members whose names are near misses of a hook's (an underscore lost, `_context` for `_ctx`, TVM's
// C++ names, a word dropped): in a type that has other hooks, such a member is surely a hook that
// would never be called. Detected by name alone, whatever its signature: a member of that name in
// `I` makes the lookup in `near_miss_probe<I>` ambiguous.
#define KILN_DETAIL_NEAR_MISS(NAME)                                            \
  struct near_miss_base_##NAME {                                              \
    int NAME;                                                                 \
  };                                                                          \
  template <class I>                                                          \
  struct near_miss_probe_##NAME : I, near_miss_base_##NAME {};                \
  template <class I>                                                          \
  constexpr bool has_member_##NAME = [] {                                     \
    if constexpr (std::is_class_v<I> && !std::is_final_v<I>)                  \
      return !requires { &near_miss_probe_##NAME<I>::NAME; };                 \
    else                                                                      \
      return false;                                                           \
  }();
#define KILN_DETAIL_NEAR_MISSES(X)                                                                                   \
  X(runbefore_pass) X(run_beforepass) X(runbeforepass) X(RunBeforePass) X(before_pass) X(run_before) X(run_before_passes) \
  X(runafter_pass) X(run_afterpass) X(runafterpass) X(RunAfterPass) X(after_pass) X(run_after) X(run_after_passes)     \
  X(shouldrun) X(ShouldRun) X(should_run_pass)                                                                       \
  X(enter_pass_context) X(enterpass_ctx) X(enter_passctx) X(enter_ctx) X(enter_context) X(EnterPassContext)           \
  X(exit_pass_context) X(exitpass_ctx) X(exit_passctx) X(exit_ctx) X(exit_context) X(ExitPassContext)                 \
  X(run_before_skip_pass) X(run_before_skipped) X(run_skipped_pass) X(run_after_failed_pass) X(run_after_pass_fail)    \
  X(run_after_failed)
KILN_DETAIL_NEAR_MISSES(KILN_DETAIL_NEAR_MISS)
#define KILN_DETAIL_OR_HAS(NAME) || has_member_##NAME<I>
template <class I>
constexpr bool has_misspelt_hook = false KILN_DETAIL_NEAR_MISSES(KILN_DETAIL_OR_HAS);
#undef KILN_DETAIL_OR_HAS
#undef KILN_DETAIL_NEAR_MISSES
#undef KILN_DETAIL_NEAR_MISS

/// Checks a would-be instrument and says what is wrong with it.
template <class I, class M>
constexpr bool check_instrument() {
  static_assert(!names_enter_pass_ctx<I> || has_enter_pass_ctx<I>,
                "kiln instrument: enter_pass_ctx must be callable with no arguments");
  static_assert(!names_exit_pass_ctx<I> || has_exit_pass_ctx<I>,
                "kiln instrument: exit_pass_ctx must be callable with no arguments");
  static_assert(!names_should_run<I> || has_should_run<I, M>,
                "kiln instrument: should_run must take (const kiln::module_view&, const kiln::pass_info&) or "
                "(const kiln::pass_info&) and return bool or kiln::skip_reason");
  static_assert(!names_run_before_pass<I> || has_run_before_pass<I, M>,
                "kiln instrument: run_before_pass must take (const kiln::module_view&, const kiln::pass_info&) or "
                "(const kiln::pass_info&)");
  static_assert(!names_run_after_pass<I> || has_run_after_pass<I, M>,
                "kiln instrument: run_after_pass must take (const kiln::module_view&, const kiln::pass_info&) or "
                "(const kiln::pass_info&)");
  static_assert(!names_run_before_skipped_pass<I> || has_run_before_skipped_pass<I, M, skip_reason>,
                "kiln instrument: run_before_skipped_pass must take (const kiln::module_view&, const "
                "kiln::pass_info&, kiln::skip_reason) or (const kiln::pass_info&, kiln::skip_reason)");
  static_assert(!names_run_after_pass_failed<I> || has_run_after_pass_failed<I, M, const pass_error&>,
                "kiln instrument: run_after_pass_failed must take (const kiln::module_view&, const "
                "kiln::pass_info&, const kiln::pass_error&) or (const kiln::pass_info&, const kiln::pass_error&)");
  static_assert(hooks_of<I, M>() == 0 || !has_misspelt_hook<I>,
                "kiln instrument: a member's name is a misspelling of a hook (such as run_afterpass, "
                "run_before_passes, enter_pass_context, ShouldRun or after_pass), which would never be called: "
                "the hooks are enter_pass_ctx, exit_pass_ctx, should_run, run_before_pass, run_after_pass, "
                "run_before_skipped_pass and run_after_pass_failed");
  static_assert(hooks_of<I, M>() != 0,
                "kiln instrument: the type has none of the hooks enter_pass_ctx, exit_pass_ctx, should_run, "
                "run_before_pass, run_after_pass, run_before_skipped_pass, run_after_pass_failed");
  return true;
}

/// should_run's answer as a skip_reason (`none`: run it).
template <class I, class M>
skip_reason ask_should_run(I& i, const M& m, const pass_info& info) {
  using result = decltype(call_should_run(i, m, info));
  if constexpr (std::is_same_v<std::remove_cvref_t<result>, skip_reason>) {
    return call_should_run(i, m, info);
  } else {
    static_assert(std::is_convertible_v<result, bool>, "kiln instrument: should_run must return bool or kiln::skip_reason");
    return call_should_run(i, m, info) ? skip_reason::none : skip_reason::should_run;
  }
}

template <class T>
struct unwrap_instrument {
  using type = T;
  static T& get(T& t) noexcept { return t; }
};
template <class T>
struct unwrap_instrument<std::reference_wrapper<T>> {
  using type = T;
  static T& get(std::reference_wrapper<T> t) noexcept { return t.get(); }
};
template <class T>
struct unwrap_instrument<std::shared_ptr<T>> {
  using type = T;
  static T& get(const std::shared_ptr<T>& t) noexcept { return *t; }
};

}  // namespace detail

/// A run-time instrument: any subset of the hooks, given as a `T`, a `std::shared_ptr<T>` (to read
/// its results afterwards) or a `std::reference_wrapper<T>` (`std::ref`, for objects that outlive
/// the context). The hooks `T` lacks are never called.
template <class I>
concept instrument_like = std::is_class_v<typename detail::unwrap_instrument<std::remove_cvref_t<I>>::type> &&
                          (detail::hooks_of<typename detail::unwrap_instrument<std::remove_cvref_t<I>>::type, module_view>() != 0);

/// A type-erased instrument, the design's PassInstrument. Copies share the instrument.
class instrument {
public:
  template <class I>
    requires(!std::is_same_v<std::remove_cvref_t<I>, instrument>)
  instrument(I&& i) {  // NOLINT: implicit, so that {timer, printer} builds a list
    using held = std::remove_cvref_t<I>;
    using target = typename detail::unwrap_instrument<held>::type;
    static_assert(detail::check_instrument<target, module_view>());
    self_ = std::make_shared<model<held>>(std::forward<I>(i));
    hooks_ = detail::hooks_of<target, module_view>();
  }

  /// The hooks this instrument has (a set of `hook` bits).
  unsigned hooks() const noexcept { return hooks_; }
  bool has(hook h) const noexcept { return (hooks_ & unsigned(h)) != 0; }
  /// `T::name` when the instrument has one, otherwise its type's name.
  std::string_view name() const noexcept { return self_->name(); }
  /// The instrument as a `T` (the type it was made from, without shared_ptr / reference_wrapper),
  /// or null.
  template <class T>
  T* target() const noexcept {
    return static_cast<T*>(self_->target(typeid(T)));
  }

  void enter_pass_ctx() const { self_->enter(); }
  void exit_pass_ctx() const { self_->exit(); }
  skip_reason should_run(const module_view& m, const pass_info& info) const { return self_->should_run(m, info); }
  void run_before_pass(const module_view& m, const pass_info& info) const { self_->before(m, info); }
  void run_after_pass(const module_view& m, const pass_info& info) const { self_->after(m, info); }
  void run_before_skipped_pass(const module_view& m, const pass_info& info, skip_reason why) const {
    self_->skipped(m, info, why);
  }
  void run_after_pass_failed(const module_view& m, const pass_info& info, const pass_error& e) const {
    self_->failed(m, info, e);
  }

private:
  struct concept_ {
    virtual ~concept_() = default;
    virtual std::string_view name() const noexcept = 0;
    virtual void* target(const std::type_info&) noexcept = 0;
    virtual void enter() = 0;
    virtual void exit() = 0;
    virtual skip_reason should_run(const module_view&, const pass_info&) = 0;
    virtual void before(const module_view&, const pass_info&) = 0;
    virtual void after(const module_view&, const pass_info&) = 0;
    virtual void skipped(const module_view&, const pass_info&, skip_reason) = 0;
    virtual void failed(const module_view&, const pass_info&, const pass_error&) = 0;
  };

  template <class Held>
  struct model final : concept_ {
    using unwrap = detail::unwrap_instrument<Held>;
    using target_type = typename unwrap::type;
    template <class I>
    explicit model(I&& i) : held(std::forward<I>(i)) {}
    target_type& get() noexcept { return unwrap::get(held); }

    std::string_view name() const noexcept override {
      if constexpr (requires { std::string_view(target_type::name); }) {
        return target_type::name;
      } else {
        static const std::string type_name = boost::core::demangle(typeid(target_type).name());
        return type_name;
      }
    }
    void* target(const std::type_info& t) noexcept override {
      return t == typeid(target_type) ? static_cast<void*>(&get()) : nullptr;
    }
    void enter() override {
      if constexpr (detail::has_enter_pass_ctx<target_type>) get().enter_pass_ctx();
    }
    void exit() override {
      if constexpr (detail::has_exit_pass_ctx<target_type>) get().exit_pass_ctx();
    }
    skip_reason should_run(const module_view& m, const pass_info& info) override {
      if constexpr (detail::has_should_run<target_type, module_view>)
        return detail::ask_should_run(get(), m, info);
      else
        return skip_reason::none;
    }
    void before(const module_view& m, const pass_info& info) override {
      if constexpr (detail::has_run_before_pass<target_type, module_view>) detail::call_run_before_pass(get(), m, info);
    }
    void after(const module_view& m, const pass_info& info) override {
      if constexpr (detail::has_run_after_pass<target_type, module_view>) detail::call_run_after_pass(get(), m, info);
    }
    void skipped(const module_view& m, const pass_info& info, skip_reason why) override {
      if constexpr (detail::has_run_before_skipped_pass<target_type, module_view, skip_reason>)
        detail::call_run_before_skipped_pass(get(), m, info, why);
    }
    void failed(const module_view& m, const pass_info& info, const pass_error& e) override {
      if constexpr (detail::has_run_after_pass_failed<target_type, module_view, const pass_error&>)
        detail::call_run_after_pass_failed(get(), m, info, e);
    }

    Held held;
  };

  std::shared_ptr<concept_> self_;
  unsigned hooks_ = 0;
};

}  // namespace kiln
