// SPDX-License-Identifier: Apache-2.0
/// \file
/// The ONNX importer's linear algebra converters. Linear algebra: MatMul and Gemm.
#pragma once

#include <kiln/frontend/onnx/converters/common.hpp>

namespace kiln::frontend::onnx {

/// Adds the linear algebra converters to `t`.
inline void add_linalg_converters(converter_table& t) {
  using namespace detail;
  t.add("MatMul", 1, [](node_context& c) { return one(c.call("matmul", {c.input(0), c.input(1)})); });
  t.add("Gemm", 1, [](node_context& c) {
    ir::expr a = c.input(0), b = c.input(1);
    if (c.rank(0) != 2 || c.rank(1) != 2) c.fail("A and B must be 2-D");
    if (c.attr_int("transA", 0)) a = c.call("permute_dims", {a});
    if (c.attr_int("transB", 0)) b = c.call("permute_dims", {b});
    const dtype dt = c.input_dtype(0);
    ir::expr y = c.call("matmul", {a, b});
    const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
    if (alpha != 1.0) y = c.call("multiply", {y, c.scalar(alpha, dt)});
    if (c.has_input(2) && beta != 0.0) {
      ir::expr bias = c.input(2);
      if (beta != 1.0) bias = c.call("multiply", {bias, c.scalar(beta, dt)});
      y = c.call("add", {y, bias});
    }
    return one(y);
  });

}

}  // namespace kiln::frontend::onnx
