// SPDX-License-Identifier: Apache-2.0
/// \file
/// ONNX's recurrent layers — RNN, GRU and LSTM — unrolled over their sequence into kiln's
/// operators, as TVM's Relay importer does: one matmul for every step's input projection, then
/// per step a [batch, hidden] x [hidden, gates * hidden] matmul, the gates split apart, and the
/// elementwise update (which the compiler fuses). The sequence length must be static.
///
/// Everything ONNX's operators define is honoured: `direction` (forward, reverse, bidirectional:
/// two passes whose outputs are concatenated), `layout` (opset 14: batch first), the
/// `activations` of every gate with their `activation_alpha` / `activation_beta` (taken in order
/// by the functions that use them, with ONNX Runtime's defaults), `clip` (applied to the gates'
/// pre-activations), GRU's `linear_before_reset`, LSTM's peepholes `P` and `input_forget`
/// (the forget gate is 1 - the input gate), `initial_h` / `initial_c`, and `sequence_lens`: past
/// its length a sequence's state stops changing and its `Y` is zero, the reverse direction
/// runs each sequence from its own last element, and a sequence of length 0 ends with zero states
/// (ONNX Runtime's behaviour, checked against it).
#pragma once

#include <kiln/frontend/onnx/node_context.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace kiln::frontend::onnx::detail {

/// `x` with each sequence of the batch reversed within its own length: along `time_axis`,
/// x[t, b] becomes x[len[b] - 1 - t, b] for t < len[b]; beyond its length a sequence stays as it
/// is. `lens` is int64 [batch]. The time axis must be static. (ReverseSequence; the reverse
/// direction of a recurrent layer given `sequence_lens`.)
inline ir::expr reverse_sequences(node_context& c, const ir::expr& x, const ir::expr& lens, std::size_t time_axis, std::size_t batch_axis) {
  const auto d = ir::dyn_cast<ir::tensor_type_node>(x->checked_type)->shape.value();
  const auto steps = ir::as_int(d[time_axis]);
  if (!steps) c.fail("the length of the time axis must be static");
  const ir::expr t = iota_along(c, *steps, d.size(), time_axis);
  std::vector<ir::prim_expr> len_dims(d.size(), ir::make_int(1));
  len_dims[batch_axis] = d[batch_axis];
  const ir::expr len = reshape_to(c, lens, std::move(len_dims));
  const ir::expr one = c.scalar(1, dtype::int64);
  const ir::expr reversed = c.call("subtract", {c.call("subtract", {len, one}), t});
  const ir::expr idx = c.call("where", {c.call("less", {t, len}), reversed, t});
  return c.call("gather_elements", {x, c.call("broadcast_to", {idx, ir::make_shape_expr(d)})}, {{"axis", std::int64_t(time_axis)}});
}

enum class recurrent_cell { rnn, gru, lstm };

/// One entry of a recurrent layer's `activations`, with its parameters.
struct recurrent_activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;
};

/// The layer's activation functions, `per_direction` for each of `directions`: the attribute or
/// `defaults`. Alphas and betas are taken in order by the functions that have them; a function
/// left without one gets ONNX Runtime's default.
inline std::vector<recurrent_activation> recurrent_activations(node_context& c, std::size_t per_direction, std::size_t directions,
                                                               const std::vector<std::string>& defaults) {
  std::vector<std::string> names = c.attr_strings("activations").value_or(std::vector<std::string>{});
  if (names.empty())
    for (std::size_t d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  else if (per_direction == 1 && directions == 1 && names.size() == 2)
    names.resize(1);  // RNN's default was once [Tanh, Tanh]: one direction uses the first (as ONNX Runtime does)
  if (names.size() != per_direction * directions)
    c.fail("activations has " + std::to_string(names.size()) + " functions; expected " + std::to_string(per_direction) + " per direction, for " +
           std::to_string(directions) + " direction(s)");
  const std::vector<float> alphas = c.attr_floats("activation_alpha").value_or(std::vector<float>{});
  const std::vector<float> betas = c.attr_floats("activation_beta").value_or(std::vector<float>{});
  std::size_t next_alpha = 0, next_beta = 0;
  std::vector<recurrent_activation> out;
  for (const std::string& given : names) {
    recurrent_activation f;
    for (char ch : given) f.name.push_back(char(std::tolower(static_cast<unsigned char>(ch))));
    // The functions with parameters, and their defaults.
    double alpha = 0, beta = 0;
    bool has_alpha = true, has_beta = false;
    if (f.name == "leakyrelu") alpha = 0.01;
    else if (f.name == "thresholdedrelu" || f.name == "elu") alpha = 1.0;
    else if (f.name == "scaledtanh" || f.name == "affine") alpha = 1.0, beta = f.name == "affine" ? 0.0 : 1.0, has_beta = true;
    else if (f.name == "hardsigmoid") alpha = 0.2, beta = 0.5, has_beta = true;
    else if (f.name == "relu" || f.name == "tanh" || f.name == "sigmoid" || f.name == "softsign" || f.name == "softplus") has_alpha = false;
    else c.fail("activation function '" + given + "' is not one of ONNX's (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)");
    if (has_alpha && next_alpha < alphas.size()) alpha = alphas[next_alpha++];
    if (has_beta && next_beta < betas.size()) beta = betas[next_beta++];
    f.alpha = alpha;
    f.beta = beta;
    out.push_back(std::move(f));
  }
  return out;
}

/// `f(x)` for one recurrent activation function.
inline ir::expr recurrent_activate(node_context& c, const recurrent_activation& f, const ir::expr& x, dtype dt) {
  const auto s = [&](double v) { return c.scalar(v, dt); };
  const auto positive = [&] { return c.call("greater", {x, s(0)}); };
  if (f.name == "sigmoid") return c.call("sigmoid", {x});
  if (f.name == "tanh") return c.call("tanh", {x});
  if (f.name == "relu") return c.call("nn.relu", {x});
  if (f.name == "affine") return c.call("add", {c.call("multiply", {x, s(f.alpha)}), s(f.beta)});
  if (f.name == "leakyrelu") return c.call("where", {positive(), x, c.call("multiply", {x, s(f.alpha)})});
  if (f.name == "thresholdedrelu") return c.call("where", {c.call("greater", {x, s(f.alpha)}), x, s(0)});
  if (f.name == "scaledtanh") return c.call("multiply", {c.call("tanh", {c.call("multiply", {x, s(f.beta)})}), s(f.alpha)});
  if (f.name == "hardsigmoid")
    return c.call("clip", {c.call("add", {c.call("multiply", {x, s(f.alpha)}), s(f.beta)})}, {{"min", 0.0}, {"max", 1.0}});
  if (f.name == "elu") return c.call("where", {positive(), x, c.call("multiply", {c.call("subtract", {c.call("exp", {x}), s(1)}), s(f.alpha)})});
  if (f.name == "softsign") return c.call("divide", {x, c.call("add", {c.call("abs", {x}), s(1)})});
  return c.call("log", {c.call("add", {c.call("exp", {x}), s(1)})});  // softplus
}

/// An RNN, GRU or LSTM node: its outputs Y, Y_h (and Y_c), those the node does not ask for null.
inline std::vector<ir::expr> recurrent(node_context& c, recurrent_cell cell) {
  const char* const cell_name = cell == recurrent_cell::rnn ? "RNN" : cell == recurrent_cell::gru ? "GRU" : "LSTM";
  const std::int64_t gates = cell == recurrent_cell::rnn ? 1 : cell == recurrent_cell::gru ? 3 : 4;
  const std::string direction = c.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.fail("direction must be forward, reverse or bidirectional, not '" + direction + "'");
  const std::int64_t directions = direction == "bidirectional" ? 2 : 1;
  const bool batch_first = c.opset() >= 14 && c.attr_int("layout", 0) != 0;
  const dtype dt = c.input_dtype(0);
  if (!is_float(dt)) c.fail(std::string("X must be a floating-point tensor, not ") + std::string(name(dt)));
  const auto s = [&](double v) { return c.scalar(v, dt); };
  const auto slice = [&](const ir::expr& x, std::int64_t axis, std::int64_t begin, std::int64_t end) {
    return c.call("strided_slice", {x}, {{"axes", ir::int_array{axis}}, {"begin", ir::int_array{begin}}, {"end", ir::int_array{end}}, {"strides", ir::int_array{1}}});
  };
  const auto permute = [&](const ir::expr& x, ir::int_array axes) { return c.call("permute_dims", {x}, {{"axes", std::move(axes)}}); };
  const auto concat = [&](const std::vector<ir::expr>& xs, std::int64_t axis) {
    return xs.size() == 1 ? xs[0] : c.call("concat", {ir::make_tuple(xs)}, {{"axis", axis}});
  };
  const auto split = [&](const ir::expr& x, std::int64_t parts, std::int64_t axis) {
    std::vector<ir::expr> out;
    if (parts == 1) return std::vector<ir::expr>{x};
    const ir::expr tup = c.fold_or_emit(ir::call_op("split", {x}, {{"axis", axis}, {"sections", parts}}));
    for (int i = 0; i < parts; ++i) out.push_back(c.fold_or_emit(ir::make_tuple_get_item(tup, i)));
    return out;
  };

  // ---- shapes -----------------------------------------------------------------------------------
  if (c.rank(0) != 3) c.fail("X must have rank 3 ([seq_length, batch_size, input_size], or batch first with layout 1), has rank " + std::to_string(c.rank(0)));
  if (c.rank(1) != 3 || c.rank(2) != 3) c.fail("W and R must have rank 3 ([num_directions, gates * hidden_size, ...])");
  ir::expr x = batch_first ? permute(c.input(0), {1, 0, 2}) : c.input(0);
  const auto xd = ir::dyn_cast<ir::tensor_type_node>(x->checked_type)->shape.value();
  const auto seq = ir::as_int(xd[0]);
  if (!seq) c.fail("the sequence length must be static (kiln unrolls the sequence); fix it with import_options::shapes");
  if (*seq < 1) c.fail("the sequence is empty");
  const ir::prim_expr batch = xd[1], input_size = xd[2];
  const auto rd = c.shape(2);
  const auto hidden_of_r = ir::as_int(rd[2]);
  if (!hidden_of_r) c.fail("R's shape must be static");
  const std::int64_t hidden = c.attr_int("hidden_size", *hidden_of_r);
  const auto expect = [&](std::size_t i, const char* what, std::vector<std::int64_t> dims) {
    const auto d = c.shape(i);
    bool ok = d.size() == dims.size();
    for (std::size_t k = 0; ok && k < dims.size(); ++k) ok = dims[k] < 0 || ir::as_int(d[k]) == dims[k];
    if (!ok) {
      std::string want;
      for (std::size_t k = 0; k < dims.size(); ++k) want += (k ? ", " : "") + (dims[k] < 0 ? std::string("batch_size") : std::to_string(dims[k]));
      c.fail(std::string(what) + " has shape " + ir::to_string(ir::tensor_type(d, c.input_dtype(i))) + "; expected [" + want + "] for " +
             cell_name + " with hidden_size " + std::to_string(hidden) + " and " + std::to_string(directions) + " direction(s)");
    }
  };
  const auto input_int = ir::as_int(input_size);
  if (!input_int) c.fail("X's input_size must be static");
  expect(1, "W", {directions, gates * hidden, *input_int});
  expect(2, "R", {directions, gates * hidden, hidden});
  if (c.has_input(3)) expect(3, "B", {directions, 2 * gates * hidden});
  const auto state_shape = [&] { return batch_first ? std::vector<std::int64_t>{-1, directions, hidden} : std::vector<std::int64_t>{directions, -1, hidden}; };
  if (c.has_input(5)) expect(5, "initial_h", state_shape());
  const bool lstm = cell == recurrent_cell::lstm;
  if (lstm && c.has_input(6)) expect(6, "initial_c", state_shape());
  if (lstm && c.has_input(7)) expect(7, "P", {directions, 3 * hidden});
  for (int i : {1, 2, 3, 5, 6, 7})
    if (c.has_input(std::size_t(i)) && c.input_dtype(std::size_t(i)) != dt)
      c.fail("input " + std::to_string(i) + " has element type " + std::string(name(c.input_dtype(std::size_t(i)))) + "; X has " + std::string(name(dt)));

  const std::vector<recurrent_activation> fns =
      cell == recurrent_cell::rnn   ? recurrent_activations(c, 1, std::size_t(directions), {"Tanh"})
      : cell == recurrent_cell::gru ? recurrent_activations(c, 2, std::size_t(directions), {"Sigmoid", "Tanh"})
                                    : recurrent_activations(c, 3, std::size_t(directions), {"Sigmoid", "Tanh", "Tanh"});
  const bool clipped = c.has_attr("clip");
  const double clip = c.attr_float("clip", 0);
  if (clipped && !(clip > 0)) c.fail("clip must be positive");
  const bool input_forget = lstm && c.attr_int("input_forget", 0) != 0;
  const bool linear_before_reset = cell == recurrent_cell::gru && c.attr_int("linear_before_reset", 0) != 0;

  // sequence_lens: int64 [batch, 1], or none when every sequence is known to be whole.
  ir::expr lens;
  if (c.has_input(4)) {
    if (c.rank(4) != 1) c.fail("sequence_lens must be 1-D ([batch_size])");
    lens = c.input_dtype(4) == dtype::int64 ? c.input(4) : c.call("astype", {c.input(4)}, {{"dtype", dtype::int64}});
    if (const ir::ndarray* known = c.constant(4)) {
      bool whole = true;
      for (std::size_t k = 0; k < known->numel(); ++k) {
        const std::int64_t v = known->element_int(k);
        if (v < 0 || v > *seq) c.fail("sequence_lens holds " + std::to_string(v) + ", outside [0, " + std::to_string(*seq) + "]");
        whole = whole && v == *seq;
      }
      if (whole) lens = {};
    }
  }
  const ir::expr lens_column = lens ? reshape_to(c, lens, {batch, ir::make_int(1)}) : ir::expr();

  const auto& outputs = c.node();
  if (outputs.output_size() > (lstm ? 3 : 2)) c.fail(std::string(cell_name) + " has at most " + (lstm ? "3" : "2") + " outputs");
  const auto wanted = [&](int i) { return outputs.output_size() > i && !outputs.output(i).empty(); };
  const std::int64_t gh = gates * hidden;
  const auto act = [&](const recurrent_activation& f, ir::expr v) {
    if (clipped) v = c.call("clip", {v}, {{"min", -clip}, {"max", clip}});
    return recurrent_activate(c, f, v, dt);
  };
  const auto of_direction = [&](std::size_t i, std::int64_t d, std::int64_t axis) {  // input i's slice for direction d, that axis dropped
    ir::expr v = directions == 1 ? c.input(i) : slice(c.input(i), axis, d, d + 1);
    auto dims = ir::dyn_cast<ir::tensor_type_node>(v->checked_type)->shape.value();
    dims.erase(dims.begin() + axis);
    return reshape_to(c, v, dims);
  };

  std::vector<ir::expr> ys, hs, cs;
  for (std::int64_t d = 0; d < directions; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const recurrent_activation* f = &fns[std::size_t(d) * (fns.size() / std::size_t(directions))];
    // Weights as [in, gates * hidden] (computed at import when they are constants).
    const ir::expr wt = permute(of_direction(1, d, 0), {1, 0});
    const ir::expr rt = permute(of_direction(2, d, 0), {1, 0});
    ir::expr wb, rb;  // [gates * hidden]
    if (c.has_input(3)) {
      const ir::expr b = of_direction(3, d, 0);
      wb = slice(b, 0, 0, gh);
      rb = slice(b, 0, gh, 2 * gh);
    }
    // Every step's input projection in one product, [seq, batch, gates * hidden], with the biases
    // that are added outside the recurrence (all but GRU's Rbh under linear_before_reset).
    ir::expr xw = reshape_to(c, c.call("matmul", {reshape_to(c, x, {ir::make_int(*seq) * batch, input_size}), wt}), {ir::make_int(*seq), batch, ir::make_int(gh)});
    ir::expr hidden_bias;  // GRU with linear_before_reset: Rbh, added to H Rh^T before the reset gate
    if (wb) {
      ir::expr bias = wb;
      if (linear_before_reset) {
        bias = c.call("add", {bias, concat({slice(rb, 0, 0, 2 * hidden), c.call("broadcast_to", {s(0), ir::make_shape_expr({ir::make_int(hidden)})})}, 0)});
        hidden_bias = slice(rb, 0, 2 * hidden, 3 * hidden);
      } else {
        bias = c.call("add", {bias, rb});
      }
      xw = c.call("add", {xw, bias});
    }
    if (reverse && lens) xw = reverse_sequences(c, xw, lens, 0, 1);
    const std::vector<ir::expr> steps = split(xw, *seq, 0);
    // GRU multiplies the hidden gate's recurrent weights after the reset gate (unless
    // linear_before_reset): R's z and r parts and its h part separately.
    ir::expr rt_zr, rt_h;
    if (cell == recurrent_cell::gru) {
      rt_zr = slice(rt, 1, 0, 2 * hidden);
      rt_h = slice(rt, 1, 2 * hidden, 3 * hidden);
    }
    std::vector<ir::expr> p;  // LSTM peepholes i, o, f as [hidden]
    if (lstm && c.has_input(7)) p = split(of_direction(7, d, 0), 3, 0);

    const ir::expr zeros = c.call("broadcast_to", {s(0), ir::make_shape_expr({batch, ir::make_int(hidden)})});
    const std::int64_t state_axis = batch_first ? 1 : 0;
    ir::expr h = c.has_input(5) ? of_direction(5, d, state_axis) : zeros;
    ir::expr cstate = lstm && c.has_input(6) ? of_direction(6, d, state_axis) : lstm ? zeros : ir::expr();
    std::vector<ir::expr> y(static_cast<std::size_t>(*seq));
    for (std::int64_t k = 0; k < *seq; ++k) {
      const std::int64_t t = reverse && !lens ? *seq - 1 - k : k;
      const ir::expr xt = reshape_to(c, steps[std::size_t(t)], {batch, ir::make_int(gh)});
      ir::expr h_new, c_new;
      if (cell == recurrent_cell::rnn) {
        h_new = act(f[0], c.call("add", {xt, c.call("matmul", {h, rt})}));
      } else if (cell == recurrent_cell::gru) {
        const std::vector<ir::expr> xg = split(xt, 3, 1);
        const std::vector<ir::expr> hg = split(c.call("matmul", {h, rt_zr}), 2, 1);
        const ir::expr z = act(f[0], c.call("add", {xg[0], hg[0]}));
        const ir::expr r = act(f[0], c.call("add", {xg[1], hg[1]}));
        ir::expr hh;
        if (linear_before_reset) {
          hh = c.call("matmul", {h, rt_h});
          if (hidden_bias) hh = c.call("add", {hh, hidden_bias});
          hh = c.call("multiply", {r, hh});
        } else {
          hh = c.call("matmul", {c.call("multiply", {r, h}), rt_h});
        }
        const ir::expr candidate = act(f[1], c.call("add", {xg[2], hh}));
        h_new = c.call("add", {candidate, c.call("multiply", {z, c.call("subtract", {h, candidate})})});  // (1 - z) h~ + z h
      } else {
        const std::vector<ir::expr> g = split(c.call("add", {xt, c.call("matmul", {h, rt})}), 4, 1);  // i, o, f, c
        const auto peep = [&](const ir::expr& v, std::size_t which, const ir::expr& cell_state) {
          return p.empty() ? v : c.call("add", {v, c.call("multiply", {p[which], cell_state})});
        };
        const ir::expr i = act(f[0], peep(g[0], 0, cstate));
        const ir::expr fg = input_forget ? c.call("subtract", {s(1), i}) : act(f[0], peep(g[2], 2, cstate));
        const ir::expr candidate = act(f[1], g[3]);
        c_new = c.call("add", {c.call("multiply", {fg, cstate}), c.call("multiply", {i, candidate})});
        const ir::expr o = act(f[0], peep(g[1], 1, c_new));
        h_new = c.call("multiply", {o, recurrent_activate(c, f[2], c_new, dt)});
      }
      if (lens) {  // past its length a sequence keeps its state and outputs zeros
        const ir::expr live = c.call("less", {c.constant(ir::ndarray::scalar(dtype::int64, k)), lens_column});
        if (wanted(0)) y[std::size_t(t)] = c.call("where", {live, h_new, s(0)});
        h = c.call("where", {live, h_new, h});
        if (lstm) cstate = c.call("where", {live, c_new, cstate});
      } else {
        if (wanted(0)) y[std::size_t(t)] = h_new;
        h = h_new;
        if (lstm) cstate = c_new;
      }
    }
    if (wanted(0)) {
      for (auto& v : y) v = reshape_to(c, v, {ir::make_int(1), batch, ir::make_int(hidden)});
      ir::expr yd = concat(y, 0);  // [seq, batch, hidden]
      if (reverse && lens) yd = reverse_sequences(c, yd, lens, 0, 1);
      ys.push_back(reshape_to(c, yd, {ir::make_int(*seq), ir::make_int(1), batch, ir::make_int(hidden)}));
    }
    if (lens) {  // a sequence of length 0 has zero final states (ONNX Runtime's choice; the standard is silent)
      const ir::expr started = c.call("greater", {lens_column, c.scalar(0, dtype::int64)});
      h = c.call("where", {started, h, s(0)});
      if (lstm) cstate = c.call("where", {started, cstate, s(0)});
    }
    hs.push_back(reshape_to(c, h, {ir::make_int(1), batch, ir::make_int(hidden)}));
    if (lstm) cs.push_back(reshape_to(c, cstate, {ir::make_int(1), batch, ir::make_int(hidden)}));
  }

  std::vector<ir::expr> outs(std::size_t(std::max(outputs.output_size(), 1)));
  if (wanted(0)) {
    ir::expr y = concat(ys, 1);  // [seq, directions, batch, hidden]
    outs[0] = batch_first ? permute(y, {2, 0, 1, 3}) : y;
  }
  const auto state = [&](const std::vector<ir::expr>& v) {
    ir::expr st = concat(v, 0);  // [directions, batch, hidden]
    return batch_first ? permute(st, {1, 0, 2}) : st;
  };
  if (wanted(1)) outs[1] = state(hs);
  if (lstm && wanted(2)) outs[2] = state(cs);
  return outs;
}

}  // namespace kiln::frontend::onnx::detail
