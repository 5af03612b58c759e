// SPDX-License-Identifier: Apache-2.0
/// \file
/// The ONNX operators kiln imports, each as converters by opset range (`converter_table`).
///
/// A converter maps one node to kiln IR, honouring the operator's attributes, their defaults and
/// the semantics of its opset version (Softmax before 13 flattens to 2-D; Clip before 11 takes
/// attributes, after it inputs; Squeeze, Unsqueeze, Split and ReduceSum take their axes as inputs
/// from 13, the other reductions from 18; Slice takes inputs from 10; Pad from 11). Operators kiln
/// has no single operator for are composed: Gemm is matmul, scale and add; BatchNormalization a
/// per-channel scale and shift (computed at import from constant statistics); LeakyRelu a where;
/// Flatten, Squeeze and Unsqueeze reshapes.
///
/// Users add operators with `converter_table::add` (their own domain or a newer opset).
///
/// The converters live by operator family in `converters/`: `elementwise.hpp`, `linalg.hpp`,
/// `nn.hpp`, `recurrent.hpp`, `reduce.hpp` and `shape.hpp`, each adding its own to the table, with
/// the table and the shared helpers in `converters/common.hpp`.
#pragma once

#include <kiln/frontend/onnx/converters/common.hpp>
#include <kiln/frontend/onnx/converters/elementwise.hpp>
#include <kiln/frontend/onnx/converters/linalg.hpp>
#include <kiln/frontend/onnx/converters/nn.hpp>
#include <kiln/frontend/onnx/converters/recurrent.hpp>
#include <kiln/frontend/onnx/converters/reduce.hpp>
#include <kiln/frontend/onnx/converters/shape.hpp>

namespace kiln::frontend::onnx {

inline const converter_table& converter_table::builtin() {
  static const converter_table table = [] {
    converter_table t;
    add_elementwise_converters(t);
    add_linalg_converters(t);
    add_nn_converters(t);
    add_recurrent_converters(t);
    add_reduce_converters(t);
    add_shape_converters(t);
    return t;
  }();
  return table;
}

}  // namespace kiln::frontend::onnx
