// SPDX-License-Identifier: Apache-2.0
/// \file
/// Convolution (NCHW / OIHW), transposed convolution (IOHW weights), pooling and padding.
#pragma once

#include <kiln/ir/op/infer.hpp>

namespace kiln::ir::detail {

/// Padding given as 1, 2 (top/bottom = left/right) or 4 (top, left, bottom, right) values.
inline int_array padding4(const call_context& ctx) {
  const int_array& p = ctx.attr<int_array>("padding");
  int_array out;
  if (p.size() == 1) out = {p[0], p[0], p[0], p[0]};
  else if (p.size() == 2) out = {p[0], p[1], p[0], p[1]};
  else if (p.size() == 4) out = p;
  else ctx.fail("attribute 'padding' must have 1, 2 or 4 values, but has " + std::to_string(p.size()));
  for (auto v : out)
    if (v < 0) ctx.fail("attribute 'padding' must not be negative");
  return out;
}

inline void require_layout(const call_context& ctx, const char* attr_name, const char* expected) {
  const auto& l = ctx.attr<std::string>(attr_name);
  if (l != expected)
    ctx.fail("attribute '" + std::string(attr_name) + "' is \"" + l + "\", but only \"" + expected + "\" is supported");
}

inline int_array positive(const call_context& ctx, const char* attr_name, std::size_t n) {
  int_array v = expand_to(ctx, attr_name, n);
  for (auto x : v)
    if (x <= 0) ctx.fail("attribute '" + std::string(attr_name) + "' must be positive, but has " + std::to_string(x));
  return v;
}

/// The spatial output size, checked to be positive when static.
inline prim_expr spatial_out(const call_context& ctx, const prim_expr& in, std::int64_t pad_total, std::int64_t k,
                             std::int64_t stride, std::int64_t dilation, bool ceil_mode, const char* what) {
  prim_expr o = window_output(in, pad_total, k, stride, dilation, ceil_mode);
  if (ceil_mode) {
    // the last window must start inside the input or its leading padding (PyTorch's rule)
    auto ci = as_int(in), co = as_int(o);
    if (ci && co && (*co - 1) * stride >= *ci + pad_total / 2) o = make_int(*co - 1);
  }
  if (auto c = as_int(o); c && *c <= 0)
    ctx.fail("the " + std::string(what) + " window (size " + std::to_string(k) + ", dilation " + std::to_string(dilation) +
             ") does not fit the input extent " + to_string(in) + " with padding " + std::to_string(pad_total));
  return o;
}

/// What conv2d and conv2d_transpose check alike: layouts, ranks, the result dtype and the window
/// attributes.
struct conv_attrs {
  dtype d;
  int_array strides, dilation, pad;
  std::int64_t groups;
};
inline conv_attrs check_conv_attrs(const call_context& ctx, const char* kernel_layout) {
  auto& x = ctx.tensor(0);
  auto& w = ctx.tensor(1);
  require_layout(ctx, "data_layout", "NCHW");
  require_layout(ctx, "kernel_layout", kernel_layout);
  if (x.ndim >= 0 && x.ndim != 4) ctx.fail_arg(0, "must have rank 4 (NCHW), but has rank " + std::to_string(x.ndim));
  if (w.ndim >= 0 && w.ndim != 4) ctx.fail_arg(1, "must have rank 4 (" + std::string(kernel_layout) + "), but has rank " + std::to_string(w.ndim));
  dtype d = ctx.attr<dtype>("out_dtype");
  if (!is_known(d)) d = common_dtype(ctx, {0, 1});
  conv_attrs a{d, positive(ctx, "strides", 2), positive(ctx, "dilation", 2), padding4(ctx), ctx.attr<std::int64_t>("groups")};
  if (a.groups <= 0) ctx.fail("attribute 'groups' must be positive, but is " + std::to_string(a.groups));
  return a;
}

inline type infer_conv2d(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& w = ctx.tensor(1);
  const conv_attrs a = check_conv_attrs(ctx, "OIHW");
  const dtype d = a.d;
  const int_array &strides = a.strides, &dilation = a.dilation, &pad = a.pad;
  const std::int64_t groups = a.groups;
  if (!x.shape || !w.shape) return tensor_type_of_rank(d, 4);
  const auto &xs = *x.shape, &ws = *w.shape;
  if (auto o = as_int(ws[0]); o && *o % groups != 0)
    ctx.fail_arg(1, "has " + std::to_string(*o) + " output channels, which is not divisible by groups = " + std::to_string(groups));
  if (prove_not_equal(xs[1], ws[1] * make_int(groups)))
    ctx.fail("channel mismatch: data has " + to_string(xs[1]) + " input channels, but weight expects " + to_string(ws[1]) + " x " +
             std::to_string(groups) + " groups = " + to_string(ws[1] * make_int(groups)) + " (data " + dims_to_string(xs) +
             ", weight " + dims_to_string(ws) + ")");
  auto kh = as_int(ws[2]), kw = as_int(ws[3]);
  if (!kh || !kw) return tensor_type_of_rank(d, 4);
  prim_expr oh = spatial_out(ctx, xs[2], pad[0] + pad[2], *kh, strides[0], dilation[0], false, "convolution");
  prim_expr ow = spatial_out(ctx, xs[3], pad[1] + pad[3], *kw, strides[1], dilation[1], false, "convolution");
  return tensor_type({xs[0], ws[0], oh, ow}, d);
}

inline type infer_conv2d_transpose(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  auto& w = ctx.tensor(1);
  const conv_attrs a = check_conv_attrs(ctx, "IOHW");
  const dtype d = a.d;
  const int_array &strides = a.strides, &dilation = a.dilation, &pad = a.pad;
  const std::int64_t groups = a.groups;
  const int_array out_pad = expand_to(ctx, "output_padding", 2);
  constexpr std::int64_t limit = std::int64_t(1) << 31;  // keeps the output-size arithmetic in range
  for (const int_array* v : {&strides, &dilation, &pad, &out_pad})
    for (auto e : *v)
      if (e > limit) ctx.fail("strides, dilation, padding and output padding must be at most 2^31, got " + std::to_string(e));
  for (int i = 0; i < 2; ++i) {
    const auto u = std::size_t(i);
    if (out_pad[u] < 0 || (out_pad[u] >= strides[u] && out_pad[u] >= dilation[u]))
      ctx.fail("attribute 'output_padding' (" + std::to_string(out_pad[u]) + ") must be smaller than the stride or the dilation");
  }
  if (!x.shape || !w.shape) return tensor_type_of_rank(d, 4);
  const auto &xs = *x.shape, &ws = *w.shape;
  if (prove_not_equal(xs[1], ws[0]))
    ctx.fail("channel mismatch: data has " + to_string(xs[1]) + " input channels, but weight has " + to_string(ws[0]) + " (data " +
             dims_to_string(xs) + ", weight " + dims_to_string(ws) + ")");
  if (auto c = as_int(xs[1]); c && *c % groups != 0)
    ctx.fail_arg(0, "has " + std::to_string(*c) + " channels, which is not divisible by groups = " + std::to_string(groups));
  auto kh = as_int(ws[2]), kw = as_int(ws[3]);
  if (!kh || !kw) return tensor_type_of_rank(d, 4);
  if (*kh > limit || *kw > limit) ctx.fail_arg(1, "has a window larger than 2^31");
  for (std::size_t i = 2; i < 4; ++i)
    if (auto e = as_int(xs[i]); e && *e > limit) ctx.fail_arg(0, "has a spatial extent larger than 2^31");
  auto out = [&](const prim_expr& in, std::size_t i, std::int64_t k, std::int64_t pad_total) {
    prim_expr o = (in - make_int(1)) * make_int(strides[i]) + make_int(dilation[i] * (k - 1) + 1 + out_pad[i] - pad_total);
    if (auto c = as_int(o); c && *c <= 0) ctx.fail("the padding crops the whole output (" + std::to_string(*c) + " along spatial axis " + std::to_string(i) + ")");
    return o;
  };
  return tensor_type({xs[0], ws[1] * make_int(groups), out(xs[2], 0, *kh, pad[0] + pad[2]), out(xs[3], 1, *kw, pad[1] + pad[3])}, d);
}

inline type infer_pool2d(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  require_layout(ctx, "layout", "NCHW");
  if (x.ndim >= 0 && x.ndim != 4) ctx.fail_arg(0, "must have rank 4 (NCHW), but has rank " + std::to_string(x.ndim));
  const int_array k = positive(ctx, "pool_size", 2), strides = positive(ctx, "strides", 2), dilation = positive(ctx, "dilation", 2);
  const int_array pad = padding4(ctx);
  const bool ceil_mode = ctx.attr<bool>("ceil_mode");
  if (!x.shape) return tensor_type_of_rank(x.dt, 4);
  const auto& xs = *x.shape;
  prim_expr oh = spatial_out(ctx, xs[2], pad[0] + pad[2], k[0], strides[0], dilation[0], ceil_mode, "pooling");
  prim_expr ow = spatial_out(ctx, xs[3], pad[1] + pad[3], k[1], strides[1], dilation[1], ceil_mode, "pooling");
  return tensor_type({xs[0], xs[1], oh, ow}, x.dt);
}

inline type infer_adaptive_pool(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  require_layout(ctx, "layout", "NCHW");
  if (x.ndim >= 0 && x.ndim != 4) ctx.fail_arg(0, "must have rank 4 (NCHW), but has rank " + std::to_string(x.ndim));
  if (!x.shape) return tensor_type_of_rank(x.dt, 4);
  const auto& xs = *x.shape;
  const auto* size = ctx.attrs().find("output_size")->get_if<int_array>();
  if (!size) return x.shape ? tensor_type(xs, x.dt) : tensor_type_of_rank(x.dt, 4);
  int_array s = positive(ctx, "output_size", 2);
  return tensor_type({xs[0], xs[1], make_int(s[0]), make_int(s[1])}, x.dt);
}

inline type infer_pad(const call_context& ctx) {
  auto& x = ctx.ranked_tensor(0);
  const int_array& pw = ctx.attr<int_array>("pad_width");
  if (pw.size() != 2 * static_cast<std::size_t>(x.ndim))
    ctx.fail("attribute 'pad_width' must have 2 values per axis (" + std::to_string(2 * x.ndim) + "), but has " + std::to_string(pw.size()));
  const auto& mode = ctx.attr<std::string>("pad_mode");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    ctx.fail("attribute 'pad_mode' must be \"constant\", \"edge\" or \"reflect\", not \"" + mode + "\"");
  for (auto v : pw)
    if (v < 0) ctx.fail("attribute 'pad_width' must not be negative");
  if (!x.shape) return tensor_type_of_rank(x.dt, x.ndim);
  std::vector<prim_expr> out;
  for (int i = 0; i < x.ndim; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    const prim_expr& d = (*x.shape)[ui];
    if (mode == "reflect")
      if (auto n = as_int(d); n && (pw[2 * ui] >= *n || pw[2 * ui + 1] >= *n))
        ctx.fail("reflect padding of axis " + std::to_string(i) + " must be smaller than its extent " + std::to_string(*n));
    if (mode == "edge")
      if (auto n = as_int(d); n && *n == 0 && (pw[2 * ui] || pw[2 * ui + 1]))
        ctx.fail("edge padding of axis " + std::to_string(i) + " needs a non-empty axis");
    out.push_back(d + make_int(pw[2 * ui] + pw[2 * ui + 1]));
  }
  return tensor_type(std::move(out), x.dt);
}

inline void register_nn_ops(op_registry& r) {
  r.add({"nn.conv2d",
         {"data", "weight"},
         {{"strides", attr_kind::ints, int_array{1, 1}},
          {"padding", attr_kind::ints, int_array{0, 0, 0, 0}},
          {"dilation", attr_kind::ints, int_array{1, 1}},
          {"groups", attr_kind::integer, std::int64_t{1}},
          {"data_layout", attr_kind::string, "NCHW"},
          {"kernel_layout", attr_kind::string, "OIHW"},
          {"out_dtype", attr_kind::data_type, dtype::void_}},
         infer_conv2d, op_pattern::out_elemwise_fusable, "2-D convolution, NCHW data and OIHW weights, with groups (depthwise)"});
  r.add({"nn.conv2d_transpose",
         {"data", "weight"},
         {{"strides", attr_kind::ints, int_array{1, 1}},
          {"padding", attr_kind::ints, int_array{0, 0, 0, 0}},
          {"output_padding", attr_kind::ints, int_array{0, 0}},
          {"dilation", attr_kind::ints, int_array{1, 1}},
          {"groups", attr_kind::integer, std::int64_t{1}},
          {"data_layout", attr_kind::string, "NCHW"},
          {"kernel_layout", attr_kind::string, "IOHW"},
          {"out_dtype", attr_kind::data_type, dtype::void_}},
         infer_conv2d_transpose, op_pattern::opaque, "2-D transposed convolution, NCHW data and IOHW weights, with groups"});
  std::vector<attr_field> pool_attrs = {{"pool_size", attr_kind::ints, {}, true},
                                        {"strides", attr_kind::ints, int_array{1, 1}},
                                        {"padding", attr_kind::ints, int_array{0, 0, 0, 0}},
                                        {"dilation", attr_kind::ints, int_array{1, 1}},
                                        {"ceil_mode", attr_kind::boolean, false},
                                        {"layout", attr_kind::string, "NCHW"}};
  r.add({"nn.max_pool2d", {"data"}, pool_attrs, infer_pool2d, op_pattern::opaque, "2-D max pooling (NCHW)"});
  pool_attrs.push_back({"count_include_pad", attr_kind::boolean, false});
  r.add({"nn.avg_pool2d", {"data"}, pool_attrs, infer_pool2d, op_pattern::opaque, "2-D average pooling (NCHW)"});
  r.add({"nn.adaptive_avg_pool2d",
         {"data"},
         {{"output_size", attr_kind::ints, {}, false, true}, {"layout", attr_kind::string, "NCHW"}},
         infer_adaptive_pool, op_pattern::opaque, "average pooling to a fixed output size (the input size when None)"});
  r.add({"nn.global_avg_pool2d",
         {"data"},
         {{"layout", attr_kind::string, "NCHW"}},
         [](const call_context& ctx) {
           auto& x = ctx.tensor(0);
           require_layout(ctx, "layout", "NCHW");
           if (x.ndim >= 0 && x.ndim != 4) ctx.fail_arg(0, "must have rank 4 (NCHW), but has rank " + std::to_string(x.ndim));
           if (!x.shape) return tensor_type_of_rank(x.dt, 4);
           return tensor_type({(*x.shape)[0], (*x.shape)[1], make_int(1), make_int(1)}, x.dt);
         },
         op_pattern::reduction, "mean over H and W, keeping them as size 1 (N, C, 1, 1)"});
  r.add({"nn.pad",
         {"data"},
         {{"pad_width", attr_kind::ints, {}, true}, {"pad_mode", attr_kind::string, "constant"}, {"pad_value", attr_kind::floating, 0.0}},
         infer_pad, op_pattern::injective, "pads each axis before and after (constant, edge or reflect)"});
}

}  // namespace kiln::ir::detail
