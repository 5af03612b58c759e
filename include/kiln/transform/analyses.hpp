// SPDX-License-Identifier: Apache-2.0
/// \file
/// The analyses kiln's passes share through the pass context's cache (`kiln/pass/analysis.hpp`),
/// each computed once per function object:
/// - `liveness`: the lifetimes of a function's top-level values, with aliasing and escapes
///   (`detail::value_lifetimes`); memory planning and `kill_after_last_use` decide from it;
/// - `use_counts`: how many times each variable is used; the binding rewriters behind the fusion
///   passes start from it.
///
/// \code
/// std::shared_ptr<const kiln::transform::use_counts::result_type> uses = ctx.analysis<kiln::transform::use_counts>(f);
/// \endcode
///
/// A function a pass leaves alone (the same object) keeps its results through that pass.
#pragma once

#include <kiln/ir/function.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/pass/analysis.hpp>
#include <kiln/transform/detail/lifetimes.hpp>

#include <cstddef>
#include <string_view>
#include <unordered_map>

namespace kiln::transform {

/// The lifetimes of a function's top-level values (see `detail/lifetimes.hpp`).
struct liveness {
  static constexpr std::string_view name = "liveness";
  detail::value_lifetimes run(const ir::function& f) const { return detail::value_lifetimes(f); }
};

/// How many times each variable occurs in a function's body (branches included).
struct use_counts {
  static constexpr std::string_view name = "use_counts";
  using result_type = std::unordered_map<const ir::var_node*, std::size_t>;
  result_type run(const ir::function& f) const {
    result_type uses;
    ir::post_order_visit(f->body, [&](const ir::expr& x) {
      if (auto* v = ir::dyn_cast<ir::var_node>(x)) ++uses[v];
    });
    return uses;
  }
};

}  // namespace kiln::transform
