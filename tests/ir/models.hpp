// SPDX-License-Identifier: Apache-2.0
// A corpus of modules built with the block builder, shared by the IR tests: an MLP, a small CNN,
// a transformer encoder layer, control flow with match_cast, and kernels called through call_tir.
// Used by the tests and the benchmarks; free of any test framework.
#pragma once

#include <kiln/ir/ir.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kiln_test {

namespace ir = kiln::ir;
using kiln::dtype;

inline ir::type f32(std::vector<ir::prim_expr> shape) { return ir::tensor_type(std::move(shape), dtype::float32); }
inline ir::type f32(std::initializer_list<std::int64_t> shape) { return ir::tensor_type(shape, dtype::float32); }
inline ir::prim_expr dim(std::int64_t v) { return ir::make_int(v); }

inline ir::ir_module make_mlp() {
  auto n = ir::make_size_var("n");
  auto x = ir::make_var("x", f32({n, dim(784)}));
  auto w1 = ir::make_var("w1", f32({784, 128}));
  auto b1 = ir::make_var("b1", f32({128}));
  auto w2 = ir::make_var("w2", f32({128, 10}));
  ir::block_builder bb;
  bb.function(
      "main", {x, w1, b1, w2},
      [&] {
        return bb.dataflow([&] {
          auto h = bb.emit(ir::call_op("matmul", {x, w1}));
          h = bb.emit(ir::call_op("add", {h, b1}));
          h = bb.emit(ir::call_op("nn.relu", {h}));
          auto o = bb.emit(ir::call_op("matmul", {h, w2}));
          o = bb.emit(ir::call_op("add", {o, ir::make_constant(ir::ndarray::from<float>(dtype::float32, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}))}));
          return bb.emit_output(ir::call_op("nn.log_softmax", {o}));
        });
      },
      {{ir::attr::global_symbol, "main"}});
  return bb.module();
}

inline ir::ir_module make_cnn() {
  auto n = ir::make_size_var("n");
  auto x = ir::make_var("data", f32({n, dim(3), dim(32), dim(32)}));
  auto w1 = ir::make_var("conv1_w", f32({16, 3, 3, 3}));
  auto w2 = ir::make_var("conv2_w", f32({16, 1, 3, 3}));  // depthwise
  auto fc = ir::make_var("fc_w", f32({16, 10}));
  ir::block_builder bb;
  bb.function("main", {x, w1, w2, fc}, [&] {
    return bb.dataflow([&] {
      auto c = bb.emit(ir::call_op("nn.conv2d", {x, w1}, {{"padding", ir::int_array{1}}}));
      c = bb.emit(ir::call_op("nn.relu", {c}));
      c = bb.emit(ir::call_op("nn.max_pool2d", {c}, {{"pool_size", ir::int_array{2, 2}}, {"strides", ir::int_array{2, 2}}}));
      c = bb.emit(ir::call_op("nn.conv2d", {c, w2}, {{"padding", ir::int_array{1, 1}}, {"groups", 16}}));
      c = bb.emit(ir::call_op("nn.avg_pool2d", {c}, {{"pool_size", ir::int_array{3}}, {"strides", ir::int_array{2}}, {"padding", ir::int_array{1}}, {"ceil_mode", true}}));
      c = bb.emit(ir::call_op("nn.pad", {c}, {{"pad_width", ir::int_array{0, 0, 0, 0, 1, 1, 1, 1}}, {"pad_mode", "reflect"}}));
      c = bb.emit(ir::call_op("nn.adaptive_avg_pool2d", {c}, {{"output_size", ir::int_array{2, 2}}}));
      c = bb.emit(ir::call_op("nn.global_avg_pool2d", {c}));
      auto flat = bb.emit(ir::call_op("reshape", {c, ir::make_shape_expr({n, dim(16)})}));
      auto logits = bb.emit(ir::call_op("matmul", {flat, fc}));
      auto cls = bb.emit(ir::call_op("argmax", {logits}, {{"axis", 1}}));
      return bb.emit_output(ir::make_tuple({logits, cls}));
    });
  });
  return bb.module();
}

inline ir::ir_module make_transformer_layer() {
  auto b = ir::make_size_var("batch");
  auto s = ir::make_size_var("seq");
  const std::int64_t d = 64, heads = 4, dh = 16, ffn = 256;
  auto x = ir::make_var("x", f32({b, s, dim(d)}));
  auto wqkv = ir::make_var("w_qkv", f32({d, 3 * d}));
  auto wo = ir::make_var("w_o", f32({d, d}));
  auto g1 = ir::make_var("ln1_gamma", f32({d}));
  auto be1 = ir::make_var("ln1_beta", f32({d}));
  auto w1 = ir::make_var("ffn_w1", f32({d, ffn}));
  auto w2 = ir::make_var("ffn_w2", f32({ffn, d}));
  auto mask = ir::make_var("mask", ir::tensor_type({b, dim(1), s, s}, dtype::bool_));
  ir::block_builder bb;
  bb.function("encoder_layer", {x, wqkv, wo, g1, be1, w1, w2, mask}, [&] {
    return bb.dataflow([&] {
      auto ln = bb.emit(ir::call_op("nn.layer_norm", {x, g1, be1}, {{"axes", ir::int_array{-1}}, {"epsilon", 1e-6}}));
      auto qkv = bb.emit(ir::call_op("matmul", {ln, wqkv}));
      auto parts = bb.emit(ir::call_op("split", {qkv}, {{"sections", 3}, {"axis", -1}}));
      auto heads_of = [&](int i, std::vector<std::int64_t> perm) {
        auto t = bb.emit(ir::make_tuple_get_item(parts, i));
        auto r = bb.emit(ir::call_op("reshape", {t, ir::make_shape_expr({b, s, dim(heads), dim(dh)})}));
        return bb.emit(ir::call_op("permute_dims", {r}, {{"axes", ir::int_array(perm.begin(), perm.end())}}));
      };
      auto q = heads_of(0, {0, 2, 1, 3});
      auto k = heads_of(1, {0, 2, 3, 1});
      auto v = heads_of(2, {0, 2, 1, 3});
      auto scores = bb.emit(ir::call_op("matmul", {q, k}));
      scores = bb.emit(ir::call_op("multiply", {scores, ir::make_constant(0.25, dtype::float32)}));
      scores = bb.emit(ir::call_op("where", {mask, scores, ir::make_constant(-1e9, dtype::float32)}));
      auto p = bb.emit(ir::call_op("nn.softmax", {scores}, {{"axis", -1}}));
      auto ctx = bb.emit(ir::call_op("matmul", {p, v}));
      ctx = bb.emit(ir::call_op("permute_dims", {ctx}, {{"axes", ir::int_array{0, 2, 1, 3}}}));
      ctx = bb.emit(ir::call_op("reshape", {ctx, ir::make_shape_expr({b, s, dim(d)})}));
      auto attn = bb.emit(ir::call_op("matmul", {ctx, wo}));
      auto h = bb.emit(ir::call_op("add", {x, attn}));
      auto f = bb.emit(ir::call_op("matmul", {h, w1}));
      f = bb.emit(ir::call_op("nn.gelu", {f}, {{"approximate", "tanh"}}));
      f = bb.emit(ir::call_op("matmul", {f, w2}));
      return bb.emit_output(ir::call_op("add", {h, f}));
    });
  });
  return bb.module();
}

/// Control flow, match_cast, shapes, prim values, strings, calls between functions (one of them
/// forward), an external call and kernels through call_tir.
inline ir::ir_module make_misc() {
  ir::block_builder bb;
  // a kernel with a body, and an extern kernel declaration
  auto m = ir::make_size_var("m");
  auto ka = ir::make_var("a", f32({m, dim(4)}));
  auto kb = ir::make_var("b", f32({m, dim(4)}));
  auto kout = ir::make_var("out", f32({m, dim(4)}));
  auto body = ir::make_seq({}, ir::call_op("maximum", {ir::call_op("add", {ka, kb}), ir::make_constant(0.0, dtype::float32)}));
  bb.add_function("fused_add_relu", ir::make_prim_func({ka, kb, kout}, 1, body));
  auto p = ir::make_var("p", f32({8}));
  auto q1 = ir::make_var("q1", f32({8}));
  auto q2 = ir::make_var("q2", ir::tensor_type({8}, dtype::int32));
  bb.add_function("extern_kernel", ir::make_prim_func({p, q1, q2}, 2, {}, {{ir::attr::global_symbol, "my_kernel"}}));

  // a helper called by main
  auto hx = ir::make_var("x", ir::tensor_type_of_rank(dtype::float32, 2));
  bb.function("helper", {hx}, [&] { return bb.emit(ir::call_op("exp", {hx})); }, {{ir::attr::skip_optimization, true}});

  auto n = ir::make_size_var("n");
  auto x = ir::make_var("x", f32({n, dim(4)}));
  auto flag = ir::make_var("flag", ir::prim_type(dtype::bool_));
  auto anything = ir::make_var("obj", ir::object_type());
  bb.function("main", {x, flag, anything}, [&] {
    auto kernel = bb.get_global_var("fused_add_relu");
    auto y = bb.emit(ir::call_tir(kernel, {x, x}, f32({n, dim(4)})), "y");
    auto two = bb.emit(ir::call_tir(bb.get_global_var("extern_kernel"), {ir::make_constant(ir::ndarray::from<float>(dtype::float32, {8}, {1, 2, 3, 4, 5, 6, 7, 8}))},
                                    ir::tuple_type({f32({8}), ir::tensor_type({8}, dtype::int32)})));
    auto first = bb.emit(ir::make_tuple_get_item(two, 0));
    auto cast = bb.emit_match_cast(anything, ir::tensor_type({ir::make_size_var("k"), dim(4)}, dtype::float32), "cast");
    auto sel = bb.emit(ir::make_if(flag, ir::make_seq({}, y), ir::make_seq({{false, {{ir::make_var("t", f32({n, dim(4)})), ir::call_op("negative", {y}), {}}}}}, y)), "sel");
    auto sh = bb.emit(ir::make_shape_expr({n * 2, dim(4)}), "sh");
    auto pv = bb.emit(ir::make_prim_value(n + 1), "pv");
    auto fv = bb.emit(ir::make_float_prim_value(0.5, dtype::float64), "fv");
    auto ext = bb.emit(ir::call_extern("runtime.print", {ir::make_string_imm("shape \"n\"\n"), sh, pv, fv}, ir::object_type()), "ext");
    auto h = bb.emit(bb.call("helper", {sel}), "h");
    auto cmp = bb.emit(ir::call_op("less", {h, cast}), "cmp");
    (void)first;
    (void)ext;
    return ir::make_tuple({h, cmp, sh});
  });
  return bb.module();
}

/// Every module of the corpus, by name.
inline std::vector<std::pair<std::string, ir::ir_module>> corpus() {
  return {{"mlp", make_mlp()}, {"cnn", make_cnn()}, {"transformer", make_transformer_layer()}, {"misc", make_misc()}};
}

}  // namespace kiln_test
