// SPDX-License-Identifier: Apache-2.0
/// \file
/// `prepack_weights`: a matmul whose right operand is a constant matrix — a dense layer's
/// weight — gets that weight packed, once, at compile time, into the panels the GEMM's
/// micro-kernel reads (`kernels::prepack_weight`), and calls the kernel that reads them in place:
///
///     lv = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused"), (x, R.const(w), R.prim_value(0, "bool"),
///                            R.prim_value(1, "bool"), R.str("(relu (add x0 x1)) ; lv"), b), out_sinfo=...)
///  -> lv = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused_prepacked"), (x, R.const(w packed),
///                            R.prim_value(0, "bool"), R.shape([K, N, nr, kc]), R.str("(relu (add x0 x1)) ; lv"), b),
///                            out_sinfo=...)
///
/// Without it the GEMM packs every column panel of the weight on every call: for a batch of 64
/// rows through a 784 x 512 layer that is a sixth of the time. The packed constant replaces the
/// weight (a weight with transposed storage, as ONNX's Gemm keeps it, is packed transposed:
/// the kernel then reads it like any other), and a weight used by several matmuls is packed
/// once. `[K, N, nr, kc]` records the layout (`kernels::packed_weight_layout`): an executable
/// run where the vectors have another width than where it was compiled still gives the same
/// results, by unpacking the weight first.
///
/// A one-group convolution with a constant weight and a window of more than one tap
/// (`kernels::prefer_prepacked_conv`) gets its weight reordered for the direct kernel
/// (`kernels::prepack_conv_weight`: blocks of output channels along the vectors), which then
/// serves it whatever the output's size — without it the direct kernel reorders the weight on
/// every call, which pays only for outputs of 256 positions and more, and smaller ones (ResNet's
/// last two stages) go through the GEMM:
///
///     lv = R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused"), (x, R.const(w), b, R.shape([1, 1]), R.shape([1, 1, 1, 1]),
///                            R.shape([1, 1]), R.prim_value(1), R.str("(relu x0) ; lv")), out_sinfo=...)
///  -> lv = R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused_prepacked"), (x, R.const(w packed), b, R.shape([O, C, KH, KW, ob]),
///                            R.shape([1, 1]), R.shape([1, 1, 1, 1]), R.shape([1, 1]), R.str("(relu x0) ; lv")), out_sinfo=...)
///
/// A 1 x 1 convolution (stride 1, no padding, one group) whose output has few positions and
/// whose input many channels (`kernels::prefer_pointwise_conv`: 16 to 400 positions that W X
/// would round up to whole vector panels — the 7 x 7 and 14 x 14 stages — and enough channels
/// to pay for transposing the output) gets its weight transposed and packed as a matmul's
/// (`kernels::prepack_conv_weight_pointwise`, layout `[C, O, nr, kc]` as for a matmul) and calls
/// the kernel that computes X^T W^T, the output channels along the vectors:
///
///  -> lv = R.call_dps_packed(R.ExternFunc("kernels.conv2d_pointwise"), (x, R.const(W^T packed), b, R.shape([C, O, nr, kc]),
///                            R.shape([1, 1]), R.shape([0, 0, 0, 0]), R.shape([1, 1])), out_sinfo=...)
///
/// A stride-1 3 x 3 convolution (one group, no dilation) whose output's size is known and for
/// which Winograd's algorithm is the faster kernel (`kernels::prefer_winograd_conv`: enough
/// channels in and out and at least 32 tiles of 2 x 2 outputs — ResNet's 56², 28² and 14²
/// stages, SqueezeNet's fire modules, DenseNet's 3x3 layers but the last block's) gets its
/// weight transformed instead for F(m x m, 3x3), m = 4 where the output has enough 4 x 4 tiles,
/// else 2 (`kernels::winograd_tile_size`; `kernels::prepack_conv_weight_winograd`: U = G g G^T
/// as (m+2)² O x C matrices in the GEMM's A panels of mr output channels and blocks of kc input
/// channels), and calls the Winograd kernel:
///
///  -> lv = R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused_winograd"), (x, R.const(U), b, R.shape([O, C, m, mr, kc]),
///                            R.shape([1, 1]), R.shape([1, 1, 1, 1]), R.shape([1, 1]), R.str("(relu x0) ; lv")), out_sinfo=...)
///
/// Runs at opt level 1, after `legalize_ops` (it rewrites kernel calls) and before
/// `call_tir_rewrite`. Left alone: integer matmuls and convolutions, weights that are
/// parameters, batched (3-D and up) or vector matmul weights, a constant used as the left
/// operand, grouped convolutions, and 1 x 1 convolutions but those above.
#pragma once

#include <kiln/kernels/packing.hpp>
#if !defined(KILN_SEPARATE_COMPILATION)  // header-only: the definitions of packing.hpp's functions (support/config.hpp)
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/nn.hpp>
#endif
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/detail/fusion.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/kernel_lowering.hpp>
#include <kiln/transform/properties.hpp>
#include <kiln/transform/tensor_conversion.hpp>

#include <map>
#include <optional>
#include <utility>

namespace kiln::transform {

/// The largest output tile of Winograd's F(m x m, 3x3) that `prepack_weights` chooses: 4 (the
/// default: F(2x2) or F(4x4), whichever is the faster), 2 (F(2x2) only, which rounds closer to
/// the direct convolution) or 0 (no Winograd: the direct kernel for every convolution).
inline const pass_config_option<std::int64_t>& winograd_max_tile_option() {
  static const pass_config_option<std::int64_t> option{
      "kiln.prepack_weights.winograd_max_tile",
      "largest Winograd output tile prepack_weights chooses for 3x3 convolutions: 4 (default), 2 (F(2x2, 3x3) only) or 0 (none)"};
  return option;
}

struct prepack_weights {
  static constexpr std::string_view name = "prepack_weights";
  static constexpr std::string_view description =
      "Packs constant matmul and convolution weights into the GEMM's blocked layout once, at compile time.";
  static constexpr int opt_level = 1;
  using needs = property_list<properties::legalized>;

  ir::function operator()(const ir::function& f, const ir::ir_module&, pass_context& ctx) const {
    if (ir::detail::has_skip_optimization(*f)) return f;
    const std::int64_t max_tile = ctx.config(winograd_max_tile_option(), std::int64_t{4});
    if (max_tile != 0 && max_tile != 2 && max_tile != 4)
      throw usage_error(kiln::detail::concat("kiln::transform::prepack_weights: config option '", winograd_max_tile_option().key(),
                                             "' must be 0, 2 or 4, got ", max_tile));
    // Constants bound to variables of this function, and what each weight became (per weight
    // and transposition: a weight shared by several matmuls is packed once).
    std::map<const ir::var_node*, const ir::constant_node*> bound;
    std::map<std::pair<const ir::constant_node*, packing>, ir::expr> packed;
    std::int64_t matmuls = 0, convolutions = 0, winograd = 0, bytes = 0;
    auto on_body = [](const ir::expr& e) { return e; };
    auto on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out) {
      if (auto* c = ir::dyn_cast<ir::constant_node>(b.value)) bound.emplace(b.variable.get(), c);
      packing kind{};
      ir::expr call = rewrite(b.value, bound, packed, bytes, kind, max_tile);
      if (call) {
        ++(kind == packing::matmul || kind == packing::matmul_transposed ? matmuls : convolutions);
        if (kind == packing::winograd2_conv || kind == packing::winograd4_conv) ++winograd;
      }
      out.push_back({b.variable, call ? call : b.value, b.cast_type});
    };
    ir::function g = detail::with_body(f, detail::rewrite_seq(f->body, on_binding, on_body));
    if (matmuls || convolutions) {
      if (matmuls) ctx.statistic(name, "matmuls") += matmuls;
      if (convolutions) ctx.statistic(name, "convolutions") += convolutions;
      if (winograd) ctx.statistic(name, "of which Winograd") += winograd;
      ctx.statistic(name, "weights packed") += std::int64_t(packed.size());
      ctx.statistic(name, "bytes packed") += bytes;
    }
    return g;
  }

private:
  /// What a constant was packed for (a weight used in several ways is packed once per way).
  enum class packing { matmul, matmul_transposed, direct_conv, pointwise_conv, winograd2_conv, winograd4_conv };

  /// The prepacked form of kernel call `e`, or null when it has none; `kind`: what its weight was
  /// packed for.
  static ir::expr rewrite(const ir::expr& e, const std::map<const ir::var_node*, const ir::constant_node*>& bound,
                          std::map<std::pair<const ir::constant_node*, packing>, ir::expr>& packed, std::int64_t& bytes, packing& kind,
                          std::int64_t max_tile) {
    if (!detail::is_op_call(e, "call_dps_packed")) return {};
    auto& c = static_cast<const ir::call_node&>(*e);
    auto* callee = c.args.size() == 2 ? ir::dyn_cast<ir::extern_func_node>(c.args[0]) : nullptr;
    if (!callee) return {};
    namespace abi = kernels::abi;
    const std::string_view kernel = callee->symbol;
    if (kernel == abi::conv2d::name || kernel == abi::conv2d_fused::name) return rewrite_conv(c, kernel == abi::conv2d_fused::name, bound, packed, bytes, kind, max_tile);
    const bool fused = kernel == abi::matmul_fused::name;
    if (kernel != abi::matmul::name && !fused) return {};
    auto* t = ir::dyn_cast<ir::tuple_node>(c.args[1]);
    if (!t || t->fields.size() < (fused ? abi::matmul_fused::given : abi::matmul::given)) return {};
    const std::vector<ir::expr>& args = t->fields;
    // The weight: a constant matrix, in place or bound to a variable.
    const ir::constant_node* w = ir::dyn_cast<ir::constant_node>(args[1]);
    if (auto* v = ir::dyn_cast<ir::var_node>(args[1]); v && !w)
      if (auto it = bound.find(v); it != bound.end()) w = it->second;
    const std::optional<bool> tb = flag(args[3]);
    if (!w || !tb || !flag(args[2]) || w->data.shape().size() != 2 || (w->data.dt() != dtype::float32 && w->data.dt() != dtype::float64))
      return {};
    auto* at = ir::dyn_cast<ir::tensor_type_node>(args[0]->checked_type);
    if (!at || at->dt != w->data.dt()) return {};
    const std::int64_t k = w->data.shape()[*tb ? 1 : 0], n = w->data.shape()[*tb ? 0 : 1];
    kind = *tb ? packing::matmul_transposed : packing::matmul;
    ir::expr& p = packed[{w, kind}];
    if (!p) {
      const runtime::tensor weight = to_tensor(w->data);
      p = ir::make_constant(to_ndarray(kernels::prepack_weight(weight, *tb)));
      bytes += std::int64_t(static_cast<const ir::constant_node&>(*p).data.bytes().size());
    }
    const kernels::packed_weight_layout l = kernels::native_weight_layout(w->data.dt(), k, n);
    kernel_call out = lower::call<abi::matmul_prepacked>(args[0], p, lower::as<lower::arg::boolean>(args[2]), lower::ints({l.k, l.n, l.panels.nr, l.panels.kc}));
    if (fused) {  // the epilogue's description and operands, after the arguments of the unfused form
      static_assert(abi::is_fused_form_of<abi::matmul, abi::matmul_fused> && abi::is_fused_form_of<abi::matmul_prepacked, abi::matmul_fused_prepacked>);
      out.kernel = abi::matmul_fused_prepacked::name;
      out.args.insert(out.args.end(), args.begin() + abi::matmul::given, args.end());
    }
    return lower::emit(std::move(out), c.type_args[0]);
  }

  /// The prepacked form of a call of kernels.conv2d (`fused`: kernels.conv2d_fused), whose
  /// arguments are (x, w, bias, strides, padding, dilation, groups[, epilogue, operands...]).
  static ir::expr rewrite_conv(const ir::call_node& c, bool fused, const std::map<const ir::var_node*, const ir::constant_node*>& bound,
                               std::map<std::pair<const ir::constant_node*, packing>, ir::expr>& packed, std::int64_t& bytes, packing& kind,
                               std::int64_t max_tile) {
    namespace abi = kernels::abi;
    auto* t = ir::dyn_cast<ir::tuple_node>(c.args[1]);
    if (!t || t->fields.size() < (fused ? abi::conv2d_fused::given : abi::conv2d::given) || c.type_args.size() != 1) return {};
    const std::vector<ir::expr>& args = t->fields;
    const ir::constant_node* w = ir::dyn_cast<ir::constant_node>(args[1]);
    if (auto* v = ir::dyn_cast<ir::var_node>(args[1]); v && !w)
      if (auto it = bound.find(v); it != bound.end()) w = it->second;
    auto* groups = ir::dyn_cast<ir::prim_value_node>(args[6]);
    const std::optional<std::int64_t> g = groups && groups->int_value ? ir::as_int(groups->int_value) : std::nullopt;
    if (!w || !g || w->data.shape().size() != 4 || (w->data.dt() != dtype::float32 && w->data.dt() != dtype::float64)) return {};
    auto* xt = ir::dyn_cast<ir::tensor_type_node>(args[0]->checked_type);
    if (!xt || xt->dt != w->data.dt()) return {};
    // The output positions per image, where the output's shape says.
    auto* ot = ir::dyn_cast<ir::tensor_type_node>(c.type_args[0]);
    std::int64_t oh = -1, ow = -1;
    if (ot && ot->ndim == 4)
      if (const auto dh = ot->static_dim(2), dw = ot->static_dim(3); dh && dw) oh = *dh, ow = *dw;
    const std::int64_t positions = oh >= 0 ? oh * ow : -1;
    const std::vector<std::int64_t>& ws = w->data.shape();
    const std::optional<std::vector<std::int64_t>> strides = ints_of(args[3]), padding = ints_of(args[4]), dilation = ints_of(args[5]);
    // A 1 x 1 convolution of few positions: X^T W^T on W^T packed as a matmul's weight.
    if (strides && padding && kernels::pointwise_applies(ws[2], ws[3], *strides, *padding, *g) && positions >= 0 &&
        kernels::prefer_pointwise_conv(ws[1], ws[0], oh, ow)) {
      kind = packing::pointwise_conv;
      ir::expr& p = packed[{w, kind}];
      if (!p) {
        p = ir::make_constant(to_ndarray(kernels::prepack_conv_weight_pointwise(to_tensor(w->data))));
        bytes += std::int64_t(static_cast<const ir::constant_node&>(*p).data.bytes().size());
      }
      const kernels::packed_weight_layout l = kernels::native_weight_layout(w->data.dt(), ws[1], ws[0]);
      static_assert(std::is_same_v<abi::conv2d_prepacked::args, abi::conv2d_pointwise::args>);
      kernel_call out = lower::call<abi::conv2d_prepacked>(args[0], p, args[2], lower::ints({l.k, l.n, l.panels.nr, l.panels.kc}), args[3], args[4],
                                                           args[5]);
      out.kernel = abi::conv2d_pointwise::name;
      if (fused) {
        static_assert(abi::is_fused_form_of<abi::conv2d_pointwise, abi::conv2d_fused_pointwise>);
        out.kernel = abi::conv2d_fused_pointwise::name;
        out.args.insert(out.args.end(), args.begin() + abi::conv2d::given, args.end());
      }
      return lower::emit(std::move(out), c.type_args[0]);
    }
    // Winograd's F(m x m, 3x3) for the stride-1 3x3 convolutions it is faster for, which needs
    // the output's size; else the direct kernel, whatever the size.
    const bool winograd = max_tile > 0 && positions >= 0 && strides && dilation &&
                          kernels::winograd_applies(ws[2], ws[3], *strides, *dilation, *g) && kernels::prefer_winograd_conv(ws[1], ws[0], oh, ow, max_tile);
    if (!winograd && !kernels::detail::prefer_prepacked_conv(ws[2], ws[3], *g, positions)) return {};
    const std::int64_t m = winograd ? std::min(kernels::winograd_tile_size(oh, ow), max_tile) : 0;
    kind = !winograd ? packing::direct_conv : m == 4 ? packing::winograd4_conv : packing::winograd2_conv;
    ir::expr& p = packed[{w, kind}];
    if (!p) {
      const runtime::tensor weight = to_tensor(w->data);
      p = ir::make_constant(to_ndarray(winograd ? kernels::prepack_conv_weight_winograd(weight, m) : kernels::prepack_conv_weight(weight)));
      bytes += std::int64_t(static_cast<const ir::constant_node&>(*p).data.bytes().size());
    }
    lower::typed<lower::arg::shape> layout;
    if (winograd) {
      const kernels::winograd_conv_layout l = kernels::native_winograd_layout(w->data.dt(), ws[0], ws[1], m);
      layout = lower::ints({l.o, l.c, l.m, l.mr, l.kc});
    } else {
      const kernels::packed_conv_layout l = kernels::native_conv_layout(w->data.dt(), ws[0], ws[1], ws[2], ws[3]);
      layout = lower::ints({l.o, l.c, l.kh, l.kw, l.ob});
    }
    // conv2d_winograd takes the arguments of conv2d_prepacked (one group: no groups argument).
    static_assert(std::is_same_v<abi::conv2d_prepacked::args, abi::conv2d_winograd::args>);
    kernel_call out = lower::call<abi::conv2d_prepacked>(args[0], p, args[2], std::move(layout), args[3], args[4], args[5]);
    out.kernel = winograd ? abi::conv2d_winograd::name : abi::conv2d_prepacked::name;
    if (fused) {  // the epilogue's description and operands, after the arguments of the unfused form
      static_assert(abi::is_fused_form_of<abi::conv2d, abi::conv2d_fused>);
      out.kernel = winograd ? abi::conv2d_fused_winograd::name : abi::conv2d_fused_prepacked::name;
      out.args.insert(out.args.end(), args.begin() + abi::conv2d::given, args.end());
    }
    return lower::emit(std::move(out), c.type_args[0]);
  }

  /// The values of a shape argument whose dimensions are all constants (strides, dilation).
  static std::optional<std::vector<std::int64_t>> ints_of(const ir::expr& e) {
    auto* s = ir::dyn_cast<ir::shape_expr_node>(e);
    if (!s) return std::nullopt;
    std::vector<std::int64_t> v;
    for (const ir::prim_expr& d : s->values) {
      const std::optional<std::int64_t> i = ir::as_int(d);
      if (!i) return std::nullopt;
      v.push_back(*i);
    }
    return v;
  }

  /// The value of a constant bool argument (a transpose flag).
  static std::optional<bool> flag(const ir::expr& e) {
    auto* p = ir::dyn_cast<ir::prim_value_node>(e);
    if (!p || !p->int_value) return std::nullopt;
    const std::optional<std::int64_t> v = ir::as_int(p->int_value);
    if (!v) return std::nullopt;
    return *v != 0;
  }
};

}  // namespace kiln::transform
