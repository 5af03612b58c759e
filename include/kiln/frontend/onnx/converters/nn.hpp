// SPDX-License-Identifier: Apache-2.0
/// \file
/// The ONNX importer's neural-network converters. Neural-network operators: convolutions and their transposes, pooling, normalizations, softmax,
/// losses, resampling windows.
#pragma once

#include <kiln/frontend/onnx/converters/common.hpp>

namespace kiln::frontend::onnx {

namespace detail {

inline ir::expr softmax_like(node_context& c, const char* op) {
  const int r = c.rank(0);
  if (c.opset() >= 13) return c.call(op, {c.input(0)}, {{"axis", c.axis(c.attr_int("axis", -1), r)}});
  // Before opset 13: the input is coerced to 2-D at `axis` (default 1) and the softmax is over
  // the second dimension.
  const std::int64_t axis = c.axis(c.attr_int("axis", 1), std::max(r, 1));
  if (axis == r - 1) return c.call(op, {c.input(0)}, {{"axis", std::int64_t{r - 1}}});
  const auto d = c.shape(0);
  ir::expr flat = reshape_to(c, c.input(0), {product(d, 0, std::size_t(axis)), product(d, std::size_t(axis), d.size())});
  ir::expr s = c.call(op, {flat}, {{"axis", std::int64_t{1}}});
  return reshape_to(c, s, d);
}

/// NegativeLogLikelihoodLoss over `x` (N, C, d1, ...; log-probabilities) and `target` (N, d1,
/// ...; class indices), with per-class `weight` (C; null for none), `reduction` ("none", "sum",
/// "mean") and, when `ignore`, the target value whose entries count for nothing. Written without
/// a gather: a class-index constant compared with the target selects each entry's class, so a
/// target that is ignored (or out of range) selects nothing rather than reading out of bounds.
///   loss = -x[n, t, ...] * w[t]     mean = sum(loss) / sum(w[t])  (over the entries not ignored)
inline ir::expr nll_loss(node_context& c, const ir::expr& x, const ir::expr& target, const ir::expr* weight, const std::string& reduction,
                         std::optional<std::int64_t> ignore) {
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    c.fail("reduction must be 'none', 'sum' or 'mean', not '" + reduction + "'");
  const auto& xt = static_cast<const ir::tensor_type_node&>(*x->checked_type);
  const auto& tt = static_cast<const ir::tensor_type_node&>(*target->checked_type);
  const dtype dt = xt.dt;
  if (dt != dtype::float32 && dt != dtype::float64) c.fail("the input must be float32 or float64, not " + std::string(name(dt)));
  if (tt.dt != dtype::int64 && tt.dt != dtype::int32) c.fail("the target must be int32 or int64, not " + std::string(name(tt.dt)));
  if (!xt.shape || !tt.shape || xt.shape->size() < 2 || tt.shape->size() + 1 != xt.shape->size())
    c.fail("the input must be (N, C, d1, ...) and the target (N, d1, ...)");
  const std::vector<ir::prim_expr>& d = *xt.shape;
  const auto classes = ir::as_int(d[1]);
  if (!classes) c.fail("the number of classes (dimension 1 of the input) must be static");
  const std::size_t r = d.size();
  // (N, 1, d1, ...) targets against (1, C, 1, ...) class indices.
  ir::expr t = tt.dt == dtype::int64 ? target : c.call("astype", {target}, {{"dtype", dtype::int64}});
  std::vector<ir::prim_expr> with_axis = *tt.shape;
  with_axis.insert(with_axis.begin() + 1, ir::make_int(1));
  const ir::expr t1 = reshape_to(c, t, with_axis);
  std::vector<ir::prim_expr> class_dims(r, ir::make_int(1));
  class_dims[1] = ir::make_int(*classes);
  const ir::expr selected = c.call("equal", {t1, iota_along(c, *classes, r, 1)});
  const ir::expr zero = c.scalar(0, dt);
  const ir::int_array class_axis{1};
  const ir::expr picked = c.call("sum", {c.call("where", {selected, x, zero})}, {{"axis", class_axis}, {"keepdims", false}});
  ir::expr w;
  if (weight) {
    const auto& wt = static_cast<const ir::tensor_type_node&>(*(*weight)->checked_type);
    if (wt.dt != dt || !wt.shape || wt.shape->size() != 1 || ir::as_int((*wt.shape)[0]) != classes)
      c.fail("the weight must be " + std::string(name(dt)) + "[" + std::to_string(*classes) + "] (one per class)");
    w = c.call("sum", {c.call("where", {selected, reshape_to(c, *weight, class_dims), zero})}, {{"axis", class_axis}, {"keepdims", false}});
  } else {
    w = c.call("sum", {c.call("astype", {selected}, {{"dtype", dt}})}, {{"axis", class_axis}, {"keepdims", false}});
  }
  if (ignore) w = c.call("where", {c.call("not_equal", {t, c.constant(ir::ndarray::scalar(dtype::int64, double(*ignore)))}), w, zero});
  const ir::expr loss = c.call("negative", {c.call("multiply", {picked, w})});
  if (reduction == "none") return loss;
  const ir::expr total = c.call("sum", {loss}, {{"keepdims", false}});
  if (reduction == "sum") return total;
  return c.call("divide", {total, c.call("sum", {w}, {{"keepdims", false}})});
}

/// A per-spatial-axis attribute (strides, dilations, kernel_shape, output_padding) of `n` values,
/// each in [least, 2^31 - 1] (the bound keeps the padding arithmetic in range), or `fallback` for
/// each axis when absent.
inline std::vector<std::int64_t> spatial_list(node_context& c, const char* name, std::size_t n, std::int64_t fallback, std::int64_t least) {
  auto v = c.attr_ints(name).value_or(std::vector<std::int64_t>(n, fallback));
  if (v.size() != n)
    c.fail(std::string("attribute '") + name + "' must have " + std::to_string(n) + (n == 1 ? " value" : " values") + " for a " +
           std::to_string(n) + "-D operation, has " + std::to_string(v.size()));
  for (auto x : v)
    if (x < least || x > std::numeric_limits<std::int32_t>::max())
      c.fail(std::string("attribute '") + name + "' must be between " + std::to_string(least) + " and 2^31 - 1, has " + std::to_string(x));
  return v;
}

/// Conv and pooling padding over `kernel.size()` spatial axes: ONNX's `pads` or `auto_pad` (SAME_*
/// computed from the input's static extents), as [begin..., end...].
inline std::vector<std::int64_t> spatial_padding(node_context& c, const std::vector<std::int64_t>& kernel,
                                                 const std::vector<std::int64_t>& strides, const std::vector<std::int64_t>& dilations) {
  const std::size_t n = kernel.size();
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    auto pads = c.attr_ints("pads").value_or(std::vector<std::int64_t>(2 * n, 0));
    if (pads.size() != 2 * n)
      c.fail("attribute 'pads' must have " + std::to_string(2 * n) + " values for a " + std::to_string(n) + "-D operation, has " +
             std::to_string(pads.size()));
    return pads;
  }
  if (auto_pad == "VALID") return std::vector<std::int64_t>(2 * n, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") c.fail("unknown auto_pad '" + auto_pad + "'");
  const auto shape = c.shape(0);
  std::vector<std::int64_t> pads(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    auto in = ir::as_int(shape[2 + i]);
    if (!in) c.fail("auto_pad " + auto_pad + " needs static spatial dimensions");
    if (*in < 0 || *in > (std::int64_t(1) << 40)) c.fail("spatial dimension " + std::to_string(*in) + " is out of range");
    const std::int64_t out = (*in + strides[i] - 1) / strides[i];
    const std::int64_t need = std::max<std::int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - *in);
    const std::int64_t small = need / 2, big = need - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : big;
    pads[n + i] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

/// kiln's 2-D operators run ONNX's 1-D ones as 2-D with a height of 1: a per-axis list for
/// `spatial` axes as two values (`h` in front when there is one axis).
inline ir::int_array as_2d(std::vector<std::int64_t> v, std::int64_t h) {
  if (v.size() == 1) v.insert(v.begin(), h);
  return ir::int_array(v.begin(), v.end());
}
/// Padding [begin..., end...] for one or two axes as kiln's (top, left, bottom, right).
inline ir::int_array padding_2d(const std::vector<std::int64_t>& pads) {
  if (pads.size() == 2) return {0, pads[0], 0, pads[1]};
  return {pads[0], pads[1], pads[2], pads[3]};
}
/// A rank-3 tensor [N, C, L] as [N, C, 1, L], for a 1-D operation run as a 2-D one.
inline ir::expr with_unit_height(node_context& c, const ir::expr& x) {
  const auto d = ir::dyn_cast<ir::tensor_type_node>(x->checked_type)->shape.value();
  return reshape_to(c, x, {d[0], d[1], ir::make_int(1), d[2]});
}
/// The 2-D result of a 1-D operation back to rank 3.
inline ir::expr without_unit_height(node_context& c, const ir::expr& y) {
  const auto d = ir::dyn_cast<ir::tensor_type_node>(y->checked_type)->shape.value();
  return reshape_to(c, y, {d[0], d[1], d[3]});
}

/// The number of spatial axes of input 0 of a Conv, pooling or ConvTranspose node: 1 or 2, or
/// also 3 where `three` (3-D convolution and pooling run as 2-D ones, below).
inline std::size_t spatial_rank(node_context& c, const char* what, bool three = false) {
  const int r = c.rank(0);
  if (r != 3 && r != 4 && (!three || r != 5))
    c.fail(std::string(three ? "only 1-D, 2-D and 3-D " : "only 1-D and 2-D ") + what + (three ? " (rank-3, 4 or 5 input)" : " (rank-3 or rank-4 input)") +
           " are supported, the input has rank " + std::to_string(r));
  return std::size_t(r - 2);
}

/// MaxPool and AveragePool, 1-D, 2-D or 3-D. A 3-D pool runs as two 2-D ones, which is exact
/// because both pools are separable: first the (height, width) window of every depth plane, over
/// [N, C * D, H, W]; then the depth window, over [N, C, D, OH * OW] with windows one wide — a
/// maximum of maxima, and an average of averages whose divisor (the window's cells, or those
/// inside the input when padding is not counted) is the product of its per-axis counts.
inline exprs pool(node_context& c, const char* op, bool average) {
  const std::size_t n = spatial_rank(c, "pooling", true);
  if (c.node().output_size() > 1 && !c.node().output(1).empty()) c.fail("the Indices output of MaxPool is not supported");
  if (!c.has_attr("kernel_shape")) c.fail("attribute 'kernel_shape' is required");
  if (c.attr_int("storage_order", 0) != 0) c.fail("storage_order 1 is not supported");
  const auto kernel = spatial_list(c, "kernel_shape", n, 1, 1);
  const auto strides = spatial_list(c, "strides", n, 1, 1);
  const auto dilations = spatial_list(c, "dilations", n, 1, 1);
  const auto pads = spatial_padding(c, kernel, strides, dilations);
  const auto attrs_for = [&](ir::int_array size, ir::int_array stride, ir::int_array padding, ir::int_array dilation) {
    ir::attr_map attrs{{"pool_size", std::move(size)},
                       {"strides", std::move(stride)},
                       {"padding", std::move(padding)},
                       {"dilation", std::move(dilation)},
                       {"ceil_mode", c.attr_int("ceil_mode", 0) != 0}};
    if (average) attrs.set("count_include_pad", c.attr_int("count_include_pad", 0) != 0);
    return attrs;
  };
  if (n == 3) {
    const auto d = c.shape(0);
    const ir::expr planes = reshape_to(c, c.input(0), {d[0], d[1] * d[2], d[3], d[4]});
    const ir::expr hw = c.call(op, {planes}, attrs_for({kernel[1], kernel[2]}, {strides[1], strides[2]}, {pads[1], pads[2], pads[4], pads[5]}, {dilations[1], dilations[2]}));
    const auto s = shape_of(hw);
    const ir::expr depth = c.call(op, {reshape_to(c, hw, {d[0], d[1], d[2], s[2] * s[3]})},
                                  attrs_for({kernel[0], 1}, {strides[0], 1}, {pads[0], 0, pads[3], 0}, {dilations[0], 1}));
    return one(reshape_to(c, depth, {d[0], d[1], shape_of(depth)[2], s[2], s[3]}));
  }
  const ir::attr_map attrs = attrs_for(as_2d(kernel, 1), as_2d(strides, 1), padding_2d(pads), as_2d(dilations, 1));
  if (n == 2) return one(c.call(op, {c.input(0)}, attrs));
  return one(without_unit_height(c, c.call(op, {with_unit_height(c, c.input(0))}, attrs)));
}

/// A 3-D convolution ([N, C, D, H, W] by [O, C / group, KD, KH, KW]) as one 2-D convolution: the
/// KD depth planes each output plane reads are stacked as channels — [N * OD, C * KD, H, W],
/// channel c * KD + i holding plane i of input channel c — and the weight is the same numbers
/// as [O, C / group * KD, KH, KW] (each group's channels stay together). The input is copied KD
/// times over; the depth must be static.
inline ir::expr conv_3d(node_context& c, const std::vector<std::int64_t>& kernel, const std::vector<std::int64_t>& strides,
                        const std::vector<std::int64_t>& pads, const std::vector<std::int64_t>& dilations, std::int64_t groups) {
  const auto d = c.shape(0), w = c.shape(1);
  const auto depth = ir::as_int(d[2]);
  if (!depth) c.fail("a 3-D convolution needs a static depth (input dimension 2), has " + ir::to_string(d[2]));
  const std::int64_t kd = kernel[0], sd = strides[0], dd = dilations[0];
  if (ir::as_int(w[2]) != kd) c.fail("the weight's depth " + ir::to_string(w[2]) + " is not the kernel's, " + std::to_string(kd));
  // One slice of the input per plane of the kernel: a bound keeps the graph (and the copy) small.
  if (kd > 256) c.fail("3-D convolution kernels deeper than 256 planes are not supported, has " + std::to_string(kd));
  for (const std::int64_t p : pads)
    if (p < 0 || p > std::numeric_limits<std::int32_t>::max()) c.fail("pads must be between 0 and 2^31 - 1, has " + std::to_string(p));
  if (*depth < 0 || *depth > (std::int64_t(1) << 40)) c.fail("the input's depth " + std::to_string(*depth) + " is out of range");
  const std::int64_t od = (*depth + pads[0] + pads[3] - dd * (kd - 1) - 1) / sd + 1;
  if (*depth + pads[0] + pads[3] < dd * (kd - 1) + 1)
    c.fail("the kernel's depth " + std::to_string(kd) + " (dilation " + std::to_string(dd) + ") exceeds the padded input's depth " +
           std::to_string(*depth + pads[0] + pads[3]));
  ir::expr x = c.input(0);
  if (pads[0] != 0 || pads[3] != 0)
    x = c.call("nn.pad", {x}, {{"pad_width", ir::int_array{0, 0, 0, 0, pads[0], pads[3], 0, 0, 0, 0}}, {"pad_mode", std::string("constant")}, {"pad_value", 0.0}});
  exprs planes;
  for (std::int64_t i = 0; i < kd; ++i) {
    const ir::expr plane = c.call("strided_slice", {x},
                                  {{"axes", ir::int_array{2}}, {"begin", ir::int_array{i * dd}}, {"end", ir::int_array{i * dd + (od - 1) * sd + 1}}, {"strides", ir::int_array{sd}}});
    planes.push_back(reshape_to(c, plane, {d[0], d[1], ir::make_int(1), ir::make_int(od), d[3], d[4]}));
  }
  const ir::expr stacked = kd == 1 ? planes[0] : c.call("concat", {ir::make_tuple(planes)}, {{"axis", std::int64_t{2}}});  // [N, C, KD, OD, H, W]
  const ir::expr in = reshape_to(c, c.call("permute_dims", {stacked}, {{"axes", ir::int_array{0, 3, 1, 2, 4, 5}}}),
                                 {d[0] * od, d[1] * kd, d[3], d[4]});
  const ir::expr weight = reshape_to(c, c.input(1), {w[0], w[1] * kd, w[3], w[4]});
  const ir::expr y = c.call("nn.conv2d", {in, weight},
                            {{"strides", ir::int_array{strides[1], strides[2]}},
                             {"padding", ir::int_array{pads[1], pads[2], pads[4], pads[5]}},
                             {"dilation", ir::int_array{dilations[1], dilations[2]}},
                             {"groups", groups}});
  const auto s = shape_of(y);  // [N * OD, O, OH, OW]
  return c.call("permute_dims", {reshape_to(c, y, {d[0], ir::make_int(od), s[1], s[2], s[3]})}, {{"axes", ir::int_array{0, 2, 1, 3, 4}}});
}

/// The per-channel vector `v` (length C) shaped to broadcast against a rank-`r` NC... tensor.
inline ir::expr channel_vector(node_context& c, const ir::expr& v, int r) {
  auto* t = ir::dyn_cast<ir::tensor_type_node>(v->checked_type);
  if (!t || !t->shape || t->shape->size() != 1) c.fail("per-channel parameters must be 1-D");
  std::vector<ir::prim_expr> dims{(*t->shape)[0]};
  for (int i = 2; i < r; ++i) dims.push_back(ir::make_int(1));
  return reshape_to(c, v, dims);
}

/// ConvTranspose, 1-D (as 2-D with a height of 1) or 2-D. An explicit output_shape (or auto_pad
/// SAME_*, whose output is input * stride) sets the padding as ONNX Runtime does: the full
/// output's excess, at least 0, split per auto_pad (the larger half at the start unless
/// SAME_UPPER), with any shortfall added at the end as output padding.
inline exprs conv_transpose(node_context& c) {
  const std::size_t sr = spatial_rank(c, "transposed convolution");
  const int r = int(sr) + 2;
  if (c.rank(1) != r) c.fail("the weight must have the input's rank " + std::to_string(r) + ", it has rank " + std::to_string(c.rank(1)));
  const auto list = [&](const char* name, std::int64_t fallback, std::int64_t least) { return spatial_list(c, name, sr, fallback, least); };
  const auto in = static_shape(c, 0, "ConvTranspose");
  const auto w = static_shape(c, 1, "ConvTranspose");
  std::vector<std::int64_t> kernel(w.begin() + 2, w.end());
  if (c.has_attr("kernel_shape") && list("kernel_shape", 1, 1) != kernel) c.fail("attribute 'kernel_shape' disagrees with the weight's shape");
  const auto strides = list("strides", 1, 1), dilations = list("dilations", 1, 1);
  auto out_pad = list("output_padding", 0, 0);
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") c.fail("unknown auto_pad '" + auto_pad + "'");
  std::vector<std::int64_t> begin(sr, 0), end(sr, 0);
  std::optional<std::vector<std::int64_t>> out_shape = c.attr_ints("output_shape");
  if (out_shape && out_shape->size() == sr + 2) out_shape->erase(out_shape->begin(), out_shape->begin() + 2);
  if (out_shape && out_shape->size() != sr) c.fail("attribute 'output_shape' must have " + std::to_string(sr) + " spatial values");
  if (!out_shape && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")) {
    out_shape.emplace();
    for (std::size_t i = 0; i < sr; ++i) out_shape->push_back(in[2 + i] * strides[i]);
  }
  for (std::size_t i = 0; i < sr; ++i) {
    if (in[2 + i] > (std::int64_t(1) << 30) || kernel[i] > (std::int64_t(1) << 30))
      c.fail("spatial extents above 2^30 are not supported, got " + std::to_string(in[2 + i]) + " and a window of " + std::to_string(kernel[i]));
    const std::int64_t full = (in[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1;
    if (out_shape) {
      const std::int64_t want = (*out_shape)[i];
      if (want < 1) c.fail("attribute 'output_shape' must be positive, has " + std::to_string(want));
      const std::int64_t total = std::max<std::int64_t>(0, full + out_pad[i] - want);
      begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
      out_pad[i] = want - (full - total);
    } else if (auto_pad == "NOTSET") {
      const auto pads = c.attr_ints("pads").value_or(std::vector<std::int64_t>(2 * sr, 0));
      if (pads.size() != 2 * sr) c.fail("attribute 'pads' must have " + std::to_string(2 * sr) + " values, has " + std::to_string(pads.size()));
      for (auto p : pads)
        if (p < 0) c.fail("attribute 'pads' must not be negative");
      begin[i] = pads[i];
      end[i] = pads[sr + i];
    }
  }
  std::vector<std::int64_t> pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  const ir::attr_map attrs{{"strides", as_2d(strides, 1)},
                           {"padding", padding_2d(pads)},
                           {"output_padding", as_2d(out_pad, 0)},
                           {"dilation", as_2d(dilations, 1)},
                           {"groups", c.attr_int("group", 1)}};
  ir::expr y = sr == 2 ? c.call("nn.conv2d_transpose", {c.input(0), c.input(1)}, attrs)
                       : without_unit_height(c, c.call("nn.conv2d_transpose", {with_unit_height(c, c.input(0)),
                                                                               with_unit_height(c, c.input(1))}, attrs));
  if (c.has_input(2)) y = c.call("add", {y, channel_vector(c, c.input(2), r)});
  return one(y);
}

}  // namespace detail

/// Adds the neural-network converters to `t`.
inline void add_nn_converters(converter_table& t) {
  using namespace detail;
  t.add("Conv", 1, [](node_context& c) {
    const std::size_t n = spatial_rank(c, "convolution", true);
    const int r = int(n) + 2;
    if (c.rank(1) != r)
      c.fail("the weight must have rank " + std::to_string(r) + " (M, C/group, kernel...), it has rank " + std::to_string(c.rank(1)));
    const auto w = c.shape(1);
    std::vector<std::int64_t> kernel;
    if (c.has_attr("kernel_shape")) kernel = spatial_list(c, "kernel_shape", n, 1, 1);
    else
      for (std::size_t i = 2; i < w.size(); ++i) {
        auto v = ir::as_int(w[i]);
        if (!v) c.fail("the kernel's spatial size must be static");
        kernel.push_back(*v);
      }
    const auto strides = spatial_list(c, "strides", n, 1, 1);
    const auto dilations = spatial_list(c, "dilations", n, 1, 1);
    const auto pads = spatial_padding(c, kernel, strides, dilations);
    const std::int64_t group = c.attr_int("group", 1);
    const ir::attr_map attrs{{"strides", as_2d(strides, 1)}, {"padding", padding_2d(pads)}, {"dilation", as_2d(dilations, 1)}, {"groups", group}};
    ir::expr y = n == 3   ? conv_3d(c, kernel, strides, pads, dilations, group)
                 : n == 2 ? c.call("nn.conv2d", {c.input(0), c.input(1)}, attrs)
                          : without_unit_height(c, c.call("nn.conv2d", {with_unit_height(c, c.input(0)), with_unit_height(c, c.input(1))}, attrs));
    if (c.has_input(2)) y = c.call("add", {y, channel_vector(c, c.input(2), r)});
    return one(y);
  });
  t.add("ConvTranspose", 1, conv_transpose);
  t.add("MaxPool", 1, [](node_context& c) { return pool(c, "nn.max_pool2d", false); });
  t.add("AveragePool", 1, [](node_context& c) { return pool(c, "nn.avg_pool2d", true); });
  // Over every spatial axis of [N, C, spatial...]: 2-D has a kernel of its own.
  const auto spatial_axes = [](node_context& c) {
    const int r = c.rank(0);
    if (r < 3) c.fail("the input must have rank 3 or more ([N, C, spatial...]), has rank " + std::to_string(r));
    ir::int_array axes;
    for (int a = 2; a < r; ++a) axes.push_back(a);
    return axes;
  };
  t.add("GlobalAveragePool", 1, [spatial_axes](node_context& c) {
    if (c.rank(0) == 4) return one(c.call("nn.global_avg_pool2d", {c.input(0)}));
    return one(c.call("mean", {c.input(0)}, {{"axis", spatial_axes(c)}, {"keepdims", true}}));
  });
  t.add("GlobalMaxPool", 1, [spatial_axes](node_context& c) {
    return one(c.call("max", {c.input(0)}, {{"axis", spatial_axes(c)}, {"keepdims", true}}));
  });
  t.add("BatchNormalization", 1, [](node_context& c) {
    if (c.opset() >= 14 && c.attr_int("training_mode", 0) != 0) {
      // training (opset 14+): normalise with the batch's statistics over all axes but the
      // channels (population variance); the running statistics move towards them by 1 - momentum
      const int r = c.rank(0);
      const dtype dt = c.input_dtype(0);
      const double eps = c.attr_float("epsilon", 1e-5), momentum = c.attr_float("momentum", 0.9);
      ir::int_array axes{0};
      for (int a = 2; a < r; ++a) axes.push_back(a);
      const moments m = moments_over(c, c.input(0), axes);
      const ir::expr normed = c.call("multiply", {m.dev, c.call("rsqrt", {c.call("add", {m.var, c.scalar(eps, dt)})})});
      exprs outs = one(c.call("add", {c.call("multiply", {normed, channel_vector(c, c.input(1), r)}), channel_vector(c, c.input(2), r)}));
      const auto running = [&](std::size_t i, const ir::expr& batch) {
        const ir::expr flat = reshape_to(c, batch, c.shape(i));
        return c.call("add", {c.call("multiply", {c.input(i), c.scalar(momentum, dt)}), c.call("multiply", {flat, c.scalar(1 - momentum, dt)})});
      };
      outs.push_back(running(3, m.mean));
      outs.push_back(running(4, m.var));
      return outs;
    }
    if (c.node().output_size() > 1) c.fail("training mode (more than one output) is not supported before opset 14");
    if (c.opset() < 7 && c.attr_int("is_test", 0) == 0 && c.opset() < 6) c.fail("training mode is not supported");
    const int r = c.rank(0);
    const dtype dt = c.input_dtype(0);
    const double eps = c.attr_float("epsilon", 1e-5);
    // y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a: computed now when the
    // statistics are constants (the usual case), else in the program.
    ir::expr a = c.call("divide", {c.input(1), c.call("sqrt", {c.call("add", {c.input(4), c.scalar(eps, dt)})})});
    ir::expr b = c.call("subtract", {c.input(2), c.call("multiply", {c.input(3), a})});
    ir::expr y = c.call("multiply", {c.input(0), channel_vector(c, a, r)});
    return one(c.call("add", {y, channel_vector(c, b, r)}));
  });
  t.add("LayerNormalization", 17, [](node_context& c) {
    if (c.has_attr("stash_type") && c.attr_int("stash_type", 1) != 1) c.fail("stash_type other than float32 is not supported");
    const int r = c.rank(0);
    const std::int64_t axis = c.axis(c.attr_int("axis", -1), r);
    const double eps = c.attr_float("epsilon", 1e-5);
    ir::int_array axes;
    for (std::int64_t i = axis; i < r; ++i) axes.push_back(i);
    // nn.layer_norm normalizes over `axes` with gamma and beta of those axes' shape; ONNX's
    // scale and bias broadcast against them, so they are broadcast to that shape first.
    const auto d = c.shape(0);
    std::vector<ir::prim_expr> norm_shape(d.begin() + axis, d.end());
    ir::expr gamma = c.call("broadcast_to", {c.input(1), ir::make_shape_expr(norm_shape)});
    ir::expr beta = c.has_input(2) ? c.call("broadcast_to", {c.input(2), ir::make_shape_expr(norm_shape)})
                                   : c.call("multiply", {gamma, c.scalar(0, c.input_dtype(1))});
    exprs outs = one(c.call("nn.layer_norm", {c.input(0), gamma, beta}, {{"axes", axes}, {"epsilon", eps}}));
    const bool stats = (c.node().output_size() > 1 && !c.node().output(1).empty()) || (c.node().output_size() > 2 && !c.node().output(2).empty());
    if (stats) {  // Mean and InvStdDev, reduced over the same axes with them kept
      const dtype dt = c.input_dtype(0);
      const moments m = moments_over(c, c.input(0), axes);
      outs.push_back(m.mean);
      outs.push_back(c.call("rsqrt", {c.call("add", {m.var, c.scalar(eps, dt)})}));
    }
    outs.resize(std::size_t(c.node().output_size()));
    return outs;
  });
  auto ignore_index = [](node_context& c) -> std::optional<std::int64_t> {
    if (!c.has_attr("ignore_index")) return std::nullopt;
    return c.attr_int("ignore_index");
  };
  t.add("NegativeLogLikelihoodLoss", 12, [=](node_context& c) {
    const ir::expr* weight = c.has_input(2) ? &c.input(2) : nullptr;
    return one(nll_loss(c, c.input(0), c.input(1), weight, c.attr_string("reduction", "mean"), ignore_index(c)));
  });
  t.add("SoftmaxCrossEntropyLoss", 12, [=](node_context& c) {  // NLL of the log-softmax over the classes
    if (c.rank(0) < 2) c.fail("the scores must be (N, C, d1, ...)");
    const ir::expr log_prob = c.call("nn.log_softmax", {c.input(0)}, {{"axis", std::int64_t{1}}});
    const ir::expr* weight = c.has_input(2) ? &c.input(2) : nullptr;
    exprs outs = one(nll_loss(c, log_prob, c.input(1), weight, c.attr_string("reduction", "mean"), ignore_index(c)));
    if (c.node().output_size() > 1) outs.push_back(log_prob);
    return outs;
  });
  t.add("Hardmax", 1, [](node_context& c) {  // 1 at the first maximum along the axis: argmax compared with the indices
    const int r = c.rank(0);
    const dtype dt = c.input_dtype(0);
    auto hardmax = [&](const ir::expr& x, std::int64_t axis, const std::vector<ir::prim_expr>& d) {
      const auto n = ir::as_int(d[std::size_t(axis)]);
      if (!n) c.fail("the length of the axis must be static");
      const ir::expr first = c.call("argmax", {x}, {{"axis", axis}, {"keepdims", true}});
      return c.call("astype", {c.call("equal", {first, iota_along(c, *n, d.size(), std::size_t(axis))})}, {{"dtype", dt}});
    };
    if (c.opset() >= 13) return one(hardmax(c.input(0), c.axis(c.attr_int("axis", -1), r), c.shape(0)));
    // Before opset 13: over the input coerced to 2-D at `axis` (default 1).
    const std::int64_t axis = c.axis(c.attr_int("axis", 1), std::max(r, 1));
    const auto d = c.shape(0);
    const std::vector<ir::prim_expr> flat{product(d, 0, std::size_t(axis)), product(d, std::size_t(axis), d.size())};
    return one(reshape_to(c, hardmax(reshape_to(c, c.input(0), flat), 1, flat), d));
  });
  t.add("Softmax", 1, [](node_context& c) { return one(softmax_like(c, "nn.softmax")); });
  t.add("LogSoftmax", 1, [](node_context& c) { return one(softmax_like(c, "nn.log_softmax")); });

}

}  // namespace kiln::frontend::onnx
