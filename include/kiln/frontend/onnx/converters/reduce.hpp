// SPDX-License-Identifier: Apache-2.0
/// \file
/// The ONNX importer's reduction converters. Reductions: ReduceSum/Mean/Max/Min/Prod/..., ArgMax/ArgMin, CumSum.
#pragma once

#include <kiln/frontend/onnx/converters/common.hpp>

namespace kiln::frontend::onnx {

namespace detail {

inline exprs reduce(node_context& c, const char* op, bool axes_as_input) {
  const int r = c.rank(0);
  std::optional<std::vector<std::int64_t>> axes;
  if (axes_as_input) {
    if (c.has_input(1)) axes = c.constant_ints(1, "axes");
  } else {
    axes = c.attr_ints("axes");
  }
  const bool keepdims = c.attr_int("keepdims", 1) != 0;
  if (axes && axes->empty()) axes.reset();
  if (!axes && axes_as_input && c.attr_int("noop_with_empty_axes", 0) != 0) return one(c.input(0));
  ir::attr_map attrs{{"keepdims", keepdims}};
  if (axes) {
    ir::int_array norm;
    for (auto a : *axes) norm.push_back(c.axis(a, r, "axis"));
    attrs.set("axis", norm);
  }
  return one(c.call(op, {c.input(0)}, attrs));
}

}  // namespace detail

/// Adds the reduction converters to `t`.
inline void add_reduce_converters(converter_table& t) {
  using namespace detail;
  for (auto [o, k] : {std::pair{"ReduceMean", "mean"}, {"ReduceMax", "max"}, {"ReduceMin", "min"}, {"ReduceProd", "prod"}}) {
    const char* kiln = k;
    t.add(o, 1, [kiln](node_context& c) { return reduce(c, kiln, false); });
    t.add(o, 18, [kiln](node_context& c) { return reduce(c, kiln, true); });
  }
  // The composed reductions: an elementwise step, a sum, another elementwise step.
  struct composed {
    const char* name;
    const char* before;  // applied to x first ("" for none; "square" multiplies x by itself)
    const char* after;   // applied to the sum
  };
  for (auto r : {composed{"ReduceSumSquare", "square", ""}, composed{"ReduceL1", "abs", ""}, composed{"ReduceL2", "square", "sqrt"},
                 composed{"ReduceLogSum", "", "log"}, composed{"ReduceLogSumExp", "exp", "log"}}) {
    auto fn = [r](bool axes_as_input) {
      return [r, axes_as_input](node_context& c) {
        ir::expr x = c.input(0);
        if (std::string_view(r.before) == "square") x = c.call("multiply", {x, x});
        else if (*r.before) x = c.call(r.before, {x});
        std::vector<ir::expr> ins{x};
        for (std::size_t i = 1; i < c.num_inputs(); ++i) ins.push_back(c.has_input(i) ? c.input(i) : ir::expr());
        node_context inner = c.with_inputs(ins);
        ir::expr y = reduce(inner, "sum", axes_as_input)[0];
        if (*r.after) y = c.call(r.after, {y});
        return one(y);
      };
    };
    t.add(r.name, 1, fn(false));
    t.add(r.name, 18, fn(true));
  }
  t.add("ReduceSum", 1, [](node_context& c) { return reduce(c, "sum", false); });
  t.add("ReduceSum", 13, [](node_context& c) { return reduce(c, "sum", true); });
  for (auto [o, k] : {std::pair{"ArgMax", "argmax"}, {"ArgMin", "argmin"}}) {
    const char* kiln = k;
    t.add(o, 1, [kiln](node_context& c) {
      const std::int64_t axis = c.axis(c.attr_int("axis", 0), c.rank(0));
      const ir::attr_map attrs{{"axis", axis}, {"keepdims", c.attr_int("keepdims", 1) != 0}};
      if (c.attr_int("select_last_index", 0) == 0) return one(c.call(kiln, {c.input(0)}, attrs));
      // The last extreme is the first one along the reversed axis: (n - 1) - argmax(reverse(x)).
      const auto n = ir::as_int(c.shape(0)[std::size_t(axis)]);
      if (!n) c.fail("select_last_index 1 needs a static length along the axis");
      const ir::expr reversed = c.call("strided_slice", {c.input(0)},
                                       {{"axes", ir::int_array{axis}},
                                        {"begin", ir::int_array{-1}},
                                        {"end", ir::int_array{std::numeric_limits<std::int64_t>::min()}},
                                        {"strides", ir::int_array{-1}}});
      return one(c.call("subtract", {c.scalar(double(*n - 1), dtype::int64), c.call(kiln, {reversed}, attrs)}));
    });
  }

}

}  // namespace kiln::frontend::onnx
