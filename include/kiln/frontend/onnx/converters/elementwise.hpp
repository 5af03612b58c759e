// SPDX-License-Identifier: Apache-2.0
/// \file
/// The ONNX importer's elementwise converters. Elementwise operators: arithmetic, comparison and logic, math functions, activations, casts, and the
/// sequence and selection operators built from them (Where, ReverseSequence, OneHot, ...).
#pragma once

#include <kiln/frontend/onnx/converters/common.hpp>

namespace kiln::frontend::onnx {

namespace detail {

inline void unary(converter_table& t, const char* onnx, const char* kiln) {
  t.add(onnx, 1, [kiln](node_context& c) { return one(c.call(kiln, {c.input(0)})); });
}
/// The right operand of a binary operator before opset 7: with `broadcast` = 1 and an `axis`,
/// B's dimensions line up with A's from that axis (A [2, 3, 4, 5], B [3, 4], axis 1), which is
/// numpy's broadcasting once B has trailing 1s; without an axis they line up at the end, as in
/// numpy. (Without `broadcast` the shapes must be equal, which numpy's rule also accepts.)
inline ir::expr legacy_broadcast_operand(node_context& c) {
  if (c.opset() >= 7 || c.attr_int("broadcast", 0) == 0 || !c.has_attr("axis")) return c.input(1);
  const int ra = c.rank(0), rb = c.rank(1);
  const std::int64_t given = c.attr_int("axis", 0), axis = given < 0 ? given + ra : given;
  if (axis < 0 || axis + rb > ra)
    c.fail(kiln::detail::concat("legacy broadcasting: axis ", given, " does not place the second operand's ", rb,
                                " dimension(s) within the first operand's ", ra));
  if (axis + rb == ra) return c.input(1);
  std::vector<ir::prim_expr> dims = c.shape(1);
  dims.resize(std::size_t(ra - axis), ir::make_int(1));
  return reshape_to(c, c.input(1), std::move(dims));
}

inline void binary(converter_table& t, const char* onnx, const char* kiln) {
  t.add(onnx, 1, [kiln](node_context& c) { return one(c.call(kiln, {c.input(0), legacy_broadcast_operand(c)})); });
}
/// Max, Min, Sum, Mean: a fold of the binary operator over every input.
inline void variadic(converter_table& t, const char* onnx, const char* kiln, bool mean = false) {
  t.add(onnx, 1, [kiln, mean](node_context& c) {
    ir::expr acc = c.input(0);
    for (std::size_t i = 1; i < c.num_inputs(); ++i) acc = c.call(kiln, {acc, c.input(i)});
    if (mean && c.num_inputs() > 1) acc = c.call("divide", {acc, c.scalar(double(c.num_inputs()), c.input_dtype(0))});
    return one(acc);
  });
}

inline exprs clip(node_context& c, double lo, double hi) {
  return one(c.call("clip", {c.input(0)}, {{"min", lo}, {"max", hi}}));
}

}  // namespace detail

/// Adds the elementwise converters to `t`.
inline void add_elementwise_converters(converter_table& t) {
  using namespace detail;
  t.add("Pow", 1, [](node_context& c) {  // the exponent may have another type; the result has the base's
    ir::expr e = c.input(1);
    if (c.input_dtype(1) != c.input_dtype(0)) e = c.call("astype", {e}, {{"dtype", c.input_dtype(0)}});
    return one(c.call("power", {c.input(0), e}));
  });
  for (auto [o, k] : {std::pair{"Add", "add"}, {"Sub", "subtract"}, {"Mul", "multiply"}, {"Div", "divide"},
                      {"Equal", "equal"}, {"Greater", "greater"}, {"Less", "less"}, {"GreaterOrEqual", "greater_equal"},
                      {"LessOrEqual", "less_equal"}, {"And", "logical_and"}, {"Or", "logical_or"}})
    binary(t, o, k);
  for (auto [o, k] : {std::pair{"Abs", "abs"}, {"Neg", "negative"}, {"Exp", "exp"}, {"Log", "log"}, {"Sqrt", "sqrt"}, {"Tanh", "tanh"},
                      {"Sigmoid", "sigmoid"}, {"Relu", "nn.relu"}, {"Erf", "erf"}, {"Not", "logical_not"}})
    unary(t, o, k);
  for (auto [o, k] : {std::pair{"Sin", "sin"}, {"Cos", "cos"}, {"Tan", "tan"}, {"Asin", "asin"}, {"Acos", "acos"}, {"Atan", "atan"},
                      {"Sinh", "sinh"}, {"Cosh", "cosh"}, {"Asinh", "asinh"}, {"Acosh", "acosh"}, {"Atanh", "atanh"}})
    t.add(o, 7, [kiln = k](node_context& c) { return one(c.call(kiln, {c.input(0)})); });
  for (auto [o, k] : {std::pair{"Floor", "floor"}, {"Ceil", "ceil"}})
    unary(t, o, k);
  t.add("Round", 11, [](node_context& c) { return one(c.call("round", {c.input(0)})); });
  t.add("IsInf", 10, [](node_context& c) {  // comparisons with the infinities; NaN is neither
    const dtype dt = c.input_dtype(0);
    const double inf = std::numeric_limits<double>::infinity();
    const bool positive = c.attr_int("detect_positive", 1) != 0, negative = c.attr_int("detect_negative", 1) != 0;
    if (positive && negative) return one(c.call("equal", {c.call("abs", {c.input(0)}), c.scalar(inf, dt)}));
    if (positive) return one(c.call("equal", {c.input(0), c.scalar(inf, dt)}));
    if (negative) return one(c.call("equal", {c.input(0), c.scalar(-inf, dt)}));
    // Neither: false everywhere (x == x and x != x), in the input's shape.
    return one(c.call("logical_and", {c.call("equal", {c.input(0), c.input(0)}), c.call("not_equal", {c.input(0), c.input(0)})}));
  });
  t.add("Mod", 10, [](node_context& c) {
    const bool fmod = c.attr_int("fmod", 0) != 0;
    if (is_float(c.input_dtype(0)) && !fmod) c.fail("fmod must be 1 for floating-point inputs");
    // fmod 1: C's fmod / %, the dividend's sign. fmod 0 (integers): Python's %, the divisor's
    // sign, as x - floor(x / y) * y, exact. Division by zero is the kernels' error.
    if (fmod) return one(c.call("fmod", {c.input(0), c.input(1)}));
    const ir::expr q = c.call("floor_divide", {c.input(0), c.input(1)});
    return one(c.call("subtract", {c.input(0), c.call("multiply", {q, c.input(1)})}));
  });
  t.add("Xor", 7, [](node_context& c) { return one(c.call("not_equal", {c.input(0), c.input(1)})); });
  t.add("IsNaN", 9, [](node_context& c) { return one(c.call("not_equal", {c.input(0), c.input(0)})); });
  t.add("CastLike", 15, [](node_context& c) {
    const dtype to = c.input_dtype(1);
    if (c.input_dtype(0) == to) return one(c.input(0));
    return one(c.call("astype", {c.input(0)}, {{"dtype", to}}));
  });
  // Activations composed of kiln's operators.
  t.add("Elu", 1, [](node_context& c) {
    const dtype dt = c.input_dtype(0);
    ir::expr neg = c.call("multiply", {c.call("subtract", {c.call("exp", {c.input(0)}), c.scalar(1, dt)}), c.scalar(c.attr_float("alpha", 1.0), dt)});
    return one(c.call("where", {c.call("greater", {c.input(0), c.scalar(0, dt)}), c.input(0), neg}));
  });
  t.add("Celu", 12, [](node_context& c) {  // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    const dtype dt = c.input_dtype(0);
    const double alpha = c.attr_float("alpha", 1.0);
    ir::expr e = c.call("multiply", {c.call("subtract", {c.call("exp", {c.call("divide", {c.input(0), c.scalar(alpha, dt)})}), c.scalar(1, dt)}),
                                     c.scalar(alpha, dt)});
    return one(c.call("add", {c.call("maximum", {c.input(0), c.scalar(0, dt)}), c.call("minimum", {e, c.scalar(0, dt)})}));
  });
  t.add("Selu", 1, [](node_context& c) {
    const dtype dt = c.input_dtype(0);
    const double alpha = c.attr_float("alpha", 1.67326319217681884765625), gamma = c.attr_float("gamma", 1.05070102214813232421875);
    ir::expr neg = c.call("multiply", {c.call("subtract", {c.call("exp", {c.input(0)}), c.scalar(1, dt)}), c.scalar(alpha, dt)});
    ir::expr y = c.call("where", {c.call("greater", {c.input(0), c.scalar(0, dt)}), c.input(0), neg});
    return one(c.call("multiply", {y, c.scalar(gamma, dt)}));
  });
  t.add("HardSigmoid", 1, [](node_context& c) {
    const dtype dt = c.input_dtype(0);
    ir::expr y = c.call("add", {c.call("multiply", {c.input(0), c.scalar(c.attr_float("alpha", 0.2), dt)}), c.scalar(c.attr_float("beta", 0.5), dt)});
    return one(c.call("clip", {y}, {{"min", 0.0}, {"max", 1.0}}));
  });
  t.add("HardSwish", 14, [](node_context& c) {
    const dtype dt = c.input_dtype(0);
    ir::expr h = c.call("add", {c.call("multiply", {c.input(0), c.scalar(1.0 / 6.0, dt)}), c.scalar(0.5, dt)});
    return one(c.call("multiply", {c.input(0), c.call("clip", {h}, {{"min", 0.0}, {"max", 1.0}})}));
  });
  t.add("Softplus", 1, [](node_context& c) {
    return one(c.call("log", {c.call("add", {c.call("exp", {c.input(0)}), c.scalar(1, c.input_dtype(0))})}));
  });
  t.add("Softsign", 1, [](node_context& c) {
    return one(c.call("divide", {c.input(0), c.call("add", {c.call("abs", {c.input(0)}), c.scalar(1, c.input_dtype(0))})}));
  });
  t.add("ThresholdedRelu", 10, [](node_context& c) {
    const dtype dt = c.input_dtype(0);
    ir::expr keep = c.call("greater", {c.input(0), c.scalar(c.attr_float("alpha", 1.0), dt)});
    return one(c.call("where", {keep, c.input(0), c.scalar(0, dt)}));
  });
  t.add("PRelu", 1, [](node_context& c) {
    const dtype dt = c.input_dtype(0);
    ir::expr slope = c.input(1);
    // Before opset 7 the slope is one value, or one per channel (axis 1): [C] becomes
    // [C, 1, ..., 1]. From opset 7 it broadcasts to the input as numpy's rule says.
    if (c.opset() < 7 && c.rank(1) == 1 && c.rank(0) >= 3) {
      std::vector<ir::prim_expr> dims = c.shape(1);
      dims.resize(std::size_t(c.rank(0) - 1), ir::make_int(1));
      slope = reshape_to(c, slope, std::move(dims));
    }
    ir::expr neg = c.call("multiply", {c.input(0), slope});
    return one(c.call("where", {c.call("greater", {c.input(0), c.scalar(0, dt)}), c.input(0), neg}));
  });
  t.add("Sign", 9, [](node_context& c) {
    const dtype dt = c.input_dtype(0);
    ir::expr pos = c.call("astype", {c.call("greater", {c.input(0), c.scalar(0, dt)})}, {{"dtype", dt}});
    ir::expr neg = c.call("astype", {c.call("less", {c.input(0), c.scalar(0, dt)})}, {{"dtype", dt}});
    return one(c.call("subtract", {pos, neg}));
  });
  variadic(t, "Max", "maximum");
  variadic(t, "Min", "minimum");
  variadic(t, "Sum", "add");
  variadic(t, "Mean", "add", true);
  t.add("Reciprocal", 1, [](node_context& c) { return one(c.call("divide", {c.scalar(1.0, c.input_dtype(0)), c.input(0)})); });
  t.add("Identity", 1, [](node_context& c) { return one(c.input(0)); });
  t.add("Dropout", 1, [](node_context& c) {  // inference: the identity, and a mask that keeps everything
    // training mode drops at random, unless the ratio is 0
    if (c.has_input(2) && c.constant_ints(2, "training_mode").at(0) != 0 &&
        (c.has_input(1) ? c.constant_floats(1, "ratio").at(0) : 0.5) != 0)
      c.fail("training mode with a nonzero ratio (random dropout) is not supported; inference ignores dropout");
    exprs outs = one(c.input(0));
    if (c.node().output_size() > 1 && !c.node().output(1).empty()) {
      const dtype mask = c.opset() >= 10 ? dtype::bool_ : c.input_dtype(0);  // bool from opset 10, the input's type before
      outs.push_back(c.call("broadcast_to", {c.scalar(1, mask), ir::make_shape_expr(c.shape(0))}));
    }
    return outs;
  });
  t.add("LRN", 1, [](node_context& c) {
    // x / (bias + alpha / size * sum of x^2 over the channels [c - (size-1)/2, c + ceil((size-1)/2)])^beta:
    // the sum is an average pool over the channel axis of [N, 1, C, rest], padding counted
    const int r = c.rank(0);
    if (r < 3) c.fail("the input must be (N, C, D1, ...), got rank " + std::to_string(r));
    const std::int64_t size = c.attr_int("size");
    if (size < 1) c.fail("size must be positive, got " + std::to_string(size));
    const dtype dt = c.input_dtype(0);
    const auto d = c.shape(0);
    const ir::expr sq = reshape_to(c, c.call("multiply", {c.input(0), c.input(0)}), {d[0], ir::make_int(1), d[1], product(d, 2, d.size())});
    const ir::expr avg = c.call("nn.avg_pool2d", {sq},
                                {{"pool_size", ir::int_array{size, 1}},
                                 {"padding", ir::int_array{(size - 1) / 2, 0, size / 2, 0}},
                                 {"count_include_pad", true}});
    const ir::expr base = c.call("add", {c.scalar(c.attr_float("bias", 1.0), dt), c.call("multiply", {avg, c.scalar(c.attr_float("alpha", 1e-4), dt)})});
    const ir::expr scale = c.call("power", {base, c.scalar(-c.attr_float("beta", 0.75), dt)});
    return one(c.call("multiply", {c.input(0), reshape_to(c, scale, d)}));
  });
  t.add("InstanceNormalization", 6, [](node_context& c) {  // per image and channel over the spatial axes, then scale and bias
    const int r = c.rank(0);
    if (r < 3) c.fail("the input must be (N, C, D1, ...), got rank " + std::to_string(r));
    const dtype dt = c.input_dtype(0);
    const double eps = c.attr_float("epsilon", 1e-5);
    ir::int_array spatial;
    for (int a = 2; a < r; ++a) spatial.push_back(a);
    const moments m = moments_over(c, c.input(0), spatial);
    const ir::expr normed = c.call("multiply", {m.dev, c.call("rsqrt", {c.call("add", {m.var, c.scalar(eps, dt)})})});
    std::vector<ir::prim_expr> per_channel(std::size_t(r - 1), ir::make_int(1));
    per_channel[0] = c.shape(0)[1];
    return one(c.call("add", {c.call("multiply", {normed, reshape_to(c, c.input(1), per_channel)}), reshape_to(c, c.input(2), per_channel)}));
  });
  t.add("Where", 9, [](node_context& c) { return one(c.call("where", {c.input(0), c.input(1), c.input(2)})); });
  t.add("Cast", 1, [](node_context& c) {
    const dtype to = require_dtype(int(c.attr_int("to")), "the target type of Cast");
    if (c.input_dtype(0) == to) return one(c.input(0));
    return one(c.call("astype", {c.input(0)}, {{"dtype", to}}));
  });
  t.add("LeakyRelu", 1, [](node_context& c) {
    const dtype dt = c.input_dtype(0);
    ir::expr pos = c.call("greater", {c.input(0), c.scalar(0, dt)});
    ir::expr neg = c.call("multiply", {c.input(0), c.scalar(c.attr_float("alpha", 0.01), dt)});
    return one(c.call("where", {pos, c.input(0), neg}));
  });
  t.add("Clip", 1, [](node_context& c) {
    return clip(c, c.attr_float("min", -std::numeric_limits<double>::infinity()), c.attr_float("max", std::numeric_limits<double>::infinity()));
  });
  t.add("Clip", 11, [](node_context& c) {
    const bool known = (!c.has_input(1) || c.constant(1)) && (!c.has_input(2) || c.constant(2));
    if (known && is_float(c.input_dtype(0))) {
      const double lo = c.has_input(1) ? c.constant_floats(1, "min").at(0) : -std::numeric_limits<double>::infinity();
      const double hi = c.has_input(2) ? c.constant_floats(2, "max").at(0) : std::numeric_limits<double>::infinity();
      return clip(c, lo, hi);
    }
    // Bounds known only at run time (or integer data): max(x, min), then min(., max).
    ir::expr y = c.input(0);
    if (c.has_input(1)) y = c.call("maximum", {y, c.input(1)});
    if (c.has_input(2)) y = c.call("minimum", {y, c.input(2)});
    return one(y);
  });

}

}  // namespace kiln::frontend::onnx
