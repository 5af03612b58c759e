// SPDX-License-Identifier: Apache-2.0
/// \file
/// Running one pass: the design's `Pass::operator()` — the enabled check, the instrument protocol
/// (see `instrument.hpp`), failure handling — and `kiln::run`, the entry point.
///
/// Instruments come from two places: compile-time policies given to `run` (called directly, their
/// absent hooks generate nothing) and the context's run-time list (type-erased; each hook costs a
/// load and a test of a bit mask when no instrument has it).
///
/// \code
/// ir_module out = kiln::run(pipeline, module);                 // current context, no policies
/// ir_module out = kiln::run(pipeline, module, ctx, timer);     // a timing policy, ctx's instruments
/// \endcode
#pragma once

#include <kiln/pass/detail/parallel_map.hpp>
#include <kiln/pass/diagnostics.hpp>
#include <kiln/pass/instrument.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/pass_info.hpp>

#include <exception>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kiln {

namespace detail {

/// What a function or kernel-function pass does to one function: functions marked
/// SkipOptimization are left as they are.
template <class Pass, module_like Module>
auto function_step(Pass& p, const Module& m, pass_context& ctx) {
  using traits = module_traits<Module>;
  return [&p, &m, &ctx](std::string_view, const auto& f) -> std::remove_cvref_t<decltype(f)> {
    using function = std::remove_cvref_t<decltype(f)>;
    if constexpr (requires { traits::skip_optimization(f); })
      if (traits::skip_optimization(f)) return f;
    if constexpr (requires { p(f, m, ctx); })
      return p(f, m, ctx);
    else
      return function(p(f));
  };
}

/// A function or kernel-function pass with its functions on the context's threads (`parallel_map`).
/// Out of line and cold, so that the run in order, the default, pays one load and compare for it.
template <pass_kind Kind, class Pass, module_like Module>
[[gnu::cold, gnu::noinline]] Module apply_in_parallel(Pass& p, const Module& m, pass_context& ctx) {
  using traits = module_traits<Module>;
  auto each = function_step(p, m, ctx);
  if constexpr (Kind == pass_kind::function)
    return parallel_map<typename traits::function_type>(
        m, ctx, [](const Module& mod, auto&& fn) { return traits::map_functions(mod, fn); }, each);
  else
    return parallel_map<typename traits::kernel_function_type>(
        m, ctx, [](const Module& mod, auto&& fn) { return traits::map_kernel_functions(mod, fn); }, each);
}

/// A module, function or kernel-function pass's transformation of `m`.
template <bool Threads, class Pass, module_like Module>
Module transform(Pass& p, const Module& m, pass_context& ctx) {
  using traits = module_traits<Module>;
  constexpr pass_kind kind = pass_kind_of<std::remove_const_t<Pass>, Module>();
  if constexpr (kind == pass_kind::module) {
    if constexpr (requires { p(m, ctx); })
      return p(m, ctx);
    else
      return p(m);
  } else {
    // Function and kernel-function passes see each function of their kind in turn, on several
    // threads when the context asks for it (and not already inside such a task). They cannot add
    // or remove functions.
    if constexpr (Threads && thread_safe_of<std::remove_const_t<Pass>>)
      if (ctx.num_threads() > 1) [[unlikely]]
        return apply_in_parallel<kind>(p, m, ctx);
    if constexpr (kind == pass_kind::function)
      return traits::map_functions(m, function_step(p, m, ctx));
    else
      return traits::map_kernel_functions(m, function_step(p, m, ctx));
  }
}

/// Runs the pass's transformation on the module, by kind, without any protocol. `Threads`: whether
/// to look at the context's thread count; the pipelines' direct path (taken only when the count is
/// 1, see `pass_context::runs_everything_up_to`) does not, so that it costs nothing there.
template <bool Threads = true, class Pass, module_like Module, class... Policies>
Module apply_pass(Pass& p, const Module& m, pass_context& ctx, Policies&... policies) {
  constexpr pass_kind kind = pass_kind_of<std::remove_const_t<Pass>, Module>();
  if constexpr (kind == pass_kind::sequential) {
    return p.run_steps(m, ctx, policies...);
  } else {
    return transform<Threads>(p, m, ctx);
  }
}

// The hooks that only tell (all but should_run), each as a tag: its bit, whether a policy has it,
// and how to call it (one call serves policies, with the typed module, and run-time instruments,
// with the module_view).
struct before_pass_hook {
  static constexpr hook bit = hook::run_before_pass;
  template <class P, class M>
  static constexpr bool in = has_run_before_pass<P, M>;
  template <class I, class M>
  static void call(I& i, const M& m, const pass_info& info) {
    call_run_before_pass(i, m, info);
  }
};
struct after_pass_hook {
  static constexpr hook bit = hook::run_after_pass;
  template <class P, class M>
  static constexpr bool in = has_run_after_pass<P, M>;
  template <class I, class M>
  static void call(I& i, const M& m, const pass_info& info) {
    call_run_after_pass(i, m, info);
  }
};
struct skipped_pass_hook {
  static constexpr hook bit = hook::run_before_skipped_pass;
  template <class P, class M>
  static constexpr bool in = has_run_before_skipped_pass<P, M, skip_reason>;
  template <class I, class M>
  static void call(I& i, const M& m, const pass_info& info, skip_reason why) {
    call_run_before_skipped_pass(i, m, info, why);
  }
};
struct failed_pass_hook {
  static constexpr hook bit = hook::run_after_pass_failed;
  template <class P, class M>
  static constexpr bool in = has_run_after_pass_failed<P, M, const pass_error&>;
  template <class I, class M>
  static void call(I& i, const M& m, const pass_info& info, const pass_error& e) {
    call_run_after_pass_failed(i, m, info, e);
  }
};

/// Calls `Hook` on the policies that have it, then on the context's instruments that have it, in
/// order. Absent policy hooks generate nothing; the run-time list costs one bit test when no
/// instrument has the hook.
template <class Hook, class Module, class... Policies, class... Extra>
void notify(std::tuple<Policies&...> policies, pass_context& ctx, const Module& m, const pass_info& info,
            const Extra&... extra) {
  std::apply(
      [&](auto&... p) {
        (
            [&] {
              if constexpr (Hook::template in<std::remove_cvref_t<decltype(p)>, Module>) Hook::call(p, m, info, extra...);
            }(),
            ...);
      },
      policies);
  if (ctx.has_hook(Hook::bit)) [[unlikely]] {
    module_view v(m);
    for (const instrument& i : ctx.instruments())
      if (i.has(Hook::bit)) Hook::call(i, v, info, extra...);
  }
}

/// Whether the instruments let the pass run: every `should_run` is asked, policies first, then the
/// context's instruments, in order and with no short-circuit (as TVM's InstrumentBeforePass
/// does), so that an instrument after one that says no still sees the pass. Returns the first
/// objection, or `none`. Not asked for passes the context requires by name.
template <class Module, class... Policies>
skip_reason ask_instruments(const Module& m, const pass_info& info, pass_context& ctx, Policies&... policies) {
  constexpr bool policies_ask = (has_should_run<Policies, Module> || ...);
  if (!policies_ask && !ctx.has_hook(hook::should_run)) return skip_reason::none;
  if (ctx.is_required(info.name)) return skip_reason::none;
  skip_reason why = skip_reason::none;
  auto note = [&](skip_reason r) {
    if (why == skip_reason::none) why = r;
  };
  (
      [&] {
        if constexpr (has_should_run<Policies, Module>) note(ask_should_run(policies, m, info));
      }(),
      ...);
  if (ctx.has_hook(hook::should_run)) {
    module_view v(m);
    for (const instrument& i : ctx.instruments())
      if (i.has(hook::should_run)) note(i.should_run(v, info));
  }
  return why;
}

/// Stamps the diagnostics reported since `first` with the pass's name.
inline void stamp_diagnostics(pass_context& ctx, std::size_t first, std::string_view pass) {
  auto& all = const_cast<std::vector<diagnostic>&>(ctx.diagnostics());
  for (std::size_t i = first; i < all.size(); ++i)
    if (all[i].pass.empty()) all[i].pass = std::string(pass);
}

inline std::vector<diagnostic> diagnostics_since(const pass_context& ctx, std::size_t first) {
  const auto& all = ctx.diagnostics();
  return {all.begin() + static_cast<std::ptrdiff_t>(first), all.end()};
}

/// A pass failed: stamps and collects its diagnostics, tells the instruments, makes the error.
template <class Module, class... Policies>
[[gnu::cold]] pass_error make_pass_error(const pass_info& info, std::string reason, const Module& m, pass_context& ctx,
                                         std::size_t first_diagnostic, Policies&... policies) {
  stamp_diagnostics(ctx, first_diagnostic, info.name);
  pass_error e(std::string(info.name), std::move(reason), diagnostics_since(ctx, first_diagnostic));
  notify<failed_pass_hook>(std::tie(policies...), ctx, m, info, e);
  return e;
}

/// After a pass reported something: stamps the reports with its name, and fails when one is an
/// error.
template <class Module, class... Policies>
[[gnu::cold]] void check_reports(const pass_info& info, const Module& m, pass_context& ctx, std::size_t first_diagnostic,
                                 Policies&... policies) {
  stamp_diagnostics(ctx, first_diagnostic, info.name);
  const auto& all = ctx.diagnostics();
  std::string reason;
  bool failed = false;
  for (std::size_t i = first_diagnostic; i < all.size() && !failed; ++i)
    if (all[i].severity == severity::error) {
      failed = true;
      reason = all[i].message;
    }
  if (!failed) return;  // warnings and notes only
  throw make_pass_error(info, std::move(reason), m, ctx, first_diagnostic, policies...);
}

/// After a pass (not a pipeline: its steps do it) turned `in` into `out`, the analysis cache drops
/// what the pass does not preserve. Called by the protocol and by the pipelines' direct paths,
/// outside the pass's own code and after testing `ctx.analyses().empty()` (a load and a test):
/// inside `apply_pass` it tipped GCC into calling passes out of line, and inside a pass's code it
/// costs that code its leaf-function form (20-60 and 8-10 instructions per pass, measured).
template <class Preserved, class Module>
[[gnu::cold, gnu::noinline]] void invalidate_analyses(pass_context& ctx, const Module& in, const Module& out) {
  ctx.analyses().template after_pass<Preserved>(in, out);
}

/// Runs the pass's body and turns failure into a `pass_error`: an exception it throws, or an error
/// it reports through the context. What the run costs when nothing goes wrong: loading the number
/// of diagnostics before and after, and a compare; the exception handling is table-driven.
///
/// The exception the body threw stays available: the `pass_error` is thrown with
/// `std::throw_with_nested`, so `std::rethrow_if_nested(e)` rethrows the original (a
/// `std::invalid_argument` stays one). A `pass_error` from a pass run inside the body (a pipeline's
/// step, or a pass a pass calls) is passed on, not wrapped: it names the pass that failed, and
/// this one joins its path (`pass_error::pipeline`).
template <bool IsPipeline, module_like Module, class Body, class... Policies>
Module run_body(const pass_info& info, Body& body, const Module& m, pass_context& ctx, Policies&... policies) {
  const std::size_t first_diagnostic = ctx.diagnostics().size();
  Module out = [&]() -> Module {
    try {
      return body();
    } catch (pass_error& e) {
      notify<failed_pass_hook>(std::tie(policies...), ctx, m, info, e);
      e.add_pipeline(info.name);
      throw;
    } catch (const std::exception& e) {
      // In a pipeline, anything but a pass_error comes from an instrument or the context, not a
      // pass: it leaves untouched.
      if constexpr (IsPipeline) throw;
      else std::throw_with_nested(make_pass_error(info, e.what(), m, ctx, first_diagnostic, policies...));
    } catch (...) {
      if constexpr (IsPipeline) throw;
      else
        std::throw_with_nested(make_pass_error(info, "it threw an exception that is not a std::exception", m, ctx,
                                               first_diagnostic, policies...));
    }
  }();
  if (ctx.diagnostics().size() != first_diagnostic) [[unlikely]]
    check_reports(info, m, ctx, first_diagnostic, policies...);
  return out;
}

/// `run_body` under TVM's `testing.immutable_module` check: the input module's structural hash
/// before and after the pass must agree, or the pass fails, named.
template <bool IsPipeline, module_like Module, class Body, class... Policies>
[[gnu::noinline]] Module run_body_immutable(const pass_info& info, Body& body, const Module& m, pass_context& ctx,
                                            Policies&... policies) {
  using traits = module_traits<Module>;
  if constexpr (requires { traits::structural_hash(m); }) {
    const std::size_t before = traits::structural_hash(m);
    Module out = run_body<IsPipeline>(info, body, m, ctx, policies...);
    if (traits::structural_hash(m) != before)
      throw make_pass_error(info,
                            "it modified the module it was given (testing.immutable_module: the structural hash of "
                            "its input changed)",
                            m, ctx, ctx.diagnostics().size(), policies...);
    return out;
  } else {
    throw usage_error("kiln: testing.immutable_module is set, but module_traits<" + std::string(ir_name_of<Module>()) +
                      "> has no structural_hash to check it with");
  }
}

/// The design's Pass::operator(): runs `p` on `m` under the instrument protocol, unless `gate`
/// (the enabled check, made by the caller) says why it must not run.
///
/// `Body` runs the pass (`body() -> Module`); `IsPipeline` says whether the pass is a pipeline of
/// other passes (whose failures it passes on rather than wraps); `Preserved`, the analyses a pass
/// that is not one preserves.
template <bool IsPipeline, class Preserved = preserves<>, module_like Module, class Body, class... Policies>
Module run_protocol_with(const pass_info& info, Body&& body, const Module& m, pass_context& ctx, skip_reason gate,
                         Policies&... policies) {
  if constexpr (sizeof...(Policies) == 0)
    if (gate == skip_reason::none && !ctx.has_instruments()) [[likely]] {  // nobody to ask or tell
      Module out = run_body<IsPipeline>(info, body, m, ctx);
      if constexpr (!IsPipeline)
        if (!ctx.analyses().empty()) [[unlikely]]
          invalidate_analyses<Preserved>(ctx, m, out);
      return out;
    }
  if (gate == skip_reason::none) [[likely]]
    gate = ask_instruments(m, info, ctx, policies...);
  if (gate != skip_reason::none) [[unlikely]] {
    notify<skipped_pass_hook>(std::tie(policies...), ctx, m, info, gate);
    return m;
  }

  notify<before_pass_hook>(std::tie(policies...), ctx, m, info);

  Module out = ctx.checks_immutable_module() ? run_body_immutable<IsPipeline>(info, body, m, ctx, policies...)
                                             : run_body<IsPipeline>(info, body, m, ctx, policies...);
  if constexpr (!IsPipeline)
    if (!ctx.analyses().empty()) [[unlikely]]
      invalidate_analyses<Preserved>(ctx, m, out);

  notify<after_pass_hook>(std::tie(policies...), ctx, out, info);
  return out;
}

/// `run_protocol_with` for a compile-time pass.
template <class Pass, module_like Module, class... Policies>
Module run_protocol(Pass& p, const Module& m, pass_context& ctx, skip_reason gate, Policies&... policies) {
  using pass_type = std::remove_const_t<Pass>;
  constexpr bool is_pipeline = pass_kind_of<pass_type, Module>() == pass_kind::sequential;
  return run_protocol_with<is_pipeline, preserved_analyses_of<pass_type>>(
      pass_info_of<pass_type, Module>, [&]() -> Module { return apply_pass(p, m, ctx, policies...); }, m, ctx, gate,
      policies...);
}

/// Brackets a run with the compile-time policies' `enter_pass_ctx` / `exit_pass_ctx`, under the
/// rules `pass_context_scope` applies to run-time instruments:
/// - enter calls each policy's `enter_pass_ctx` in order; when one throws, the policies that had
///   entered exit, in order (their exceptions dropped), and the enter's exception propagates;
/// - the end of the run calls each `exit_pass_ctx` in order; when one throws after the run
///   succeeded, the exception propagates and the later policies do not exit; when the run itself
///   is failing, the exits' exceptions are dropped so that the run's reaches the caller.
template <class... Policies>
class policy_scope {
public:
  explicit policy_scope(Policies&... p) : policies_(p...) {
    if constexpr ((has_enter_pass_ctx<Policies> || ...)) {
      try {
        std::apply([&](auto&... q) { (enter_one(q), ...); }, policies_);
      } catch (...) {
        std::apply([&](auto&... q) { (exit_quietly(q, entered_), ...); }, policies_);
        entered_ = 0;
        failed_ = true;
        throw;
      }
    } else {
      entered_ = sizeof...(Policies);
    }
  }
  policy_scope(const policy_scope&) = delete;
  policy_scope& operator=(const policy_scope&) = delete;

  /// The end of a successful run: each `exit_pass_ctx` in order; one that throws propagates and the
  /// later ones do not run. (Called explicitly, not from the destructor, so that the run's result
  /// is an ordinary local when an exit throws: Clang before 16 leaks a returned object when a
  /// destructor throws after it was constructed, CWG 2176.)
  void close() {
    closed_ = true;
    if constexpr ((has_exit_pass_ctx<Policies> || ...)) std::apply([](auto&... q) { (exit_one(q), ...); }, policies_);
  }
  /// Without `close`, the run is failing: every policy exits, quietly, so that the run's exception
  /// reaches the caller.
  ~policy_scope() {
    if constexpr ((has_exit_pass_ctx<Policies> || ...)) {
      if (failed_ || closed_) return;
      std::size_t left = sizeof...(Policies);
      std::apply([&](auto&... q) { (exit_quietly(q, left), ...); }, policies_);
    }
  }

private:
  template <class P>
  void enter_one(P& p) {
    if constexpr (has_enter_pass_ctx<P>) p.enter_pass_ctx();
    ++entered_;
  }
  template <class P>
  static void exit_one(P& p) {
    if constexpr (has_exit_pass_ctx<P>) p.exit_pass_ctx();
  }
  /// Exits `p` when it is among the first `budget` policies (counted down as they go by).
  template <class P>
  static void exit_quietly(P& p, std::size_t& budget) noexcept {
    if (budget == 0) return;
    --budget;
    if constexpr (has_exit_pass_ctx<P>) {
      try {
        p.exit_pass_ctx();
      } catch (...) {  // the exception already in flight is the one to report
      }
    }
  }

  std::tuple<Policies&...> policies_;
  std::size_t entered_ = 0;
  bool failed_ = false;
  bool closed_ = false;
};

}  // namespace detail

/// Runs `pass` (a pass or a pipeline) on `module` in `ctx`, with the compile-time instrument
/// `policies` (lvalues or temporaries; called before the context's instruments; their
/// `enter_pass_ctx` / `exit_pass_ctx` bracket this run, see `detail::policy_scope`). Returns the
/// new module; `module` itself is never modified. A failing pass throws `pass_error` (with the
/// pass's own exception nested, see `detail::run_body`).
///
/// As in TVM, the enabled rule (disabled > required > opt level) applies to the steps of a
/// pipeline, not to the pass called here: it always runs, unless an instrument's `should_run`
/// vetoes it.
template <class Pass, module_like Module, class... Policies>
Module run(Pass&& pass, const Module& module, pass_context& ctx, Policies&&... policies) {
  using pass_type = std::remove_cvref_t<Pass>;
  static_assert(pass_like<pass_type>, "kiln::run: the first argument must be a pass (a class with static constexpr "
                                      "std::string_view name) or a kiln::sequential");
  static_assert((detail::check_instrument<std::remove_reference_t<Policies>, Module>() && ...));
  if constexpr (requires { pass_type::check_pipeline_input(); })
    pass_type::check_pipeline_input();  // a pipeline run as a whole must not need what nothing establishes
  detail::policy_scope<std::remove_reference_t<Policies>...> scope(policies...);
  Pass& p = pass;  // passes are called as lvalues, const ones through their const call operator
  Module out = detail::run_protocol(p, module, ctx, skip_reason::none, policies...);
  scope.close();
  return out;
}

/// Runs `pass` on `module` in the current context (`pass_context::current()`).
template <class Pass, module_like Module>
Module run(Pass&& pass, const Module& module) {
  return run(std::forward<Pass>(pass), module, pass_context::current());
}

}  // namespace kiln
