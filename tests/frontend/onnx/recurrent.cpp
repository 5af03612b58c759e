// SPDX-License-Identifier: Apache-2.0
// ONNX's RNN, GRU and LSTM, unrolled by the importer, against a reference written here from the
// operators' definitions, one sequence and one step at a time: every direction, sequence_lens
// (states frozen past a sequence's length, Y zero there, the reverse direction from each
// sequence's own end, zero final states for an empty sequence: ONNX Runtime's behaviour),
// initial states, peepholes, clip, linear_before_reset, input_forget, activations with their
// parameters, batch-first layout, and the errors.
#include <kiln/frontend/onnx/import.hpp>

#include "../../common/message_of.hpp"
#include "model_builder.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace kiln;
namespace kx = kiln::frontend::onnx;
using kiln_test::message_of;
using kiln_test::model_builder;

namespace {

using fn = std::function<float(float)>;
const fn sigmoid = [](float x) { return 1 / (1 + std::exp(-x)); };
const fn tanh_ = [](float x) { return std::tanh(x); };

/// One recurrent layer: its configuration, its data, and the reference outputs.
struct layer {
  std::string op;  // RNN, GRU, LSTM
  std::int64_t seq = 5, batch = 3, input = 4, hidden = 6;
  std::string direction = "forward";
  bool bias = true, peepholes = false, initial = false, weights_as_initializers = false;
  std::vector<std::int32_t> lens{};  // empty: none given
  std::optional<double> clip{};
  bool linear_before_reset = false, input_forget = false;
  std::vector<std::string> activations{};  // empty: the attribute is absent
  std::vector<float> alphas{}, betas{};
  std::vector<fn> functions{};  // what the reference applies: per direction, f (g, h)
  int opset = 14;

  std::int64_t directions() const { return direction == "bidirectional" ? 2 : 1; }
  std::int64_t gates() const { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }
};

struct layer_data {
  std::vector<float> x, w, r, b, h0, c0, p;
};

layer_data random_layer_data(const layer& l, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  const auto fill = [&](std::int64_t n, float scale) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& e : v) e = u(gen) * scale;
    return v;
  };
  const std::int64_t D = l.directions(), G = l.gates(), H = l.hidden;
  layer_data d;
  d.x = fill(l.seq * l.batch * l.input, 1);
  d.w = fill(D * G * H * l.input, 0.7f);
  d.r = fill(D * G * H * H, 0.7f);
  d.b = fill(D * 2 * G * H, 0.5f);
  d.h0 = fill(D * l.batch * H, 1);
  d.c0 = fill(D * l.batch * H, 1);
  d.p = fill(D * 3 * H, 0.5f);
  return d;
}

struct layer_outputs {
  std::vector<float> y, y_h, y_c;  // [seq, D, batch, H], [D, batch, H], [D, batch, H]
};

/// The reference: each direction, sequence and step in turn, from the definitions.
layer_outputs reference(const layer& l, const layer_data& d) {
  const std::int64_t D = l.directions(), G = l.gates(), H = l.hidden, N = l.batch, I = l.input, T = l.seq;
  const auto hs = static_cast<std::size_t>(H);
  layer_outputs o;
  o.y.assign(std::size_t(T * D * N * H), 0.0f);
  o.y_h.assign(std::size_t(D * N * H), 0.0f);
  o.y_c.assign(std::size_t(D * N * H), 0.0f);
  const auto clip = [&](float v) { return l.clip ? std::clamp(v, float(-*l.clip), float(*l.clip)) : v; };
  const std::size_t per_direction = l.functions.size() / std::size_t(D);
  for (std::int64_t dir = 0; dir < D; ++dir) {
    const bool reverse = l.direction == "reverse" || dir == 1;
    const fn* f = &l.functions[std::size_t(dir) * per_direction];
    // pre(g, j): gate g's row j of x W^T + Wb (+ h R^T + Rb when `with_r`)
    const auto at = [](const std::vector<float>& v, std::int64_t i) { return v[std::size_t(i)]; };
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t len = l.lens.empty() ? T : l.lens[std::size_t(n)];
      std::vector<float> h(std::size_t(H), 0.0f), c(std::size_t(H), 0.0f);
      if (l.initial)
        for (std::int64_t j = 0; j < H; ++j) {
          h[std::size_t(j)] = at(d.h0, (dir * N + n) * H + j);
          c[std::size_t(j)] = at(d.c0, (dir * N + n) * H + j);
        }
      for (std::int64_t k = 0; k < len; ++k) {
        const std::int64_t t = reverse ? len - 1 - k : k;
        const auto xw = [&](std::int64_t g, std::int64_t j) {
          float s = l.bias ? at(d.b, dir * 2 * G * H + g * H + j) : 0.0f;
          for (std::int64_t i = 0; i < I; ++i) s += at(d.x, (t * N + n) * I + i) * at(d.w, ((dir * G + g) * H + j) * I + i);
          return s;
        };
        const auto hr = [&](std::int64_t g, std::int64_t j, const std::vector<float>& state) {
          float s = l.bias ? at(d.b, dir * 2 * G * H + G * H + g * H + j) : 0.0f;
          for (std::int64_t m = 0; m < H; ++m) s += state[std::size_t(m)] * at(d.r, ((dir * G + g) * H + j) * H + m);
          return s;
        };
        std::vector<float> hn(hs), cn(hs);
        if (l.op == "RNN") {
          for (std::int64_t j = 0; j < H; ++j) hn[std::size_t(j)] = f[0](clip(xw(0, j) + hr(0, j, h)));
        } else if (l.op == "GRU") {  // gates z, r, h
          std::vector<float> z(hs), r(hs), rh(hs);
          for (std::int64_t j = 0; j < H; ++j) {
            z[std::size_t(j)] = f[0](clip(xw(0, j) + hr(0, j, h)));
            r[std::size_t(j)] = f[0](clip(xw(1, j) + hr(1, j, h)));
            rh[std::size_t(j)] = r[std::size_t(j)] * h[std::size_t(j)];
          }
          for (std::int64_t j = 0; j < H; ++j) {
            float pre;
            if (l.linear_before_reset) pre = xw(2, j) + r[std::size_t(j)] * hr(2, j, h);
            else pre = xw(2, j) + hr(2, j, rh);
            const float cand = f[1](clip(pre));
            hn[std::size_t(j)] = (1 - z[std::size_t(j)]) * cand + z[std::size_t(j)] * h[std::size_t(j)];
          }
        } else {  // gates i, o, f, c; peepholes i, o, f
          const auto peep = [&](std::int64_t which, std::int64_t j, float state) {
            return l.peepholes ? at(d.p, dir * 3 * H + which * H + j) * state : 0.0f;
          };
          for (std::int64_t j = 0; j < H; ++j) {
            const std::size_t js = std::size_t(j);
            const float i = f[0](clip(xw(0, j) + hr(0, j, h) + peep(0, j, c[js])));
            const float fg = l.input_forget ? 1 - i : f[0](clip(xw(2, j) + hr(2, j, h) + peep(2, j, c[js])));
            const float cand = f[1](clip(xw(3, j) + hr(3, j, h)));
            cn[js] = fg * c[js] + i * cand;
            const float og = f[0](clip(xw(1, j) + hr(1, j, h) + peep(1, j, cn[js])));
            hn[js] = og * f[2](cn[js]);
          }
        }
        h = hn;
        if (l.op == "LSTM") c = cn;
        for (std::int64_t j = 0; j < H; ++j) o.y[std::size_t(((t * D + dir) * N + n) * H + j)] = h[std::size_t(j)];
      }
      for (std::int64_t j = 0; j < H; ++j) {
        o.y_h[std::size_t((dir * N + n) * H + j)] = len > 0 ? h[std::size_t(j)] : 0.0f;
        o.y_c[std::size_t((dir * N + n) * H + j)] = len > 0 ? c[std::size_t(j)] : 0.0f;
      }
    }
  }
  return o;
}

/// The ONNX model of layer `l` (layout 0) over data `d`: X, sequence_lens and the states are graph
/// inputs; W, R, B and P are inputs too, or initializers.
model_builder onnx_model(const layer& l, const layer_data& d, const std::vector<std::string>& outs) {
  const std::int64_t D = l.directions(), G = l.gates(), H = l.hidden;
  const auto s = [](std::int64_t v) { return std::to_string(v); };
  model_builder b(l.opset);
  std::vector<std::string> ins{"X", "W", "R"};
  b.input("X", {s(l.seq), s(l.batch), s(l.input)});
  const auto weight = [&](const std::string& name, std::vector<std::int64_t> dims, const std::vector<float>& v) {
    if (l.weights_as_initializers) b.initializer(name, dims, v);
    else {
      std::vector<std::string> ds;
      for (auto x : dims) ds.push_back(s(x));
      b.input(name, ds);
    }
  };
  weight("W", {D, G * H, l.input}, d.w);
  weight("R", {D, G * H, H}, d.r);
  const auto optional = [&](bool given, const std::string& name) { ins.push_back(given ? name : ""); };
  optional(l.bias, "B");
  if (l.bias) weight("B", {D, 2 * G * H}, d.b);
  optional(!l.lens.empty(), "L");
  if (!l.lens.empty()) b.input("L", {s(l.batch)}, ::onnx::TensorProto::INT32);
  optional(l.initial, "H0");
  if (l.initial) b.input("H0", {s(D), s(l.batch), s(H)});
  if (l.op == "LSTM") {
    optional(l.initial, "C0");
    if (l.initial) b.input("C0", {s(D), s(l.batch), s(H)});
    optional(l.peepholes, "P");
    if (l.peepholes) weight("P", {D, 3 * H}, d.p);
  }
  while (ins.back().empty()) ins.pop_back();
  auto& n = b.node(l.op, ins, outs, "rec");
  model_builder::attr(n, "hidden_size", H);
  if (l.direction != "forward") model_builder::attr(n, "direction", l.direction.c_str());
  if (l.clip) model_builder::attr_float(n, "clip", *l.clip);
  if (l.linear_before_reset) model_builder::attr(n, "linear_before_reset", std::int64_t{1});
  if (l.input_forget) model_builder::attr(n, "input_forget", std::int64_t{1});
  if (!l.activations.empty()) model_builder::attr_strings(n, "activations", l.activations);
  if (!l.alphas.empty()) model_builder::attr_floats(n, "activation_alpha", l.alphas);
  if (!l.betas.empty()) model_builder::attr_floats(n, "activation_beta", l.betas);
  const std::vector<std::string> y{s(l.seq), s(D), s(l.batch), s(H)}, state{s(D), s(l.batch), s(H)};
  for (std::size_t i = 0; i < outs.size(); ++i)
    if (!outs[i].empty()) b.output(outs[i], i == 0 ? y : state);
  return b;
}

/// The model's arguments, in the order of its inputs.
std::vector<vm::value> arguments(const layer& l, const layer_data& d) {
  const std::int64_t D = l.directions(), G = l.gates(), H = l.hidden;
  std::vector<vm::value> args{vm::value(kiln_test::floats({l.seq, l.batch, l.input}, d.x))};
  if (!l.weights_as_initializers) {
    args.emplace_back(kiln_test::floats({D, G * H, l.input}, d.w));
    args.emplace_back(kiln_test::floats({D, G * H, H}, d.r));
    if (l.bias) args.emplace_back(kiln_test::floats({D, 2 * G * H}, d.b));
  }
  if (!l.lens.empty()) args.emplace_back(runtime::tensor::from_values<std::int32_t>({l.batch}, l.lens));
  if (l.initial) {
    args.emplace_back(kiln_test::floats({D, l.batch, H}, d.h0));
    if (l.op == "LSTM") args.emplace_back(kiln_test::floats({D, l.batch, H}, d.c0));
  }
  if (l.op == "LSTM" && l.peepholes && !l.weights_as_initializers) args.emplace_back(kiln_test::floats({D, 3 * H}, d.p));
  return args;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(what);
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-4).scale(1));
  }
}

/// Imports, compiles and runs layer `l` on random data and compares every output with the reference.
void check_layer(const layer& l, unsigned seed = 7) {
  const layer_data d = random_layer_data(l, seed);
  const layer_outputs want = reference(l, d);
  const bool lstm = l.op == "LSTM";
  const std::vector<std::string> outs = lstm ? std::vector<std::string>{"Y", "Y_h", "Y_c"} : std::vector<std::string>{"Y", "Y_h"};
  model_builder b = onnx_model(l, d, outs);
  const vm::value got = kiln_test::run(kx::import_model(b.m), arguments(l, d));
  check_close(got.as_tuple()[0].as_tensor().to_vector<float>(), want.y, "Y");
  check_close(got.as_tuple()[1].as_tensor().to_vector<float>(), want.y_h, "Y_h");
  if (lstm) check_close(got.as_tuple()[2].as_tensor().to_vector<float>(), want.y_c, "Y_c");
}

}  // namespace

TEST_CASE("LSTM: bidirectional, peepholes, initial states, sequence lengths (one of them 0), weights as constants") {
  layer l{.op = "LSTM", .direction = "bidirectional", .peepholes = true, .initial = true, .weights_as_initializers = true, .lens = {5, 2, 0}};
  l.functions = {sigmoid, tanh_, tanh_, sigmoid, tanh_, tanh_};
  check_layer(l);
  l.lens = {};
  l.weights_as_initializers = false;
  check_layer(l);
}

TEST_CASE("GRU: reverse with sequence lengths, linear_before_reset off and on, clip, initial state") {
  for (bool lbr : {false, true}) {
    CAPTURE(lbr);
    layer l{.op = "GRU", .direction = "reverse", .initial = true, .lens = {3, 5, 1}, .clip = 0.8, .linear_before_reset = lbr};
    l.functions = {sigmoid, tanh_};
    check_layer(l);
  }
  layer bi{.op = "GRU", .seq = 4, .batch = 2, .direction = "bidirectional", .bias = false, .linear_before_reset = true};
  bi.functions = {sigmoid, tanh_, sigmoid, tanh_};
  check_layer(bi);
}

TEST_CASE("RNN: activations with their alphas and betas, taken in order by the functions that have them") {
  // LeakyRelu takes alpha 0.2, HardSigmoid alpha 0.3 and beta 0.6.
  layer l{.op = "RNN", .direction = "bidirectional", .bias = false, .activations = {"LeakyRelu", "HardSigmoid"}, .alphas = {0.2f, 0.3f}, .betas = {0.6f}};
  l.functions = {[](float x) { return x > 0 ? x : 0.2f * x; }, [](float x) { return std::clamp(0.3f * x + 0.6f, 0.0f, 1.0f); }};
  check_layer(l);
  // Defaults, and RNN's two-entry default list [Tanh, Tanh] on one direction (the first is used).
  layer one{.op = "RNN", .activations = {"Relu", "Tanh"}};
  one.functions = {[](float x) { return std::max(x, 0.0f); }};
  check_layer(one);
  layer plain{.op = "RNN", .seq = 1, .clip = 0.5};
  plain.functions = {tanh_};
  check_layer(plain);
}

TEST_CASE("LSTM: input_forget couples the forget gate to the input gate, with parameterised and parameterless activations") {
  // ScaledTanh takes alpha 1.5 and beta 0.5; Elu finds no alpha left and has its default, 1.
  layer l{.op = "LSTM", .peepholes = true, .initial = true, .input_forget = true, .activations = {"HardSigmoid", "ScaledTanh", "Elu"},
          .alphas = {0.25f, 1.5f}, .betas = {0.4f, 0.5f}};
  l.functions = {[](float x) { return std::clamp(0.25f * x + 0.4f, 0.0f, 1.0f); }, [](float x) { return 1.5f * std::tanh(0.5f * x); },
                 [](float x) { return x > 0 ? x : std::exp(x) - 1; }};
  check_layer(l);
  layer soft{.op = "LSTM", .seq = 3, .activations = {"Softsign", "Softplus", "Affine"}, .alphas = {2.0f}, .betas = {-0.5f}};
  soft.functions = {[](float x) { return x / (1 + std::fabs(x)); }, [](float x) { return std::log(1 + std::exp(x)); },
                    [](float x) { return 2 * x - 0.5f; }};
  check_layer(soft);
}

TEST_CASE("recurrent layers: opset 7 without layout, outputs left out, batch-first layout (opset 14)") {
  // Only Y_h asked for, at opset 7.
  layer l{.op = "LSTM", .opset = 7};
  l.functions = {sigmoid, tanh_, tanh_};
  const layer_data d = random_layer_data(l, 3);
  const layer_outputs want = reference(l, d);
  model_builder b = onnx_model(l, d, {"", "Y_h"});
  check_close(kiln_test::run(kx::import_model(b.m), arguments(l, d)).as_tensor().to_vector<float>(), want.y_h, "Y_h");

  // layout 1: X [batch, seq, input], states [batch, D, H], Y [batch, seq, D, H]: the same numbers
  // as layout 0, transposed.
  layer g{.op = "GRU", .seq = 4, .batch = 2, .input = 3, .hidden = 5, .direction = "bidirectional", .initial = true};
  g.functions = {sigmoid, tanh_, sigmoid, tanh_};
  const layer_data gd = random_layer_data(g, 5);
  const layer_outputs gw = reference(g, gd);
  model_builder bf(14);
  bf.input("X", {"2", "4", "3"});
  bf.initializer("W", {2, 15, 3}, gd.w);
  bf.initializer("R", {2, 15, 5}, gd.r);
  bf.initializer("B", {2, 30}, gd.b);
  bf.input("H0", {"2", "2", "5"});
  auto& n = bf.node("GRU", {"X", "W", "R", "B", "", "H0"}, {"Y", "Y_h"});
  model_builder::attr(n, "hidden_size", std::int64_t{5});
  model_builder::attr(n, "direction", "bidirectional");
  model_builder::attr(n, "layout", std::int64_t{1});
  bf.output("Y", {"2", "4", "2", "5"});
  bf.output("Y_h", {"2", "2", "5"});
  std::vector<float> x(gd.x.size()), h0(gd.h0.size());
  for (std::int64_t t = 0; t < 4; ++t)  // [T, N, I] -> [N, T, I]
    for (std::int64_t nn = 0; nn < 2; ++nn)
      for (std::int64_t i = 0; i < 3; ++i) x[std::size_t((nn * 4 + t) * 3 + i)] = gd.x[std::size_t((t * 2 + nn) * 3 + i)];
  for (std::int64_t dir = 0; dir < 2; ++dir)  // [D, N, H] -> [N, D, H]
    for (std::int64_t nn = 0; nn < 2; ++nn)
      for (std::int64_t j = 0; j < 5; ++j) h0[std::size_t((nn * 2 + dir) * 5 + j)] = gd.h0[std::size_t((dir * 2 + nn) * 5 + j)];
  const vm::value got = kiln_test::run(kx::import_model(bf.m), {vm::value(kiln_test::floats({2, 4, 3}, x)), vm::value(kiln_test::floats({2, 2, 5}, h0))});
  std::vector<float> y(gw.y.size()), yh(gw.y_h.size());
  for (std::int64_t t = 0; t < 4; ++t)  // [T, D, N, H] -> [N, T, D, H]
    for (std::int64_t dir = 0; dir < 2; ++dir)
      for (std::int64_t nn = 0; nn < 2; ++nn)
        for (std::int64_t j = 0; j < 5; ++j) y[std::size_t(((nn * 4 + t) * 2 + dir) * 5 + j)] = gw.y[std::size_t(((t * 2 + dir) * 2 + nn) * 5 + j)];
  for (std::int64_t dir = 0; dir < 2; ++dir)
    for (std::int64_t nn = 0; nn < 2; ++nn)
      for (std::int64_t j = 0; j < 5; ++j) yh[std::size_t((nn * 2 + dir) * 5 + j)] = gw.y_h[std::size_t((dir * 2 + nn) * 5 + j)];
  check_close(got.as_tuple()[0].as_tensor().to_vector<float>(), y, "Y");
  check_close(got.as_tuple()[1].as_tensor().to_vector<float>(), yh, "Y_h");
}

TEST_CASE("recurrent layers: errors name the node and what is wrong") {
  const auto import = [](const std::vector<std::string>& x_dims, std::int64_t w_rows, auto&& configure) {
    model_builder b(14);
    b.input("X", x_dims);
    b.input("W", {"1", std::to_string(w_rows), "3"});
    b.input("R", {"1", "12", "3"});
    auto& n = b.node("LSTM", {"X", "W", "R"}, {"Y"}, "lstm");
    configure(n);
    b.output("Y", {});
    return message_of<kx::import_error>([&] { kx::import_model(b.m); });
  };
  const auto nothing = [](::onnx::NodeProto&) {};
  const std::string at = "kiln::frontend::onnx: node 'lstm' (LSTM): ";
  CHECK(import({"s", "2", "3"}, 12, nothing) == at + "the sequence length must be static (kiln unrolls the sequence); fix it with import_options::shapes");
  CHECK(import({"4", "2", "3"}, 8, nothing) ==
        at + "W has shape R.Tensor((1, 8, 3), \"float32\"); expected [1, 12, 3] for LSTM with hidden_size 3 and 1 direction(s)");
  CHECK(import({"4", "2", "3"}, 12, [](::onnx::NodeProto& n) { model_builder::attr(n, "hidden_size", std::int64_t{4}); }) ==
        at + "W has shape R.Tensor((1, 12, 3), \"float32\"); expected [1, 16, 3] for LSTM with hidden_size 4 and 1 direction(s)");
  CHECK(import({"4", "2", "3"}, 12, [](::onnx::NodeProto& n) { model_builder::attr(n, "direction", "sideways"); }) ==
        at + "direction must be forward, reverse or bidirectional, not 'sideways'");
  CHECK(import({"4", "2", "3"}, 12, [](::onnx::NodeProto& n) { model_builder::attr_strings(n, "activations", {"Sigmoid", "Swish", "Tanh"}); }) ==
        at + "activation function 'Swish' is not one of ONNX's (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
             "HardSigmoid, Elu, Softsign, Softplus)");
  CHECK(import({"4", "2", "3"}, 12, [](::onnx::NodeProto& n) { model_builder::attr_strings(n, "activations", {"Sigmoid", "Tanh"}); }) ==
        at + "activations has 2 functions; expected 3 per direction, for 1 direction(s)");
  CHECK(import({"4", "2", "3"}, 12, [](::onnx::NodeProto& n) { model_builder::attr_float(n, "clip", -1.0); }) == at + "clip must be positive");
  CHECK(import({"4", "2"}, 12, nothing) ==
        at + "X must have rank 3 ([seq_length, batch_size, input_size], or batch first with layout 1), has rank 2");
}
