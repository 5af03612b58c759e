// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/nn.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/nn.hpp>

namespace kiln::kernels::detail {

KILN_DECL conv_geometry check_conv2d(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p) {
  constexpr std::string_view op = "conv2d";
  check_nchw(op, x, "the data");
  if (!w.defined()) fail(op, "the weight is undefined");
  if (w.ndim() != 4) fail(op, kiln::detail::concat("the weight must be OIHW (rank 4), got ", describe_operand(w)));
  if (!ops::is_floating(x.type())) fail(op, kiln::detail::concat("needs float32 or float64 data, got ", describe_operand(x)));
  if (w.type() != x.type())
    fail(op, kiln::detail::concat("the weight ", describe_operand(w), " must have the data's dtype ", name(x.type())));
  if (p.groups <= 0) fail(op, kiln::detail::concat("groups must be positive, got ", p.groups));
  check_window_params(op, p.strides, p.dilation, p.padding);
  conv_geometry g{x.shape(0), x.shape(1), x.shape(2), x.shape(3), w.shape(0), w.shape(2), w.shape(3), 0, 0, w.shape(1), 0};
  if (g.o % p.groups != 0)
    fail(op, kiln::detail::concat("the weight ", describe_operand(w), " has ", g.o, " output channels, which is not a multiple of groups = ", p.groups));
  if (g.c != g.cg * p.groups)
    fail(op, kiln::detail::concat("channel mismatch: the data ", describe_operand(x), " has ", g.c, " channels, but the weight ", describe_operand(w),
                                  " expects ", g.cg, " x ", p.groups, " group(s) = ", g.cg * p.groups));
  if (g.kh == 0 || g.kw == 0) fail(op, kiln::detail::concat("the weight ", describe_operand(w), " has an empty window"));
  g.og = g.o / p.groups;
  g.oh = window_count(op, "convolution", g.h, g.kh, p.strides[0], p.dilation[0], p.padding[0], p.padding[2], false);
  g.ow = window_count(op, "convolution", g.w, g.kw, p.strides[1], p.dilation[1], p.padding[1], p.padding[3], false);
  if (bias.defined() && (bias.type() != x.type() || bias.ndim() != 1 || bias.shape(0) != g.o))
    fail(op, kiln::detail::concat("the bias must be ", name(x.type()), "[", g.o, "] (one per output channel), got ", describe_operand(bias)));
  return g;
}

KILN_DECL bool direct_conv_applies(std::int64_t kh, std::int64_t kw, std::int64_t groups) { return groups == 1 && kh * kw > 1; }

KILN_DECL bool use_direct_conv(const conv_geometry& g, const conv2d_params& p) { return direct_conv_applies(g.kh, g.kw, p.groups) && g.oh * g.ow >= 256; }

KILN_DECL bool prefer_prepacked_conv(std::int64_t kh, std::int64_t kw, std::int64_t groups, std::int64_t positions) {
  return direct_conv_applies(kh, kw, groups) && (positions < 0 || positions >= 16);
}

KILN_DECL void conv2d_into(std::string_view op, const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p,
                           const fused_expr* epilogue, std::span<const tensor> operands, const std::vector<std::vector<std::int64_t>>& strides,
                           const tensor& out, conv_weight form) {
  const conv_geometry g = check_conv2d(x, w, bias, p);
  check_output(op, out, x.type(), std::array{g.n, g.o, g.oh, g.ow});
  if (overlaps(out, x) || overlaps(out, w) || (bias.defined() && overlaps(out, bias)))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an input; write into a separate tensor"));
  if (out.numel() == 0) return;
  const tensor wt = w.contiguous();
  // The GEMM writes each output channel as one row of OH * OW elements; an epilogue's operands
  // are read the same way, so each needs a stride along that row.
  const bool rows_ok = out.strides()[3] == 1 && (out.strides()[2] == g.ow || g.oh == 1);
  const bool depthwise = g.cg == 1 && p.groups > 1;
  std::vector<std::int64_t> col_stride;
  bool separate = false;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const std::vector<std::int64_t>& s = strides[k];
    if (g.oh == 1 || s[2] == g.ow * s[3]) col_stride.push_back(s[3]);
    else if (g.ow == 1) col_stride.push_back(s[2]);
    else separate = true;
    separate |= overlaps(out, operands[k]);
  }
  if (epilogue && separate) {  // the convolution first, then the expression over it
    const tensor product = new_output(out.shape(), out.type());
    conv2d_into(op, x, w, bias, p, nullptr, {}, {}, product, form);
    std::vector<tensor> inputs{product};
    inputs.insert(inputs.end(), operands.begin(), operands.end());
    epilogue->run(inputs, out);
    return;
  }
  const bool direct = depthwise || rows_ok;
  const tensor dst = direct ? out : new_output(out.shape(), out.type());
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      // The bias: one value per row (output channel), added to each block before the epilogue.
      const T* const b = bias.defined() ? static_cast<const T*>(bias.data()) : nullptr;
      const std::int64_t b_stride = bias.defined() ? bias.strides()[0] : 0;
      std::vector<fused_epilogue<T>> per_image;
      if (epilogue) {
        std::vector<epilogue_operand<T>> ops;
        for (std::size_t k = 0; k < operands.size(); ++k) ops.push_back({static_cast<const T*>(operands[k].data()), strides[k][1], col_stride[k]});
        for (std::int64_t n = 0; n < g.n; ++n) {
          per_image.emplace_back(*epilogue, ops);
          for (std::size_t k = 0; k < operands.size(); ++k) per_image.back().shift(k, n * strides[k][0]);
        }
      }
      const conv_epilogue<T> apply{b, b_stride, &per_image};
      if (form == conv_weight::winograd2 || form == conv_weight::winograd4) {
        const auto& xs = x.strides();
        const auto& ys = dst.strides();
        const winograd_problem wp{g.n, g.c, g.h, g.w, g.o, g.oh, g.ow, p.padding[0], p.padding[1], {xs[0], xs[1], xs[2], xs[3]}, {ys[0], ys[1], ys[2], ys[3]}};
        const T* xd = static_cast<const T*>(x.data());
        const T* u = static_cast<const T*>(wt.data());
        if (form == conv_weight::winograd2) conv2d_winograd_packed<2, T>(xd, u, wp, static_cast<T*>(dst.data()), apply);
        else conv2d_winograd_packed<4, T>(xd, u, wp, static_cast<T*>(dst.data()), apply);
      } else if (form == conv_weight::direct_packed) conv2d_direct_packed<T>(x, static_cast<const T*>(wt.data()), p, g, dst, apply);
      else if (form == conv_weight::pointwise) conv2d_pointwise_packed<T>(x, static_cast<const T*>(wt.data()), g, dst, apply);
      else if (depthwise)
        conv2d_depthwise<T>(x, wt, b, b_stride, p, g, dst, depthwise_epilogue<T>{&per_image});
      else if (use_direct_conv(g, p)) conv2d_direct<T>(x, wt, p, g, dst, apply);
      else conv2d_gemm<T>(x, wt, p, g, dst, apply);
    }
  });
  if (!direct) copy_unchecked(dst, out);
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void conv2d(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p, const tensor& out) {
  detail::conv2d_into("conv2d", x, w, bias, p, nullptr, {}, {}, out);
}

KILN_DECL tensor conv2d(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p) {
  const detail::conv_geometry g = detail::check_conv2d(x, w, bias, p);
  tensor out = new_output({g.n, g.o, g.oh, g.ow}, x.type());
  conv2d(x, w, bias, p, out);
  return out;
}

KILN_DECL void conv2d_fused(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p, const fused_expr& epilogue,
                            std::span<const tensor> operands, const tensor& out) {
  constexpr std::string_view op = "conv2d_fused";
  const detail::conv_geometry g = detail::check_conv2d(x, w, bias, p);
  check_output(op, out, x.type(), std::array{g.n, g.o, g.oh, g.ow});
  const std::vector<std::vector<std::int64_t>> strides = detail::check_epilogue(op, epilogue, operands, out);
  detail::conv2d_into(op, x, w, bias, p, &epilogue, operands, strides, out);
}

KILN_DECL void conv2d_fused(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p, const fused_expr& epilogue,
                            std::initializer_list<tensor> operands, const tensor& out) {
  conv2d_fused(x, w, bias, p, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out);
}

KILN_DECL packed_conv_layout packed_conv_layout_of(std::string_view op, std::span<const std::int64_t> v) {
  if (v.size() != 5) fail(op, kiln::detail::concat("the packed layout must have 5 values (O, C, KH, KW, ob), got ", v.size()));
  return {v[0], v[1], v[2], v[3], v[4]};
}

KILN_DECL packed_conv_layout native_conv_layout(dtype t, std::int64_t o, std::int64_t c, std::int64_t kh, std::int64_t kw) {
  return visit_dtype("prepack_conv_weight", t, [&]<class T>(type_tag<T>) -> packed_conv_layout {
    if constexpr (std::is_floating_point_v<T>)
      return {o, c, kh, kw, detail::direct_conv_shape<T>::OB};
    else
      fail("prepack_conv_weight", kiln::detail::concat("packs float32 and float64 weights, not ", name(t)));
  });
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL std::int64_t packed_conv_size(std::string_view op, const packed_conv_layout& l) {
  constexpr std::int64_t limit = std::int64_t(1) << 40;
  std::int64_t k = 0, size = 0;
  const bool bad = l.o < 1 || l.c < 1 || l.kh < 1 || l.kw < 1 || l.ob < 1 || l.ob > 4096 || l.o > limit || __builtin_mul_overflow(l.c, l.kh, &k) ||
                   __builtin_mul_overflow(k, l.kw, &k) || __builtin_mul_overflow((l.o + l.ob - 1) / l.ob * l.ob, k, &size) || size > limit;
  if (bad)
    fail(op, kiln::detail::concat("bad packed layout: weight [", l.o, ", ", l.c, ", ", l.kh, ", ", l.kw, "] in blocks of ", l.ob, " output channels"));
  return size;
}

KILN_DECL void check_packed_storage(std::string_view op, std::string_view noun, const tensor& packed, std::int64_t size, std::string_view layout) {
  if (packed.type() != dtype::float32 && packed.type() != dtype::float64)
    fail(op, kiln::detail::concat("the ", noun, " weight must be float32 or float64, got ", describe_operand(packed)));
  if (packed.ndim() != 1 || packed.numel() != size || (size > 1 && packed.strides()[0] != 1))
    fail(op, kiln::detail::concat("the ", noun, " weight must be a contiguous vector of ", size, " elements for ", layout, ", got ",
                                  describe_operand(packed)));
}

KILN_DECL void check_output_apart(std::string_view op, const tensor& out, const tensor& packed) {
  if (out.defined() && overlaps(out, packed))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an input; write into a separate tensor"));
}

KILN_DECL tensor packed_conv_view(std::string_view op, const tensor& packed, const packed_conv_layout& l) {
  if (!packed.defined()) fail(op, "the packed weight is undefined");
  const std::int64_t size = packed_conv_size(op, l);
  check_packed_storage(op, "packed", packed, size,
                       kiln::detail::concat("a [", l.o, ", ", l.c, ", ", l.kh, ", ", l.kw, "] weight in blocks of ", l.ob, " output channels"));
  return tensor::from_storage(packed.data_storage(), packed.byte_offset(), packed.type(), {l.o, l.c, l.kh, l.kw});
}

KILN_DECL tensor unpack_conv_weight(const tensor& packed, const packed_conv_layout& l) {
  tensor w = new_output({l.o, l.c, l.kh, l.kw}, packed.type());
  visit_dtype("unpack_conv_weight", packed.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>)
      unpack_direct_weights<T>(static_cast<const T*>(packed.data()), l.o, l.c * l.kh * l.kw, l.ob, static_cast<T*>(w.data()));
  });
  return w;
}

KILN_DECL tensor prepacked_conv_operand(std::string_view op, const tensor& packed, const packed_conv_layout& l, const conv2d_params& p,
                                        const tensor& out) {
  tensor w = packed_conv_view(op, packed, l);
  if (p.groups != 1) fail(op, kiln::detail::concat("a prepacked weight serves one-group convolutions, got groups = ", p.groups));
  check_output_apart(op, out, packed);
  const std::int64_t native = packed.type() == dtype::float32 ? direct_conv_shape<float>::OB : direct_conv_shape<double>::OB;
  return l.ob == native && reinterpret_cast<std::uintptr_t>(packed.data()) % 64 == 0 ? w : tensor();
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL tensor prepack_conv_weight(const tensor& w) {
  constexpr std::string_view op = "prepack_conv_weight";
  if (!w.defined()) fail(op, "the weight is undefined");
  if (w.ndim() != 4) fail(op, kiln::detail::concat("the weight must be OIHW (rank 4), got ", describe_operand(w)));
  const packed_conv_layout l = native_conv_layout(w.type(), w.shape(0), w.shape(1), w.shape(2), w.shape(3));
  tensor out = new_output({detail::packed_conv_size(op, l)}, w.type());
  const tensor wt = w.contiguous();
  visit_dtype(op, w.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>)
      detail::pack_direct_weights<T>(static_cast<const T*>(wt.data()), l.o, l.c * l.kh * l.kw, l.ob, static_cast<T*>(out.data()));
  });
  return out;
}

KILN_DECL void conv2d_prepacked(const tensor& x, const tensor& packed, const packed_conv_layout& layout, const tensor& bias, const conv2d_params& p,
                                const tensor& out) {
  constexpr std::string_view op = "conv2d_prepacked";
  const tensor w = detail::prepacked_conv_operand(op, packed, layout, p, out);
  if (!w.defined()) return conv2d(x, detail::unpack_conv_weight(packed, layout), bias, p, out);
  detail::conv2d_into(op, x, w, bias, p, nullptr, {}, {}, out, detail::conv_weight::direct_packed);
}

KILN_DECL void conv2d_fused_prepacked(const tensor& x, const tensor& packed, const packed_conv_layout& layout, const tensor& bias,
                                      const conv2d_params& p, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out) {
  constexpr std::string_view op = "conv2d_fused_prepacked";
  const tensor w = detail::prepacked_conv_operand(op, packed, layout, p, out);
  if (!w.defined()) return conv2d_fused(x, detail::unpack_conv_weight(packed, layout), bias, p, epilogue, operands, out);
  const detail::conv_geometry g = detail::check_conv2d(x, w, bias, p);
  check_output(op, out, x.type(), std::array{g.n, g.o, g.oh, g.ow});
  const std::vector<std::vector<std::int64_t>> strides = detail::check_epilogue(op, epilogue, operands, out);
  detail::conv2d_into(op, x, w, bias, p, &epilogue, operands, strides, out, detail::conv_weight::direct_packed);
}

KILN_DECL void conv2d_fused_prepacked(const tensor& x, const tensor& packed, const packed_conv_layout& layout, const tensor& bias,
                                      const conv2d_params& p, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out) {
  conv2d_fused_prepacked(x, packed, layout, bias, p, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out);
}

KILN_DECL bool pointwise_applies(std::int64_t kh, std::int64_t kw, std::span<const std::int64_t> strides, std::span<const std::int64_t> padding,
                                 std::int64_t groups) {
  const auto all = [](std::span<const std::int64_t> v, std::int64_t x) { return std::all_of(v.begin(), v.end(), [&](std::int64_t e) { return e == x; }); };
  return kh == 1 && kw == 1 && groups == 1 && all(strides, 1) && all(padding, 0);
}

KILN_DECL bool prefer_pointwise_conv(std::int64_t c, std::int64_t o, std::int64_t oh, std::int64_t ow) {
  const std::int64_t positions = oh * ow;
  if (c < 1 || o < 1 || positions < 16 || positions > 400) return false;
  constexpr std::int64_t nr = gemm_detail::shape<float>::NR;
  const auto panels = [](std::int64_t n) { return (n + nr - 1) / nr * nr; };
  // The lanes W X computes beyond X^T W^T's, relative to them; the saving grows with C, the
  // transposition's cost does not.
  const double excess = double(panels(positions) * o) / double(panels(o) * positions) - 1;
  return excess >= 0.05 && double(c) * excess >= 100;
}

KILN_DECL tensor prepack_conv_weight_pointwise(const tensor& w) {
  constexpr std::string_view op = "prepack_conv_weight_pointwise";
  if (!w.defined()) fail(op, "the weight is undefined");
  if (w.ndim() != 4 || w.shape(2) != 1 || w.shape(3) != 1) fail(op, kiln::detail::concat("the weight must be [O, C, 1, 1], got ", describe_operand(w)));
  return prepack_weight(w.contiguous().view({w.shape(0), w.shape(1)}), true);
}

KILN_DECL bool winograd_applies(std::int64_t kh, std::int64_t kw, std::span<const std::int64_t> strides, std::span<const std::int64_t> dilation,
                                std::int64_t groups) {
  const auto ones = [](std::span<const std::int64_t> v) { return v.size() == 2 && v[0] == 1 && v[1] == 1; };
  return kh == 3 && kw == 3 && groups == 1 && ones(strides) && ones(dilation);
}

KILN_DECL bool prefer_winograd_conv(std::int64_t c, std::int64_t o, std::int64_t oh, std::int64_t ow, std::int64_t max_tile) {
  if (max_tile < 2 || c < 16 || o < 32 || (oh + 1) / 2 * ((ow + 1) / 2) < 32) return false;
  return c * o >= (std::min(winograd_tile_size(oh, ow), max_tile) == 4 ? 1024 : 4096);
}

KILN_DECL std::int64_t winograd_tile_size(std::int64_t oh, std::int64_t ow) { return (oh + 3) / 4 * ((ow + 3) / 4) >= 48 ? 4 : 2; }

KILN_DECL winograd_conv_layout native_winograd_layout(dtype t, std::int64_t o, std::int64_t c, std::int64_t m) {
  return visit_dtype("prepack_conv_weight_winograd", t, [&]<class T>(type_tag<T>) -> winograd_conv_layout {
    if constexpr (std::is_floating_point_v<T>) {
      const packed_b_layout a = native_packed_a_layout<T>(c);
      return {o, c, m, a.nr, a.kc};
    } else {
      fail("prepack_conv_weight_winograd", kiln::detail::concat("transforms float32 and float64 weights, not ", name(t)));
    }
  });
}

KILN_DECL winograd_conv_layout winograd_conv_layout_of(std::string_view op, std::span<const std::int64_t> v) {
  if (v.size() != 5)
    fail(op, kiln::detail::concat("the Winograd layout must have 5 values (O, C, tile size, panel rows, block columns), got ", v.size()));
  return {v[0], v[1], v[2], v[3], v[4]};
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL std::string describe_winograd_layout(const winograd_conv_layout& l) {
  return kiln::detail::concat("a [", l.o, ", ", l.c, ", 3, 3] weight in tiles of ", l.m, ", panels of ", l.mr, " output channels and blocks of ",
                              l.kc, " input channels");
}

KILN_DECL std::int64_t winograd_weight_size(std::string_view op, const winograd_conv_layout& l) {
  constexpr std::int64_t limit = std::int64_t(1) << 40;
  std::int64_t size = 0;
  if (l.o < 1 || l.c < 1 || (l.m != 2 && l.m != 4) || l.mr < 1 || l.mr > 64 || l.kc < 1 || l.o > limit || l.c > limit ||
      __builtin_mul_overflow((l.o + l.mr - 1) / l.mr * l.mr, l.c, &size) || size > limit / winograd_points(4))
    fail(op, kiln::detail::concat("bad Winograd layout: ", describe_winograd_layout(l)));
  return size * winograd_points(l.m);
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL tensor prepack_conv_weight_winograd(const tensor& w, std::int64_t m) {
  constexpr std::string_view op = "prepack_conv_weight_winograd";
  if (!w.defined()) fail(op, "the weight is undefined");
  if (w.ndim() != 4 || w.shape(2) != 3 || w.shape(3) != 3)
    fail(op, kiln::detail::concat("the weight must be OIHW with a 3 x 3 window, got ", describe_operand(w)));
  if (w.type() != dtype::float32 && w.type() != dtype::float64)
    fail(op, kiln::detail::concat("transforms float32 and float64 weights, got ", describe_operand(w)));
  if (m != 2 && m != 4) fail(op, kiln::detail::concat("the output tile size must be 2 or 4, got ", m));
  const winograd_conv_layout l = native_winograd_layout(w.type(), w.shape(0), w.shape(1), m);
  tensor out = new_output({detail::winograd_weight_size(op, l)}, w.type());
  const tensor wt = w.contiguous();
  visit_dtype(op, w.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      const T* g = static_cast<const T*>(wt.data());
      T* u = static_cast<T*>(out.data());
      if (m == 2) detail::winograd_weights<2, T>(g, l.o, l.c, {l.mr, l.kc}, u);
      else detail::winograd_weights<4, T>(g, l.o, l.c, {l.mr, l.kc}, u);
    }
  });
  return out;
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL tensor winograd_operand(std::string_view op, const tensor& packed, const winograd_conv_layout& l, const conv2d_params& p, const tensor& out) {
  if (!packed.defined()) fail(op, "the transformed weight is undefined");
  check_packed_storage(op, "transformed", packed, winograd_weight_size(op, l), describe_winograd_layout(l));
  if (!winograd_applies(3, 3, p.strides, p.dilation, p.groups))
    fail(op, kiln::detail::concat("the Winograd kernel serves 3 x 3 convolutions with stride 1, dilation 1 and one group, got strides [", p.strides[0],
                                  ", ", p.strides[1], "], dilation [", p.dilation[0], ", ", p.dilation[1], "], groups = ", p.groups));
  check_output_apart(op, out, packed);
  return tensor::from_storage(packed.data_storage(), packed.byte_offset(), packed.type(), {l.o, l.c, 3, 3});
}

KILN_DECL tensor winograd_native(std::string_view op, const tensor& w, const winograd_conv_layout& l) {
  const winograd_conv_layout native = native_winograd_layout(w.type(), l.o, l.c, l.m);
  if (same_placement({l.mr, l.kc}, {native.mr, native.kc}, l.c)) return w;
  const std::int64_t points = winograd_points(l.m);
  tensor out = new_output({winograd_weight_size(op, native)}, w.type());
  visit_dtype(op, w.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      const std::int64_t from = packed_b_size(l.c, l.o, {l.mr, l.kc}), to = packed_b_size(l.c, l.o, {native.mr, native.kc});
      for (std::int64_t xi = 0; xi < points; ++xi)
        repack_b(static_cast<const T*>(w.data()) + xi * from, {l.mr, l.kc}, l.c, l.o, {native.mr, native.kc}, static_cast<T*>(out.data()) + xi * to);
    }
  });
  return tensor::from_storage(out.data_storage(), 0, w.type(), {l.o, l.c, 3, 3});
}

KILN_DECL conv_weight winograd_form(const winograd_conv_layout& l) { return l.m == 4 ? conv_weight::winograd4 : conv_weight::winograd2; }

}  // namespace kiln::kernels::detail

namespace kiln::kernels::detail {

/// `conv2d_pointwise` and its fused form: the product X^T W^T on the packed W^T where it is in
/// this build's layout, else `conv2d` on W unpacked.
KILN_DECL void conv2d_pointwise_into(std::string_view op, const tensor& x, const tensor& packed, const packed_weight_layout& l, const tensor& bias,
                                     const conv2d_params& p, const fused_expr* epilogue, std::span<const tensor> operands, const tensor& out) {
  const bool in_place = prepacked_operand(op, packed, l, out).defined();
  if (!pointwise_applies(1, 1, p.strides, p.padding, p.groups))
    fail(op, kiln::detail::concat("serves 1 x 1 convolutions at stride 1 without padding in one group, got strides (", p.strides[0], ", ",
                                  p.strides[1], "), padding (", p.padding[0], ", ", p.padding[1], ", ", p.padding[2], ", ", p.padding[3],
                                  "), groups ", p.groups));
  if (!in_place) {  // another build's layout: W = (W^T)^T unpacked, [O, C, 1, 1]
    const tensor w = unpack_weight(packed, l).permute({1, 0}).contiguous().view({l.n, l.k, 1, 1});
    if (epilogue) return conv2d_fused(x, w, bias, p, *epilogue, operands, out);
    return conv2d(x, w, bias, p, out);
  }
  // The weight as the convolution's checks see it: [O, C, 1, 1] over the packed storage (read
  // only by `conv2d_pointwise_packed`, as W^T's panels).
  const tensor w = tensor::from_storage(packed.data_storage(), packed.byte_offset(), packed.type(), {l.n, l.k, 1, 1});
  const conv_geometry g = check_conv2d(x, w, bias, p);
  check_output(op, out, x.type(), std::array{g.n, g.o, g.oh, g.ow});
  std::vector<std::vector<std::int64_t>> strides;
  if (epilogue) strides = check_epilogue(op, *epilogue, operands, out);
  // X^T is read with its positions one element apart.
  const bool rows = x.strides()[3] == 1 && (x.strides()[2] == g.w || g.h == 1);
  conv2d_into(op, rows ? x : x.contiguous(), w, bias, p, epilogue, operands, strides, out, conv_weight::pointwise);
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void conv2d_pointwise(const tensor& x, const tensor& packed, const packed_weight_layout& layout, const tensor& bias, const conv2d_params& p,
                                const tensor& out) {
  detail::conv2d_pointwise_into("conv2d_pointwise", x, packed, layout, bias, p, nullptr, {}, out);
}

KILN_DECL void conv2d_fused_pointwise(const tensor& x, const tensor& packed, const packed_weight_layout& layout, const tensor& bias,
                                      const conv2d_params& p, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out) {
  detail::conv2d_pointwise_into("conv2d_fused_pointwise", x, packed, layout, bias, p, &epilogue, operands, out);
}

KILN_DECL void conv2d_fused_pointwise(const tensor& x, const tensor& packed, const packed_weight_layout& layout, const tensor& bias,
                                      const conv2d_params& p, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out) {
  conv2d_fused_pointwise(x, packed, layout, bias, p, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out);
}

}  // namespace kiln::kernels

namespace kiln::kernels {

KILN_DECL void conv2d_winograd(const tensor& x, const tensor& packed, const winograd_conv_layout& layout, const tensor& bias, const conv2d_params& p,
                               const tensor& out) {
  constexpr std::string_view op = "conv2d_winograd";
  const tensor w = detail::winograd_operand(op, packed, layout, p, out);
  detail::conv2d_into(op, x, detail::winograd_native(op, w, layout), bias, p, nullptr, {}, {}, out, detail::winograd_form(layout));
}

KILN_DECL void conv2d_fused_winograd(const tensor& x, const tensor& packed, const winograd_conv_layout& layout, const tensor& bias,
                                     const conv2d_params& p, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out) {
  constexpr std::string_view op = "conv2d_fused_winograd";
  const tensor w = detail::winograd_operand(op, packed, layout, p, out);
  const detail::conv_geometry g = detail::check_conv2d(x, w, bias, p);
  check_output(op, out, x.type(), std::array{g.n, g.o, g.oh, g.ow});
  const std::vector<std::vector<std::int64_t>> strides = detail::check_epilogue(op, epilogue, operands, out);
  detail::conv2d_into(op, x, detail::winograd_native(op, w, layout), bias, p, &epilogue, operands, strides, out, detail::winograd_form(layout));
}

KILN_DECL void conv2d_fused_winograd(const tensor& x, const tensor& packed, const winograd_conv_layout& layout, const tensor& bias,
                                     const conv2d_params& p, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out) {
  conv2d_fused_winograd(x, packed, layout, bias, p, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out);
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL conv_transpose_geometry check_conv2d_transpose(const tensor& x, const tensor& w, const conv2d_transpose_params& p) {
  constexpr std::string_view op = "conv2d_transpose";
  check_nchw(op, x, "the data");
  if (!w.defined()) fail(op, "the weight is undefined");
  if (w.ndim() != 4) fail(op, kiln::detail::concat("the weight must be IOHW (rank 4), got ", describe_operand(w)));
  if (!ops::is_floating(x.type())) fail(op, kiln::detail::concat("needs float32 or float64 data, got ", describe_operand(x)));
  if (w.type() != x.type())
    fail(op, kiln::detail::concat("the weight ", describe_operand(w), " must have the data's dtype ", name(x.type())));
  if (p.groups <= 0) fail(op, kiln::detail::concat("groups must be positive, got ", p.groups));
  check_window_params(op, p.strides, p.dilation, p.padding);
  conv_transpose_geometry g{x.shape(0), x.shape(1), x.shape(2), x.shape(3), w.shape(1) * p.groups, w.shape(2), w.shape(3), 0, 0, 0, w.shape(1)};
  if (w.shape(0) != g.c)
    fail(op, kiln::detail::concat("channel mismatch: the data ", describe_operand(x), " has ", g.c, " channels, but the weight ", describe_operand(w),
                                  " has ", w.shape(0), " input channels"));
  if (g.c % p.groups != 0) fail(op, kiln::detail::concat("the data's ", g.c, " channels are not a multiple of groups = ", p.groups));
  g.cg = g.c / p.groups;
  if (g.kh == 0 || g.kw == 0) fail(op, kiln::detail::concat("the weight ", describe_operand(w), " has an empty window"));
  for (int i = 0; i < 2; ++i)
    if (p.output_padding[std::size_t(i)] < 0 ||
        (p.output_padding[std::size_t(i)] >= p.strides[std::size_t(i)] && p.output_padding[std::size_t(i)] >= p.dilation[std::size_t(i)]))
      fail(op, kiln::detail::concat("output padding ", p.output_padding[std::size_t(i)], " must be smaller than the stride ", p.strides[std::size_t(i)],
                                    " or the dilation ", p.dilation[std::size_t(i)]));
  const auto extent = [&](std::int64_t in, std::int64_t k, std::size_t i, std::int64_t before, std::int64_t after) {
    std::int64_t a = 0, b = 0, r = 0;
    if (__builtin_mul_overflow(in - 1, p.strides[i], &a) || __builtin_mul_overflow(k - 1, p.dilation[i], &b) || __builtin_add_overflow(a, b, &r) ||
        __builtin_add_overflow(r, 1 + p.output_padding[i], &r) || __builtin_sub_overflow(r, before, &r) || __builtin_sub_overflow(r, after, &r))
      fail(op, kiln::detail::concat("the output extent of ", describe_operand(x), " overflows"));
    return r;
  };
  g.oh = extent(g.h, g.kh, 0, p.padding[0], p.padding[2]);
  g.ow = extent(g.w, g.kw, 1, p.padding[1], p.padding[3]);
  if (g.h == 0 || g.w == 0) fail(op, kiln::detail::concat("the data ", describe_operand(x), " has an empty spatial axis"));
  if (g.oh <= 0 || g.ow <= 0)
    fail(op, kiln::detail::concat("the padding crops the whole output of ", describe_operand(x), " with the weight ", describe_operand(w)));
  return g;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void conv2d_transpose(const tensor& x, const tensor& w, const conv2d_transpose_params& p, const tensor& out) {
  constexpr std::string_view op = "conv2d_transpose";
  const detail::conv_transpose_geometry g = detail::check_conv2d_transpose(x, w, p);
  check_output(op, out, x.type(), std::array{g.n, g.o, g.oh, g.ow});
  detail::check_disjoint(op, x, out);
  detail::check_disjoint(op, w, out);
  const bool direct = out.is_contiguous();
  const tensor dst = direct ? out : new_output(out.shape(), x.type());
  const tensor xc = x.contiguous(), wc = w.contiguous();
  const std::int64_t taps = g.og * g.kh * g.kw, hw = g.h * g.w;
  tensor cols = new_output({taps, hw}, x.type());
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      T* o = static_cast<T*>(dst.data());
      std::fill(o, o + dst.numel(), T(0));
      const T* col = static_cast<const T*>(cols.data());
      for (std::int64_t b = 0; b < g.n; ++b)
        for (std::int64_t grp = 0; grp < p.groups; ++grp) {
          const tensor wg = wc.slice(0, grp * g.cg, (grp + 1) * g.cg).view({g.cg, taps});
          const tensor xg = xc.slice(0, b, b + 1).view({g.c, hw}).slice(0, grp * g.cg, (grp + 1) * g.cg);
          matmul(wg, xg, cols, true, false);
          for (std::int64_t co = 0; co < g.og; ++co) {
            T* plane = o + ((b * g.o) + grp * g.og + co) * g.oh * g.ow;
            for (std::int64_t i = 0; i < g.kh; ++i)
              for (std::int64_t j = 0; j < g.kw; ++j) {
                const T* row = col + ((co * g.kh + i) * g.kw + j) * hw;
                for (std::int64_t y = 0; y < g.h; ++y) {
                  const std::int64_t oy = y * p.strides[0] + i * p.dilation[0] - p.padding[0];
                  if (oy < 0 || oy >= g.oh) continue;
                  T* line = plane + oy * g.ow;
                  const T* in = row + y * g.w;
                  for (std::int64_t xx = 0; xx < g.w; ++xx) {
                    const std::int64_t ox = xx * p.strides[1] + j * p.dilation[1] - p.padding[1];
                    if (ox >= 0 && ox < g.ow) line[ox] += in[xx];
                  }
                }
              }
          }
        }
    }
  });
  if (!direct) detail::copy_unchecked(dst, out);
}

KILN_DECL tensor conv2d_transpose(const tensor& x, const tensor& w, const conv2d_transpose_params& p) {
  const detail::conv_transpose_geometry g = detail::check_conv2d_transpose(x, w, p);
  tensor out = new_output({g.n, g.o, g.oh, g.ow}, x.type());
  conv2d_transpose(x, w, p, out);
  return out;
}

}  // namespace kiln::kernels
