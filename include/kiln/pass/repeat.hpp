// SPDX-License-Identifier: Apache-2.0
/// \file
/// `repeat_until_fixed<MaxIterations, Passes...>`: runs the pipeline of `Passes` again and again
/// until an iteration changes nothing, or `MaxIterations` iterations have run (a fixed-point
/// combinator, as canonicalization loops in MLIR and LLVM run to a fixed point).
///
/// \code
/// using simplify = kiln::repeat_until_fixed<4, fold_constant, eliminate_common_subexpr, dead_code_elimination>;
/// ir::ir_module out = kiln::run(simplify{}, m, ctx);
/// ctx.statistics().at("repeat_until_fixed").at("iterations");   // how many ran, over all runs
/// \endcode
///
/// "Changed nothing" is cheap to tell: a pass that changes nothing returns the module object it was
/// given, so an iteration is a fixed point when `module_traits<M>::same(before, after)`. A pass that
/// rebuilds an equal module every time never reaches it, and stops at `MaxIterations`.
///
/// Each iteration runs `sequential<Passes...>` under the full protocol: run-time instruments see
/// it once per iteration (its count of calls in `pass_timing` is the number of iterations), and
/// the enabled rule gates its steps. The context's statistic `iterations` of this pass counts the
/// iterations, and `hit_limit` the runs that stopped at `MaxIterations` without a fixed point.
/// Compile-time policies given to the outer run do not reach inside (a module pass receives none).
#pragma once

#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>
#include <kiln/support/fixed_string.hpp>

#include <cstdint>

namespace kiln {

template <fixed_string Name, int MaxIterations, class... Passes>
struct named_repeat_until_fixed {
  static_assert(MaxIterations >= 1, "kiln::repeat_until_fixed: MaxIterations must be at least 1");
  static_assert(sizeof...(Passes) >= 1, "kiln::repeat_until_fixed: give it at least one pass to repeat");
  static constexpr std::string_view name = Name.view();
  static constexpr int opt_level = 0;
  static constexpr int max_iterations = MaxIterations;
  /// The pipeline run each iteration.
  using body = sequential<Passes...>;
  /// Whether analysis `A`'s results stay true through it: through each pass repeated.
  template <class A>
  static constexpr bool keeps_analysis = preserves_analysis<body, A>;

  template <module_like Module>
  Module operator()(const Module& m, pass_context& ctx) const {
    Module cur = m;
    int i = 0;
    try {
      while (i < MaxIterations) {
        Module next = kiln::run(body{}, cur, ctx);
        ++i;
        if (module_traits<Module>::same(next, cur)) {
          ctx.statistic(name, "iterations") += static_cast<std::uint64_t>(i);
          return next;
        }
        cur = std::move(next);
      }
    } catch (...) {
      ctx.statistic(name, "iterations") += static_cast<std::uint64_t>(i);  // those that completed
      throw;
    }
    ctx.statistic(name, "iterations") += static_cast<std::uint64_t>(i);
    ++ctx.statistic(name, "hit_limit");
    return cur;
  }
};

/// `named_repeat_until_fixed` named `repeat_until_fixed`.
template <int MaxIterations, class... Passes>
using repeat_until_fixed = named_repeat_until_fixed<"repeat_until_fixed", MaxIterations, Passes...>;

}  // namespace kiln
