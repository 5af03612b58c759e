// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::pass<Module>`: a type-erased pass value that wraps any compile-time pass or pipeline, so
/// that pipelines can also be assembled at run time (the design's `Pass` object).
///
/// \code
/// kiln::pass<ir::ir_module> p = fold_constant{};      // any pass type, or a kiln::sequential
/// ir::ir_module out = p(module, ctx);                  // the full protocol, as kiln::run
/// \endcode
///
/// Copies share the wrapped pass. Running costs one indirect call over the static form; the
/// wrapped pass itself runs exactly as it would statically.
#pragma once

#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/pass_info.hpp>
#include <kiln/pass/registry.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace kiln {

template <module_like Module>
class pass;

namespace detail {

template <class T>
struct is_erased_pass : std::false_type {};
template <class Module>
struct is_erased_pass<pass<Module>> : std::true_type {};

/// What every run-time pass provides. Implemented for static passes here and for run-time
/// pipelines in `pipeline.hpp`.
template <class Module>
struct erased_pass_model {
  virtual ~erased_pass_model() = default;
  virtual const pass_info& info() const noexcept = 0;
  /// The protocol of `run.hpp` with `gate` already decided by the caller.
  virtual Module run(const Module& m, pass_context& ctx, skip_reason gate) = 0;
  /// Runs the pass when the context has no names and no instruments and enables it: only the
  /// failure handling of the protocol applies.
  virtual Module run_direct(const Module& m, pass_context& ctx) = 0;
  /// After `run_direct` turned `in` into `out`, when analyses are cached: drops those the pass does
  /// not preserve (nothing for a pipeline: its steps did). Apart from `run_direct`, so that a pass's
  /// code stays a leaf function when nothing is cached.
  virtual void invalidate_after_direct(const Module& in, const Module& out, pass_context& ctx) = 0;
  /// The textual form (`name`, or `name(a,b)` for a pipeline).
  virtual std::string text() const = 0;
  /// The resolved steps of a pipeline; a single pass is one step.
  virtual std::vector<pipeline_step> steps() const = 0;
  /// The wrapped static pass's type (typeid(void) for run-time pipelines).
  virtual const std::type_info& type() const noexcept = 0;
  /// For a property in `info().needs`: the innermost step that needs it from the input (a
  /// single pass: itself).
  virtual std::string needed_by(std::string_view property) const {
    (void)property;
    return std::string(info().name);
  }
};

template <class Module, class Pass>
struct static_pass_model final : erased_pass_model<Module> {
  explicit static_pass_model(Pass p) : wrapped(std::move(p)) {}
  const pass_info& info() const noexcept override { return pass_info_of<Pass, Module>; }
  Module run(const Module& m, pass_context& ctx, skip_reason gate) override { return run_protocol(wrapped, m, ctx, gate); }
  Module run_direct(const Module& m, pass_context& ctx) override {
    auto body = [&]() -> Module { return apply_pass<false>(wrapped, m, ctx); };
    return run_body<is_sequential_type<Pass>>(pass_info_of<Pass, Module>, body, m, ctx);
  }
  void invalidate_after_direct(const Module& in, const Module& out, pass_context& ctx) override {
    if constexpr (!is_sequential_type<Pass>) invalidate_analyses<preserved_analyses_of<Pass>>(ctx, in, out);
  }
  std::string text() const override {
    if constexpr (is_sequential_type<Pass>)
      return Pass::element_text();
    else
      return std::string(Pass::name);
  }
  std::vector<pipeline_step> steps() const override {
    if constexpr (is_sequential_type<Pass>)
      return Pass::steps();
    else
      return {pipeline_step{Pass::name, false}};
  }
  std::string needed_by(std::string_view property) const override {
    if constexpr (requires { Pass::first_unmet_property; Pass::first_unmet_pass; })
      if (property == Pass::first_unmet_property) return std::string(Pass::first_unmet_pass);
    return std::string(Pass::name);
  }
  const std::type_info& type() const noexcept override { return typeid(Pass); }
  Pass wrapped;
};

}  // namespace detail

/// A pass of any kind, type-erased, running on modules of type `Module`.
template <module_like Module>
class pass {
public:
  using module_type = Module;

  /// Wraps a compile-time pass or pipeline (copied or moved in).
  template <class Pass>
    requires(!detail::is_erased_pass<std::remove_cvref_t<Pass>>::value &&
             !std::is_convertible_v<Pass, std::shared_ptr<detail::erased_pass_model<Module>>>)
  pass(Pass&& p)  // NOLINT: implicit, so that a list of passes builds a pipeline
      : self_(std::make_shared<detail::static_pass_model<Module, std::remove_cvref_t<Pass>>>(std::forward<Pass>(p))) {
    static_assert(pass_for<std::remove_cvref_t<Pass>, Module>,
                  "kiln::pass<Module>: the value is not a pass that can run on this module type (see kiln::pass_like "
                  "and the call shapes in kiln/pass/pass_info.hpp)");
  }
  explicit pass(std::shared_ptr<detail::erased_pass_model<Module>> model) : self_(std::move(model)) {}

  const pass_info& info() const noexcept { return self_->info(); }
  std::string_view name() const noexcept { return info().name; }
  /// `name`, or `name(a,b)` for a pipeline; parse_pipeline reads it back.
  std::string text() const { return self_->text(); }
  std::vector<pipeline_step> steps() const { return self_->steps(); }
  /// For a property the pass needs from its input: the innermost step that needs it.
  std::string needed_by(std::string_view property) const { return self_->needed_by(property); }
  /// The compile-time pass it wraps, or null (another type, or a run-time pipeline).
  template <class Pass>
  Pass* target() const noexcept {
    if (self_->type() != typeid(Pass)) return nullptr;
    return &static_cast<detail::static_pass_model<Module, Pass>&>(*self_).wrapped;
  }

  /// Runs the pass on `m` in `ctx` (instruments, failure handling). As in TVM, a pass called
  /// directly runs whatever its opt level or the context's disabled names; a pipeline applies
  /// that rule to its steps.
  ///
  /// First, before any pass runs, the properties it needs from its input (`info().needs`: for a
  /// pipeline, those no earlier step establishes) are checked on `m` with their checkers; one that
  /// does not hold is a `usage_error` naming the pass that needs it, what is wrong, and the
  /// registered passes that establish it. (A compile-time pipeline refuses the same thing when it
  /// is compiled; a run-time one can only know its input when it runs.)
  Module operator()(const Module& m, pass_context& ctx) const {
    if (!info().needs.empty()) [[unlikely]]
      check_input(m);
    return self_->run(m, ctx, skip_reason::none);
  }
  Module operator()(const Module& m) const { return (*this)(m, pass_context::current()); }

  /// For pipelines: runs the protocol with the enabled decision already made.
  Module run_gated(const Module& m, pass_context& ctx, skip_reason gate) const { return self_->run(m, ctx, gate); }
  /// For pipelines, when the context enables everything and has no instruments; then, when
  /// analyses are cached, the invalidation after it.
  Module run_direct(const Module& m, pass_context& ctx) const { return self_->run_direct(m, ctx); }
  void invalidate_after_direct(const Module& in, const Module& out, pass_context& ctx) const {
    self_->invalidate_after_direct(in, out, ctx);
  }

  /// The check `operator()` makes before running; `usage_error` when the input lacks a property
  /// the pass needs. Out of line: a pass that needs nothing pays only for the test of `needs`.
  [[gnu::noinline]] void check_input(const Module& m) const {
    for (const property_check& need : info().needs) {
      if (!need.check) continue;  // nothing to check it with; verify_ir may catch what follows
      const std::vector<std::string> problems = need.check(module_view(m));
      if (problems.empty()) continue;
      const std::string by = needed_by(need.name);
      std::string msg = "kiln: ";
      if (info().kind == pass_kind::sequential && by != info().name) msg.append("pipeline '").append(info().name).append("': ");
      msg.append("pass '").append(by).append("' needs property '").append(need.name).append("', which ");
      msg.append(info().kind == pass_kind::sequential ? "no earlier pass of the pipeline establishes and " : "").append("the input module does not have (");
      msg.append(problems.front());
      if (problems.size() > 1) msg.append(", and ").append(std::to_string(problems.size() - 1)).append(" more");
      msg.append(")");
      const std::vector<std::string> fix = pass_registry<Module>::global().establishing(need.name);
      if (fix.empty()) {
        msg.append("; no registered pass establishes it");
      } else {
        msg.append("; run ");
        for (std::size_t i = 0; i < fix.size(); ++i) msg.append(i ? " or '" : "'").append(fix[i]).append("'");
        msg.append(" before it");
      }
      throw usage_error(msg);
    }
  }

private:
  std::shared_ptr<detail::erased_pass_model<Module>> self_;
};

/// Prints `p.text()`: `fold_constant`, or `name(a,b)` for a pipeline (what `parse_pipeline` reads).
template <module_like Module>
std::ostream& operator<<(std::ostream& os, const pass<Module>& p) {
  return os << p.text();
}

}  // namespace kiln
