// SPDX-License-Identifier: Apache-2.0
/// \file
/// The ONNX importer's recurrent and sequence converters: RNN, GRU and LSTM, unrolled over a static
/// sequence length, and ReverseSequence (`recurrent.hpp`).
#pragma once

#include <kiln/frontend/onnx/converters/common.hpp>
#include <kiln/frontend/onnx/recurrent.hpp>

namespace kiln::frontend::onnx {

/// Adds the recurrent and sequence converters to `t`.
inline void add_recurrent_converters(converter_table& t) {
  using namespace detail;
  // Recurrent layers, unrolled (recurrent.hpp). Opset 14 added `layout`.
  t.add("RNN", 7, [](node_context& c) { return recurrent(c, recurrent_cell::rnn); });
  t.add("GRU", 7, [](node_context& c) { return recurrent(c, recurrent_cell::gru); });
  t.add("LSTM", 7, [](node_context& c) { return recurrent(c, recurrent_cell::lstm); });
  t.add("ReverseSequence", 10, [](node_context& c) {
    const int r = c.rank(0);
    if (r < 2) c.fail("the input must have rank 2 or more");
    const std::int64_t batch_axis = c.axis(c.attr_int("batch_axis", 1), r, "batch_axis"), time_axis = c.axis(c.attr_int("time_axis", 0), r, "time_axis");
    if (batch_axis == time_axis) c.fail("batch_axis and time_axis must differ");
    const ir::expr lens = c.input_dtype(1) == dtype::int64 ? c.input(1) : c.call("astype", {c.input(1)}, {{"dtype", dtype::int64}});
    return one(reverse_sequences(c, c.input(0), lens, std::size_t(time_axis), std::size_t(batch_axis)));
  });
}

}  // namespace kiln::frontend::onnx
