// SPDX-License-Identifier: Apache-2.0
/// \file
/// Elementwise operators: binary arithmetic and comparison with broadcasting, unary math,
/// `where`, `clip` and `astype`.
#pragma once

#include <kiln/ir/op/infer.hpp>

namespace kiln::ir::detail {

inline void register_elementwise_ops(op_registry& r) {
  auto binary = [](dtype fixed_result, bool bool_operands) {
    return [=](const call_context& ctx) {
      dtype d = common_dtype(ctx, {0, 1});
      if (bool_operands && is_known(d) && d != dtype::bool_) ctx.fail("operands must be bool tensors, but they are " + std::string(name(d)));
      return broadcast(ctx, {0, 1}).as_tensor(is_known(fixed_result) ? fixed_result : d);
    };
  };
  for (const char* n : {"add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum"})
    r.add({n, {"x1", "x2"}, {}, binary(dtype::void_, false), op_pattern::broadcast, std::string("elementwise ") + n + " with broadcasting"});
  r.add({"fmod", {"x1", "x2"}, {}, binary(dtype::void_, false), op_pattern::broadcast,
         "elementwise remainder of truncated division (the dividend's sign), with broadcasting"});
  for (const char* n : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})
    r.add({n, {"x1", "x2"}, {}, binary(dtype::bool_, false), op_pattern::broadcast, std::string("elementwise comparison, bool result")});
  for (const char* n : {"logical_and", "logical_or"})
    r.add({n, {"x1", "x2"}, {}, binary(dtype::bool_, true), op_pattern::broadcast, "elementwise logic on bool tensors"});

  auto unary = [](bool float_only) {
    return [=](const call_context& ctx) {
      ctx.tensor(0);
      if (float_only) require_float(ctx, 0);
      return ctx.arg_type(0);
    };
  };
  for (const char* n : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
                        "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round"})
    r.add({n, {"x"}, {}, unary(true), op_pattern::elemwise, std::string("elementwise ") + n});
  for (const char* n : {"negative", "abs"}) r.add({n, {"x"}, {}, unary(false), op_pattern::elemwise, std::string("elementwise ") + n});
  r.add({"nn.relu", {"x"}, {}, unary(false), op_pattern::elemwise, "max(x, 0)"});
  r.add({"nn.gelu",
         {"x"},
         {{"approximate", attr_kind::string, "none"}},
         [](const call_context& ctx) {
           require_float(ctx, 0);
           const auto& a = ctx.attr<std::string>("approximate");
           if (a != "none" && a != "tanh") ctx.fail("attribute 'approximate' must be \"none\" or \"tanh\", not \"" + a + "\"");
           return ctx.arg_type(0);
         },
         op_pattern::elemwise,
         "Gaussian error linear unit, exact (erf) or tanh approximation"});
  r.add({"logical_not",
         {"x"},
         {},
         [](const call_context& ctx) {
           dtype d = ctx.tensor(0).dt;
           if (is_known(d) && d != dtype::bool_) ctx.fail_arg(0, "must be a bool tensor, but its dtype is " + std::string(name(d)));
           return ctx.arg_type(0);
         },
         op_pattern::elemwise,
         "elementwise logical not"});
  r.add({"clip",
         {"x"},
         {{"min", attr_kind::floating, {}, true}, {"max", attr_kind::floating, {}, true}},
         [](const call_context& ctx) {
           ctx.tensor(0);
           if (ctx.attr<double>("min") > ctx.attr<double>("max")) ctx.fail("attribute 'min' is greater than 'max'");
           return ctx.arg_type(0);
         },
         op_pattern::elemwise,
         "clamps every element into [min, max]"});
  r.add({"astype",
         {"x"},
         {{"dtype", attr_kind::data_type, {}, true}},
         [](const call_context& ctx) {
           auto& t = ctx.tensor(0);
           dtype d = ctx.attr<dtype>("dtype");
           if (!is_known(d)) ctx.fail("attribute 'dtype' must be a concrete dtype, not void");
           if (t.shape) return tensor_type(*t.shape, d);
           return tensor_type_of_rank(d, t.ndim);
         },
         op_pattern::elemwise,
         "converts every element to another dtype (cast)"});
  r.add({"where",
         {"condition", "x1", "x2"},
         {},
         [](const call_context& ctx) {
           dtype c = ctx.tensor(0).dt;
           if (is_known(c) && c != dtype::bool_) ctx.fail_arg(0, "must be a bool tensor, but its dtype is " + std::string(name(c)));
           dtype d = common_dtype(ctx, {1, 2});
           return broadcast(ctx, {0, 1, 2}).as_tensor(d);
         },
         op_pattern::broadcast,
         "elementwise select: x1 where condition holds, else x2 (all three broadcast)"});
}

}  // namespace kiln::ir::detail
