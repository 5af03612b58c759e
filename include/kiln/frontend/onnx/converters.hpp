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
#pragma once

#include <kiln/frontend/onnx/node_context.hpp>
#include <kiln/frontend/onnx/recurrent.hpp>
#include <kiln/frontend/onnx/shape_values.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace kiln::frontend::onnx {

class converter_table {
public:
  /// Adds a converter for `op_type` valid from opset `since` on.
  void add(const std::string& op_type, int since, converter_fn fn) {
    auto& v = table_[op_type];
    v.push_back({since, std::move(fn)});
    std::sort(v.begin(), v.end(), [](const converter_entry& a, const converter_entry& b) { return a.since < b.since; });
  }
  bool knows(const std::string& op_type) const { return table_.count(op_type) != 0; }
  /// The converter for `op_type` at `opset`: the one with the largest `since` ≤ `opset`.
  const converter_entry* find(const std::string& op_type, int opset) const {
    auto it = table_.find(op_type);
    if (it == table_.end()) return nullptr;
    const converter_entry* best = nullptr;
    for (auto& e : it->second)
      if (e.since <= opset) best = &e;
    return best;
  }
  /// The smallest opset any converter of `op_type` accepts (for messages).
  int first_opset(const std::string& op_type) const { return table_.at(op_type).front().since; }
  /// `op_type` has converters, but all of them are for opsets newer than `opset`.
  bool predates(const std::string& op_type, int opset) const { return knows(op_type) && !find(op_type, opset); }
  std::vector<std::string> op_types() const {
    std::vector<std::string> out;
    for (auto& [k, v] : table_) out.push_back(k);
    return out;
  }

  /// The table of kiln's own converters.
  static const converter_table& builtin();

private:
  std::map<std::string, std::vector<converter_entry>> table_;
};

namespace detail {

using exprs = std::vector<ir::expr>;

inline exprs one(ir::expr e) { return {std::move(e)}; }

inline ir::prim_expr product(const std::vector<ir::prim_expr>& d, std::size_t from, std::size_t to) {
  ir::prim_expr p = ir::make_int(1);
  for (std::size_t i = from; i < to; ++i) p = ir::as_int(p) == 1 ? d[i] : p * d[i];
  return p;
}

inline void unary(converter_table& t, const char* onnx, const char* kiln) {
  t.add(onnx, 1, [kiln](node_context& c) { return one(c.call(kiln, {c.input(0)})); });
}
/// The right operand of a binary operator before opset 7: with `broadcast` = 1 and an `axis`,
/// B's dimensions line up with A's from that axis (A [2, 3, 4, 5], B [3, 4], axis 1), which is
/// numpy's broadcasting once B has trailing 1s; without an axis they line up at the end, as in
/// numpy. (Without `broadcast` the shapes must be equal, which numpy's rule also accepts.)
inline ir::expr legacy_broadcast_operand(node_context& c) {
  if (c.opset() >= 7 || c.attr_int("broadcast", 0) == 0 || !c.has_attr("axis")) return c.input(1);
  const int ra = c.rank(0), rb = c.rank(1);
  const std::int64_t given = c.attr_int("axis", 0), axis = given < 0 ? given + ra : given;
  if (axis < 0 || axis + rb > ra)
    c.fail(kiln::detail::concat("legacy broadcasting: axis ", given, " does not place the second operand's ", rb,
                                " dimension(s) within the first operand's ", ra));
  if (axis + rb == ra) return c.input(1);
  std::vector<ir::prim_expr> dims = c.shape(1);
  dims.resize(std::size_t(ra - axis), ir::make_int(1));
  return reshape_to(c, c.input(1), std::move(dims));
}

inline void binary(converter_table& t, const char* onnx, const char* kiln) {
  t.add(onnx, 1, [kiln](node_context& c) { return one(c.call(kiln, {c.input(0), legacy_broadcast_operand(c)})); });
}
/// Max, Min, Sum, Mean: a fold of the binary operator over every input.
inline void variadic(converter_table& t, const char* onnx, const char* kiln, bool mean = false) {
  t.add(onnx, 1, [kiln, mean](node_context& c) {
    ir::expr acc = c.input(0);
    for (std::size_t i = 1; i < c.num_inputs(); ++i) acc = c.call(kiln, {acc, c.input(i)});
    if (mean && c.num_inputs() > 1) acc = c.call("divide", {acc, c.scalar(double(c.num_inputs()), c.input_dtype(0))});
    return one(acc);
  });
}

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

inline exprs reduce(node_context& c, const char* op, bool axes_as_input) {
  const int r = c.rank(0);
  std::optional<std::vector<std::int64_t>> axes;
  if (axes_as_input) {
    if (c.has_input(1)) axes = c.constant_ints(1, "axes");
  } else {
    axes = c.attr_ints("axes");
  }
  const bool keepdims = c.attr_int("keepdims", 1) != 0;
  if (axes && axes->empty()) axes.reset();
  if (!axes && axes_as_input && c.attr_int("noop_with_empty_axes", 0) != 0) return one(c.input(0));
  ir::attr_map attrs{{"keepdims", keepdims}};
  if (axes) {
    ir::int_array norm;
    for (auto a : *axes) norm.push_back(c.axis(a, r, "axis"));
    attrs.set("axis", norm);
  }
  return one(c.call(op, {c.input(0)}, attrs));
}

/// The static dimensions of input `i`, or an error saying `what` needs them.
inline std::vector<std::int64_t> static_shape(node_context& c, std::size_t i, const char* what) {
  std::vector<std::int64_t> out;
  for (const ir::prim_expr& d : c.shape(i)) {
    const auto v = ir::as_int(d);
    if (!v) c.fail(std::string(what) + " needs static dimensions; fix them with import_options::shapes");
    out.push_back(*v);
  }
  return out;
}

/// How Resize and Upsample call `image.resize`: the output size from `sizes`, or from `scales`
/// (floor(extent * scale), the scales kept for the coordinate mapping); `axes` (opset 18) says
/// which axes the values are for, the others keep their extent.
struct resize_spec {
  std::vector<double> scales;
  std::vector<std::int64_t> sizes;
  std::vector<double> roi;
  std::vector<std::int64_t> axes;
  std::string method = "nearest", coordinates = "half_pixel", rounding = "round_prefer_floor";
  double cubic_alpha = -0.75, extrapolation = 0.0;
  bool exclude_outside = false;
};

inline exprs resize(node_context& c, resize_spec s) {
  const auto in = static_shape(c, 0, c.op_type().c_str());
  const std::size_t r = in.size();
  if (s.scales.empty() == s.sizes.empty())
    c.fail(s.scales.empty() ? "either scales or sizes must be given" : "scales and sizes must not both be given");
  std::vector<std::int64_t> axes = s.axes;
  if (axes.empty())
    for (std::size_t d = 0; d < r; ++d) axes.push_back(std::int64_t(d));
  for (auto& a : axes) a = c.axis(a, int(r), "axes");
  const std::size_t given = s.scales.empty() ? s.sizes.size() : s.scales.size();
  if (given != axes.size())
    c.fail(std::string(s.scales.empty() ? "sizes" : "scales") + " has " + std::to_string(given) + " values for " + std::to_string(axes.size()) +
           " axes");
  ir::float_array scales(r, 1.0), roi(2 * r, 0.0);
  for (std::size_t d = 0; d < r; ++d) roi[r + d] = 1.0;
  ir::int_array size(in.begin(), in.end());
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const auto d = std::size_t(axes[k]);
    if (!s.scales.empty()) {
      if (!(s.scales[k] > 0) || !std::isfinite(s.scales[k])) c.fail("scales must be positive, got " + std::to_string(s.scales[k]));
      scales[d] = s.scales[k];
      const double extent = std::floor(static_cast<double>(in[d]) * s.scales[k]);
      if (!(extent <= double(std::int64_t(1) << 40)))
        c.fail("scale " + std::to_string(s.scales[k]) + " makes axis " + std::to_string(d) + " larger than 2^40 elements");
      size[d] = static_cast<std::int64_t>(extent);
    } else {
      if (s.sizes[k] < 0) c.fail("sizes must not be negative, got " + std::to_string(s.sizes[k]));
      size[d] = s.sizes[k];
    }
  }
  ir::attr_map attrs{{"size", size},
                     {"method", s.method},
                     {"coordinate_transformation_mode", s.coordinates},
                     {"rounding_method", s.rounding},
                     {"cubic_alpha", s.cubic_alpha},
                     {"cubic_exclude", s.exclude_outside},
                     {"extrapolation_value", s.extrapolation}};
  if (!s.scales.empty()) attrs.set("scales", scales);
  if (s.coordinates == "tf_crop_and_resize") {
    if (s.roi.size() != 2 * axes.size())
      c.fail("tf_crop_and_resize needs a roi of " + std::to_string(2 * axes.size()) + " values, got " + std::to_string(s.roi.size()));
    for (std::size_t k = 0; k < axes.size(); ++k) {
      roi[std::size_t(axes[k])] = s.roi[k];
      roi[r + std::size_t(axes[k])] = s.roi[axes.size() + k];
    }
    attrs.set("roi", roi);
  }
  return one(c.call("image.resize", {c.input(0)}, attrs));
}

/// x reshaped to `split`, its axes permuted by `perm`, reshaped to `out` (DepthToSpace, SpaceToDepth).
inline ir::expr rearrange(node_context& c, const std::vector<std::int64_t>& split, const std::vector<std::int64_t>& perm,
                          const std::vector<std::int64_t>& out) {
  auto dims = [](const std::vector<std::int64_t>& v) {
    std::vector<ir::prim_expr> d;
    for (auto x : v) d.push_back(ir::make_int(x));
    return d;
  };
  const ir::expr y = c.call("permute_dims", {reshape_to(c, c.input(0), dims(split))}, {{"axes", ir::int_array(perm.begin(), perm.end())}});
  return reshape_to(c, y, dims(out));
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

/// The shape of a value the importer made (each has a static rank).
inline std::vector<ir::prim_expr> shape_of(const ir::expr& e) { return ir::dyn_cast<ir::tensor_type_node>(e->checked_type)->shape.value(); }

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

/// The shape numpy broadcasting gives two shapes (for Expand).
inline std::vector<ir::prim_expr> broadcast_shapes(node_context& c, std::vector<ir::prim_expr> a, std::vector<ir::prim_expr> b) {
  if (a.size() < b.size()) std::swap(a, b);
  std::vector<ir::prim_expr> out = a;
  const std::size_t off = a.size() - b.size();
  for (std::size_t i = 0; i < b.size(); ++i) {
    auto x = ir::as_int(a[off + i]), y = ir::as_int(b[i]);
    if (y == 1) continue;
    if (x == 1) out[off + i] = b[i];
    else if (x && y && *x != *y) c.fail("shapes cannot be broadcast together: dimension " + std::to_string(*x) + " against " + std::to_string(*y));
    else if (!x && y) out[off + i] = b[i];
  }
  return out;
}

inline ir::expr split_outputs(node_context& c, const ir::expr& x, std::int64_t axis, const std::vector<std::int64_t>& sizes, exprs& outs) {
  ir::attr_map attrs{{"axis", axis}};
  if (sizes.empty()) {
    attrs.set("sections", std::int64_t(c.node().output_size()));
  } else {
    ir::int_array idx;
    std::int64_t at = 0;
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i) idx.push_back(at += sizes[i]);
    attrs.set("indices", idx);
  }
  ir::expr tup = c.fold_or_emit(ir::call_op("split", {x}, attrs));
  for (int i = 0; i < c.node().output_size(); ++i) outs.push_back(c.fold_or_emit(ir::make_tuple_get_item(tup, i)));
  return tup;
}

inline exprs squeeze(node_context& c, std::optional<std::vector<std::int64_t>> axes) {
  const auto d = c.shape(0);
  const int r = int(d.size());
  std::vector<bool> drop(d.size(), false);
  if (axes) {
    for (auto a : *axes) {
      const auto k = std::size_t(c.axis(a, r));
      if (ir::as_int(d[k]) != 1) c.fail("axis " + std::to_string(a) + " has size " + ir::to_string(d[k]) + ", not 1");
      drop[k] = true;
    }
  } else {
    for (std::size_t k = 0; k < d.size(); ++k) drop[k] = ir::as_int(d[k]) == 1;
  }
  std::vector<ir::prim_expr> out;
  for (std::size_t k = 0; k < d.size(); ++k)
    if (!drop[k]) out.push_back(d[k]);
  return one(reshape_to(c, c.input(0), out));
}

inline exprs unsqueeze(node_context& c, const std::vector<std::int64_t>& axes) {
  const auto d = c.shape(0);
  const int r = int(d.size() + axes.size());
  std::vector<bool> inserted(std::size_t(r), false);
  for (auto a : axes) {
    const auto k = std::size_t(c.axis(a, r));
    if (inserted[k]) c.fail("axis " + std::to_string(a) + " is given twice");
    inserted[k] = true;
  }
  std::vector<ir::prim_expr> out;
  std::size_t from = 0;
  for (std::size_t k = 0; k < std::size_t(r); ++k) out.push_back(inserted[k] ? ir::make_int(1) : d[from++]);
  return one(reshape_to(c, c.input(0), out));
}

inline exprs slice(node_context& c, std::vector<std::int64_t> starts, std::vector<std::int64_t> ends, std::optional<std::vector<std::int64_t>> axes,
                   std::optional<std::vector<std::int64_t>> steps) {
  const int r = c.rank(0);
  if (ends.size() != starts.size()) c.fail("starts and ends differ in length");
  if (!axes) {
    axes.emplace();
    for (std::size_t i = 0; i < starts.size(); ++i) axes->push_back(std::int64_t(i));
  }
  if (axes->size() != starts.size()) c.fail("axes and starts differ in length");
  ir::int_array ax, b, e, s;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    ax.push_back(c.axis((*axes)[i], r));
    b.push_back(starts[i]);
    e.push_back(ends[i]);
    const std::int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0) c.fail("a step is 0");
    s.push_back(step);
  }
  return one(c.call("strided_slice", {c.input(0)}, {{"axes", ax}, {"begin", b}, {"end", e}, {"strides", s}}));
}

/// begin, begin + step, ... (`length` of them) as an int64 tensor made at run time: a cumulative
/// sum of ones, for lengths and starts computed from symbolic dimensions.
inline ir::expr symbolic_range(node_context& c, const ir::prim_expr& begin, const ir::prim_expr& length, std::int64_t step) {
  const auto int64 = [&](std::int64_t v) { return c.scalar(double(v), dtype::int64); };
  const ir::expr ones = c.call("broadcast_to", {int64(1), ir::make_shape_expr({length})});
  ir::expr idx = c.call("subtract", {c.call("cumsum", {ones}, {{"axis", std::int64_t{0}}}), int64(1)});
  if (step != 1) idx = c.call("multiply", {idx, int64(step)});
  if (auto k = ir::as_int(begin)) return *k == 0 ? idx : c.call("add", {idx, int64(*k)});
  // a symbolic begin as a tensor: the sum of that many ones
  const ir::expr first = c.call("sum", {c.call("broadcast_to", {int64(1), ir::make_shape_expr({begin})})}, {{"axis", ir::int_array{0}}});
  return c.call("add", {idx, first});
}

/// Slice-10+ with starts or ends computed from symbolic dimensions (`mask[:t, :t]` for a dynamic
/// sequence t): each such axis is a `take` of the indices begin, begin + step, ... below end
/// (symbolic_range). A symbolic bound is taken to lie within the axis (a buffer of the longest
/// length cut to the current one), so the result's extent is end - begin; beyond the axis, `take`
/// reports the index out of range at run time. Constant bounds are clamped as numpy does; the
/// step must be a positive constant. Axes with constant bounds are one strided_slice.
inline exprs slice_to_symbolic_bounds(node_context& c) {
  const int r = c.rank(0);
  const auto d = c.shape(0);
  const auto starts = c.known_ints(1, "starts"), ends = c.known_ints(2, "ends");
  if (starts.size() != ends.size()) c.fail("starts and ends differ in length");
  std::vector<std::int64_t> axes, steps(starts.size(), 1);
  if (c.has_input(3)) axes = c.constant_ints(3, "axes");
  else
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(std::int64_t(i));
  if (c.has_input(4)) steps = c.constant_ints(4, "steps");
  if (axes.size() != starts.size() || steps.size() != starts.size()) c.fail("axes and steps must have one entry per start");
  ir::int_array sa, sb, se, ss;  // the axes with constant bounds
  std::vector<std::size_t> symbolic;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    if (steps[i] == 0) c.fail("a step is 0");
    auto b = ir::as_int(starts[i]), e = ir::as_int(ends[i]);
    if (b && e) {
      sa.push_back(c.axis(axes[i], r));
      sb.push_back(*b);
      se.push_back(*e);
      ss.push_back(steps[i]);
    } else {
      symbolic.push_back(i);
    }
  }
  ir::expr y = c.input(0);
  if (!sa.empty()) y = c.call("strided_slice", {y}, {{"axes", sa}, {"begin", sb}, {"end", se}, {"strides", ss}});
  for (std::size_t i : symbolic) {
    const std::int64_t step = steps[i];
    if (step < 0) c.fail("a slice with bounds computed from symbolic dimensions needs a positive step, has " + std::to_string(step));
    const std::int64_t axis = c.axis(axes[i], r);
    const ir::prim_expr dim = d[std::size_t(axis)];
    const auto bound = [&](const ir::prim_expr& v) {
      const auto k = ir::as_int(v);
      if (!k) return v;                 // symbolic: taken to lie within the axis
      if (*k < 0) return dim + *k;      // from the end
      if (auto n = ir::as_int(dim)) return ir::make_int(std::min(*k, *n));  // numpy's clamp
      return v;
    };
    const ir::prim_expr begin = bound(starts[i]), end = bound(ends[i]);
    const ir::prim_expr length = step == 1 ? end - begin : ir::floordiv(end - begin + (step - 1), ir::make_int(step));
    y = c.call("take", {y, symbolic_range(c, begin, length, step)}, {{"axis", axis}});
  }
  return one(y);
}

inline exprs clip(node_context& c, double lo, double hi) {
  return one(c.call("clip", {c.input(0)}, {{"min", lo}, {"max", hi}}));
}

inline exprs pad(node_context& c, const std::vector<std::int64_t>& pads, double value) {
  const int r = c.rank(0);
  if (pads.size() != 2 * std::size_t(r)) c.fail("pads must have 2 values per axis (" + std::to_string(2 * r) + "), has " + std::to_string(pads.size()));
  const std::string mode = c.attr_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") c.fail("pad mode '" + mode + "' is not supported");
  ir::int_array width;
  for (int i = 0; i < r; ++i) {
    if (pads[std::size_t(i)] < 0 || pads[std::size_t(i + r)] < 0) c.fail("negative pads (cropping) are not supported");
    width.push_back(pads[std::size_t(i)]);
    width.push_back(pads[std::size_t(i + r)]);
  }
  return one(c.call("nn.pad", {c.input(0)}, {{"pad_width", width}, {"pad_mode", mode}, {"pad_value", value}}));
}

/// The per-channel vector `v` (length C) shaped to broadcast against a rank-`r` NC... tensor.
inline ir::expr channel_vector(node_context& c, const ir::expr& v, int r) {
  auto* t = ir::dyn_cast<ir::tensor_type_node>(v->checked_type);
  if (!t || !t->shape || t->shape->size() != 1) c.fail("per-channel parameters must be 1-D");
  std::vector<ir::prim_expr> dims{(*t->shape)[0]};
  for (int i = 2; i < r; ++i) dims.push_back(ir::make_int(1));
  return reshape_to(c, v, dims);
}

/// The statistics a normalization takes of `x` over `axes`, kept so that they broadcast against
/// it: the mean, the deviation x - mean, and the population variance mean(deviation^2).
struct moments {
  ir::expr mean, dev, var;
};
inline moments moments_over(node_context& c, const ir::expr& x, const ir::int_array& axes) {
  moments m;
  m.mean = c.call("mean", {x}, {{"axis", axes}, {"keepdims", true}});
  m.dev = c.call("subtract", {x, m.mean});
  m.var = c.call("mean", {c.call("multiply", {m.dev, m.dev})}, {{"axis", axes}, {"keepdims", true}});
  return m;
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

/// Einsum of one or two operands, lowered to kiln's operators: a repeated label within an
/// operand takes the diagonal (a mask and a sum), labels found nowhere else are summed out, and
/// two operands become one batched matmul ([batch, left, contracted] x [batch, contracted,
/// right], as ONNX Runtime does) between transposes and reshapes. Labels are letters; "..."
/// stands for the leading axes an operand has beyond its letters (the same count and sizes in
/// both operands).
inline exprs einsum(node_context& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", "")) if (ch != ' ') eq += ch;
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (char ch : lhs) {
    if (ch == ',') terms.emplace_back();
    else terms.back().push_back(ch);
  }
  if (terms.size() != c.num_inputs()) c.fail("the equation has " + std::to_string(terms.size()) + " operands, but the node " + std::to_string(c.num_inputs()));
  if (terms.size() > 2) c.fail("Einsum of more than two operands is not supported");
  // labels: letters as their character, the ellipsis' axes as 256 + k (k counted from the last)
  const auto parse = [&](const std::string& t, int rank) {
    std::vector<int> labels;
    const auto dots = t.find("...");
    const std::string letters = dots == std::string::npos ? t : t.substr(0, dots) + t.substr(dots + 3);
    for (char ch : letters)
      if (!std::isalpha(static_cast<unsigned char>(ch))) c.fail(std::string("unexpected character '") + ch + "' in the equation '" + eq + "'");
    const int ell = rank < 0 ? 0 : rank - int(letters.size());
    if (ell < 0 || (dots == std::string::npos && rank >= 0 && ell != 0))
      c.fail("the term '" + t + "' does not match an operand of rank " + std::to_string(rank));
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (dots != std::string::npos && i == dots) {
        for (int k = ell; k-- > 0;) labels.push_back(256 + k);
        i += 2;
      } else {
        labels.push_back(static_cast<unsigned char>(t[i]));
      }
    }
    return labels;
  };
  std::vector<std::vector<int>> in;
  std::vector<ir::expr> ops;
  int ell_rank = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    in.push_back(parse(terms[i], c.rank(i)));
    ops.push_back(c.input(i));
    for (int l : in.back()) ell_rank = std::max(ell_rank, l >= 256 ? l - 255 : 0);
  }
  std::vector<int> out;
  if (arrow != std::string::npos) {
    // the output's "..." has the operands' ellipsis rank
    const std::string rhs = eq.substr(arrow + 2);
    const auto dots = rhs.find("...");
    for (std::size_t i = 0; i < rhs.size(); ++i) {
      if (dots != std::string::npos && i == dots) {
        for (int k = ell_rank; k-- > 0;) out.push_back(256 + k);
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(rhs[i])) && !std::count(out.begin(), out.end(), rhs[i])) {
        out.push_back(static_cast<unsigned char>(rhs[i]));
      } else {
        c.fail(std::string("unexpected or repeated character '") + rhs[i] + "' in the output of the equation '" + eq + "'");
      }
    }
  } else {  // implicit: the ellipsis, then the letters used once, in alphabetical order
    for (int k = ell_rank; k-- > 0;) out.push_back(256 + k);
    std::map<int, int> uses;
    for (auto& t : in) for (int l : t) if (l < 256) ++uses[l];
    for (auto [l, n] : uses) if (n == 1) out.push_back(l);
  }
  const auto dims_of = [](const ir::expr& e) { return ir::dyn_cast<ir::tensor_type_node>(e->checked_type)->shape.value(); };
  const auto permute = [&](const ir::expr& x, std::vector<int>& labels, const std::vector<int>& order) {
    ir::int_array axes;
    for (int l : order) axes.push_back(std::find(labels.begin(), labels.end(), l) - labels.begin());
    labels = order;
    bool identity = true;
    for (std::size_t i = 0; i < axes.size(); ++i) identity = identity && axes[i] == std::int64_t(i);
    return identity ? x : c.call("permute_dims", {x}, {{"axes", axes}});
  };
  const auto count = [](const std::vector<int>& v, int l) { return std::count(v.begin(), v.end(), l); };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto& labels = in[i];
    // a repeated label: keep the diagonal (mask the rest to 0, sum the second axis away)
    for (std::size_t p = 0; p < labels.size(); ++p)
      for (std::size_t q = p + 1; q < labels.size();) {
        if (labels[q] != labels[p]) {
          ++q;
          continue;
        }
        const auto d = dims_of(ops[i]);
        const auto n = ir::as_int(d[p]);
        if (!n || ir::as_int(d[q]) != n) c.fail("a repeated label needs equal static extents");
        const ir::expr mask = c.call("equal", {iota_along(c, *n, d.size(), p), iota_along(c, *n, d.size(), q)});
        ops[i] = c.call("sum", {c.call("where", {mask, ops[i], c.scalar(0, c.input_dtype(i))})}, {{"axis", ir::int_array{std::int64_t(q)}}, {"keepdims", false}});
        labels.erase(labels.begin() + std::ptrdiff_t(q));
      }
    // labels found nowhere else are summed out
    ir::int_array alone;
    std::vector<int> kept;
    for (std::size_t a = 0; a < labels.size(); ++a) {
      const bool elsewhere = count(out, labels[a]) || (ops.size() == 2 && count(in[1 - i], labels[a]));
      if (elsewhere) kept.push_back(labels[a]);
      else alone.push_back(std::int64_t(a));
    }
    if (!alone.empty()) ops[i] = c.call("sum", {ops[i]}, {{"axis", alone}, {"keepdims", false}});
    labels = kept;
  }
  for (int l : out)
    if (std::none_of(in.begin(), in.end(), [&](auto& t) { return count(t, l) > 0; }))
      c.fail("the output label '" + std::string(1, char(l < 256 ? l : '.')) + "' is in no operand");
  if (ops.size() == 1) return one(permute(ops[0], in[0], out));
  std::vector<int> batch, left, right, contracted;
  for (int l : in[0]) (count(in[1], l) ? (count(out, l) ? batch : contracted) : left).push_back(l);
  for (int l : in[1])
    if (!count(in[0], l)) right.push_back(l);
  const auto cat = [](std::initializer_list<const std::vector<int>*> parts) {
    std::vector<int> v;
    for (auto* p : parts) v.insert(v.end(), p->begin(), p->end());
    return v;
  };
  const ir::expr a = permute(ops[0], in[0], cat({&batch, &left, &contracted}));
  const ir::expr b = permute(ops[1], in[1], cat({&batch, &contracted, &right}));
  const auto da = dims_of(a), db = dims_of(b);
  for (std::size_t k = 0; k < batch.size() + contracted.size(); ++k) {
    const std::size_t ia = k < batch.size() ? k : k + left.size(), ib = k;
    const auto x = ir::as_int(da[ia]), y = ir::as_int(db[ib]);
    if (x && y && *x != *y) c.fail("label extents differ between the operands: " + std::to_string(*x) + " and " + std::to_string(*y));
  }
  const std::size_t nb = batch.size(), nl = left.size(), nc = contracted.size(), nr = right.size();
  const ir::expr a3 = reshape_to(c, a, {product(da, 0, nb), product(da, nb, nb + nl), product(da, nb + nl, nb + nl + nc)});
  const ir::expr b3 = reshape_to(c, b, {product(db, 0, nb), product(db, nb, nb + nc), product(db, nb + nc, nb + nc + nr)});
  std::vector<ir::prim_expr> full(da.begin(), da.begin() + std::ptrdiff_t(nb + nl));
  full.insert(full.end(), db.begin() + std::ptrdiff_t(nb + nc), db.end());
  std::vector<int> labels = cat({&batch, &left, &right});
  return one(permute(reshape_to(c, c.call("matmul", {a3, b3}), full), labels, out));
}

}  // namespace detail

inline const converter_table& converter_table::builtin() {
  static const converter_table table = [] {
    using namespace detail;
    converter_table t;
    // ---- elementwise --------------------------------------------------------------------------------
    t.add("Pow", 1, [](node_context& c) {  // the exponent may have another type; the result has the base's
      ir::expr e = c.input(1);
      if (c.input_dtype(1) != c.input_dtype(0)) e = c.call("astype", {e}, {{"dtype", c.input_dtype(0)}});
      return one(c.call("power", {c.input(0), e}));
    });
    for (auto [o, k] : {std::pair{"Add", "add"}, {"Sub", "subtract"}, {"Mul", "multiply"}, {"Div", "divide"},
                        {"Equal", "equal"}, {"Greater", "greater"}, {"Less", "less"}, {"GreaterOrEqual", "greater_equal"},
                        {"LessOrEqual", "less_equal"}, {"And", "logical_and"}, {"Or", "logical_or"}})
      binary(t, o, k);
    for (auto [o, k] : {std::pair{"Abs", "abs"}, {"Neg", "negative"}, {"Exp", "exp"}, {"Log", "log"}, {"Sqrt", "sqrt"}, {"Tanh", "tanh"},
                        {"Sigmoid", "sigmoid"}, {"Relu", "nn.relu"}, {"Erf", "erf"}, {"Not", "logical_not"}})
      unary(t, o, k);
    for (auto [o, k] : {std::pair{"Sin", "sin"}, {"Cos", "cos"}, {"Tan", "tan"}, {"Asin", "asin"}, {"Acos", "acos"}, {"Atan", "atan"},
                        {"Sinh", "sinh"}, {"Cosh", "cosh"}, {"Asinh", "asinh"}, {"Acosh", "acosh"}, {"Atanh", "atanh"}})
      t.add(o, 7, [kiln = k](node_context& c) { return one(c.call(kiln, {c.input(0)})); });
    for (auto [o, k] : {std::pair{"Floor", "floor"}, {"Ceil", "ceil"}})
      unary(t, o, k);
    t.add("Round", 11, [](node_context& c) { return one(c.call("round", {c.input(0)})); });
    t.add("IsInf", 10, [](node_context& c) {  // comparisons with the infinities; NaN is neither
      const dtype dt = c.input_dtype(0);
      const double inf = std::numeric_limits<double>::infinity();
      const bool positive = c.attr_int("detect_positive", 1) != 0, negative = c.attr_int("detect_negative", 1) != 0;
      if (positive && negative) return one(c.call("equal", {c.call("abs", {c.input(0)}), c.scalar(inf, dt)}));
      if (positive) return one(c.call("equal", {c.input(0), c.scalar(inf, dt)}));
      if (negative) return one(c.call("equal", {c.input(0), c.scalar(-inf, dt)}));
      // Neither: false everywhere (x == x and x != x), in the input's shape.
      return one(c.call("logical_and", {c.call("equal", {c.input(0), c.input(0)}), c.call("not_equal", {c.input(0), c.input(0)})}));
    });
    t.add("Mod", 10, [](node_context& c) {
      const bool fmod = c.attr_int("fmod", 0) != 0;
      if (is_float(c.input_dtype(0)) && !fmod) c.fail("fmod must be 1 for floating-point inputs");
      // fmod 1: C's fmod / %, the dividend's sign. fmod 0 (integers): Python's %, the divisor's
      // sign, as x - floor(x / y) * y, exact. Division by zero is the kernels' error.
      if (fmod) return one(c.call("fmod", {c.input(0), c.input(1)}));
      const ir::expr q = c.call("floor_divide", {c.input(0), c.input(1)});
      return one(c.call("subtract", {c.input(0), c.call("multiply", {q, c.input(1)})}));
    });
    t.add("Xor", 7, [](node_context& c) { return one(c.call("not_equal", {c.input(0), c.input(1)})); });
    t.add("IsNaN", 9, [](node_context& c) { return one(c.call("not_equal", {c.input(0), c.input(0)})); });
    t.add("CastLike", 15, [](node_context& c) {
      const dtype to = c.input_dtype(1);
      if (c.input_dtype(0) == to) return one(c.input(0));
      return one(c.call("astype", {c.input(0)}, {{"dtype", to}}));
    });
    // Activations composed of kiln's operators.
    t.add("Elu", 1, [](node_context& c) {
      const dtype dt = c.input_dtype(0);
      ir::expr neg = c.call("multiply", {c.call("subtract", {c.call("exp", {c.input(0)}), c.scalar(1, dt)}), c.scalar(c.attr_float("alpha", 1.0), dt)});
      return one(c.call("where", {c.call("greater", {c.input(0), c.scalar(0, dt)}), c.input(0), neg}));
    });
    t.add("Celu", 12, [](node_context& c) {  // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
      const dtype dt = c.input_dtype(0);
      const double alpha = c.attr_float("alpha", 1.0);
      ir::expr e = c.call("multiply", {c.call("subtract", {c.call("exp", {c.call("divide", {c.input(0), c.scalar(alpha, dt)})}), c.scalar(1, dt)}),
                                       c.scalar(alpha, dt)});
      return one(c.call("add", {c.call("maximum", {c.input(0), c.scalar(0, dt)}), c.call("minimum", {e, c.scalar(0, dt)})}));
    });
    t.add("Selu", 1, [](node_context& c) {
      const dtype dt = c.input_dtype(0);
      const double alpha = c.attr_float("alpha", 1.67326319217681884765625), gamma = c.attr_float("gamma", 1.05070102214813232421875);
      ir::expr neg = c.call("multiply", {c.call("subtract", {c.call("exp", {c.input(0)}), c.scalar(1, dt)}), c.scalar(alpha, dt)});
      ir::expr y = c.call("where", {c.call("greater", {c.input(0), c.scalar(0, dt)}), c.input(0), neg});
      return one(c.call("multiply", {y, c.scalar(gamma, dt)}));
    });
    t.add("HardSigmoid", 1, [](node_context& c) {
      const dtype dt = c.input_dtype(0);
      ir::expr y = c.call("add", {c.call("multiply", {c.input(0), c.scalar(c.attr_float("alpha", 0.2), dt)}), c.scalar(c.attr_float("beta", 0.5), dt)});
      return one(c.call("clip", {y}, {{"min", 0.0}, {"max", 1.0}}));
    });
    t.add("HardSwish", 14, [](node_context& c) {
      const dtype dt = c.input_dtype(0);
      ir::expr h = c.call("add", {c.call("multiply", {c.input(0), c.scalar(1.0 / 6.0, dt)}), c.scalar(0.5, dt)});
      return one(c.call("multiply", {c.input(0), c.call("clip", {h}, {{"min", 0.0}, {"max", 1.0}})}));
    });
    t.add("Softplus", 1, [](node_context& c) {
      return one(c.call("log", {c.call("add", {c.call("exp", {c.input(0)}), c.scalar(1, c.input_dtype(0))})}));
    });
    t.add("Softsign", 1, [](node_context& c) {
      return one(c.call("divide", {c.input(0), c.call("add", {c.call("abs", {c.input(0)}), c.scalar(1, c.input_dtype(0))})}));
    });
    t.add("ThresholdedRelu", 10, [](node_context& c) {
      const dtype dt = c.input_dtype(0);
      ir::expr keep = c.call("greater", {c.input(0), c.scalar(c.attr_float("alpha", 1.0), dt)});
      return one(c.call("where", {keep, c.input(0), c.scalar(0, dt)}));
    });
    t.add("PRelu", 1, [](node_context& c) {
      const dtype dt = c.input_dtype(0);
      ir::expr slope = c.input(1);
      // Before opset 7 the slope is one value, or one per channel (axis 1): [C] becomes
      // [C, 1, ..., 1]. From opset 7 it broadcasts to the input as numpy's rule says.
      if (c.opset() < 7 && c.rank(1) == 1 && c.rank(0) >= 3) {
        std::vector<ir::prim_expr> dims = c.shape(1);
        dims.resize(std::size_t(c.rank(0) - 1), ir::make_int(1));
        slope = reshape_to(c, slope, std::move(dims));
      }
      ir::expr neg = c.call("multiply", {c.input(0), slope});
      return one(c.call("where", {c.call("greater", {c.input(0), c.scalar(0, dt)}), c.input(0), neg}));
    });
    t.add("Sign", 9, [](node_context& c) {
      const dtype dt = c.input_dtype(0);
      ir::expr pos = c.call("astype", {c.call("greater", {c.input(0), c.scalar(0, dt)})}, {{"dtype", dt}});
      ir::expr neg = c.call("astype", {c.call("less", {c.input(0), c.scalar(0, dt)})}, {{"dtype", dt}});
      return one(c.call("subtract", {pos, neg}));
    });
    variadic(t, "Max", "maximum");
    variadic(t, "Min", "minimum");
    variadic(t, "Sum", "add");
    variadic(t, "Mean", "add", true);
    t.add("Reciprocal", 1, [](node_context& c) { return one(c.call("divide", {c.scalar(1.0, c.input_dtype(0)), c.input(0)})); });
    t.add("Identity", 1, [](node_context& c) { return one(c.input(0)); });
    t.add("Dropout", 1, [](node_context& c) {  // inference: the identity, and a mask that keeps everything
      // training mode drops at random, unless the ratio is 0
      if (c.has_input(2) && c.constant_ints(2, "training_mode").at(0) != 0 &&
          (c.has_input(1) ? c.constant_floats(1, "ratio").at(0) : 0.5) != 0)
        c.fail("training mode with a nonzero ratio (random dropout) is not supported; inference ignores dropout");
      exprs outs = one(c.input(0));
      if (c.node().output_size() > 1 && !c.node().output(1).empty()) {
        const dtype mask = c.opset() >= 10 ? dtype::bool_ : c.input_dtype(0);  // bool from opset 10, the input's type before
        outs.push_back(c.call("broadcast_to", {c.scalar(1, mask), ir::make_shape_expr(c.shape(0))}));
      }
      return outs;
    });
    t.add("LRN", 1, [](node_context& c) {
      // x / (bias + alpha / size * sum of x^2 over the channels [c - (size-1)/2, c + ceil((size-1)/2)])^beta:
      // the sum is an average pool over the channel axis of [N, 1, C, rest], padding counted
      const int r = c.rank(0);
      if (r < 3) c.fail("the input must be (N, C, D1, ...), got rank " + std::to_string(r));
      const std::int64_t size = c.attr_int("size");
      if (size < 1) c.fail("size must be positive, got " + std::to_string(size));
      const dtype dt = c.input_dtype(0);
      const auto d = c.shape(0);
      const ir::expr sq = reshape_to(c, c.call("multiply", {c.input(0), c.input(0)}), {d[0], ir::make_int(1), d[1], product(d, 2, d.size())});
      const ir::expr avg = c.call("nn.avg_pool2d", {sq},
                                  {{"pool_size", ir::int_array{size, 1}},
                                   {"padding", ir::int_array{(size - 1) / 2, 0, size / 2, 0}},
                                   {"count_include_pad", true}});
      const ir::expr base = c.call("add", {c.scalar(c.attr_float("bias", 1.0), dt), c.call("multiply", {avg, c.scalar(c.attr_float("alpha", 1e-4), dt)})});
      const ir::expr scale = c.call("power", {base, c.scalar(-c.attr_float("beta", 0.75), dt)});
      return one(c.call("multiply", {c.input(0), reshape_to(c, scale, d)}));
    });
    t.add("InstanceNormalization", 6, [](node_context& c) {  // per image and channel over the spatial axes, then scale and bias
      const int r = c.rank(0);
      if (r < 3) c.fail("the input must be (N, C, D1, ...), got rank " + std::to_string(r));
      const dtype dt = c.input_dtype(0);
      const double eps = c.attr_float("epsilon", 1e-5);
      ir::int_array spatial;
      for (int a = 2; a < r; ++a) spatial.push_back(a);
      const moments m = moments_over(c, c.input(0), spatial);
      const ir::expr normed = c.call("multiply", {m.dev, c.call("rsqrt", {c.call("add", {m.var, c.scalar(eps, dt)})})});
      std::vector<ir::prim_expr> per_channel(std::size_t(r - 1), ir::make_int(1));
      per_channel[0] = c.shape(0)[1];
      return one(c.call("add", {c.call("multiply", {normed, reshape_to(c, c.input(1), per_channel)}), reshape_to(c, c.input(2), per_channel)}));
    });
    t.add("ReverseSequence", 10, [](node_context& c) {
      const int r = c.rank(0);
      if (r < 2) c.fail("the input must have rank 2 or more");
      const std::int64_t batch_axis = c.axis(c.attr_int("batch_axis", 1), r, "batch_axis"), time_axis = c.axis(c.attr_int("time_axis", 0), r, "time_axis");
      if (batch_axis == time_axis) c.fail("batch_axis and time_axis must differ");
      const ir::expr lens = c.input_dtype(1) == dtype::int64 ? c.input(1) : c.call("astype", {c.input(1)}, {{"dtype", dtype::int64}});
      return one(reverse_sequences(c, c.input(0), lens, std::size_t(time_axis), std::size_t(batch_axis)));
    });
    // Recurrent layers, unrolled (recurrent.hpp). Opset 14 added `layout`.
    t.add("RNN", 7, [](node_context& c) { return recurrent(c, recurrent_cell::rnn); });
    t.add("GRU", 7, [](node_context& c) { return recurrent(c, recurrent_cell::gru); });
    t.add("LSTM", 7, [](node_context& c) { return recurrent(c, recurrent_cell::lstm); });
    t.add("Where", 9, [](node_context& c) { return one(c.call("where", {c.input(0), c.input(1), c.input(2)})); });
    t.add("Cast", 1, [](node_context& c) {
      const dtype to = require_dtype(int(c.attr_int("to")), "the target type of Cast");
      if (c.input_dtype(0) == to) return one(c.input(0));
      return one(c.call("astype", {c.input(0)}, {{"dtype", to}}));
    });
    t.add("LeakyRelu", 1, [](node_context& c) {
      const dtype dt = c.input_dtype(0);
      ir::expr pos = c.call("greater", {c.input(0), c.scalar(0, dt)});
      ir::expr neg = c.call("multiply", {c.input(0), c.scalar(c.attr_float("alpha", 0.01), dt)});
      return one(c.call("where", {pos, c.input(0), neg}));
    });
    t.add("Clip", 1, [](node_context& c) {
      return clip(c, c.attr_float("min", -std::numeric_limits<double>::infinity()), c.attr_float("max", std::numeric_limits<double>::infinity()));
    });
    t.add("Clip", 11, [](node_context& c) {
      const bool known = (!c.has_input(1) || c.constant(1)) && (!c.has_input(2) || c.constant(2));
      if (known && is_float(c.input_dtype(0))) {
        const double lo = c.has_input(1) ? c.constant_floats(1, "min").at(0) : -std::numeric_limits<double>::infinity();
        const double hi = c.has_input(2) ? c.constant_floats(2, "max").at(0) : std::numeric_limits<double>::infinity();
        return clip(c, lo, hi);
      }
      // Bounds known only at run time (or integer data): max(x, min), then min(., max).
      ir::expr y = c.input(0);
      if (c.has_input(1)) y = c.call("maximum", {y, c.input(1)});
      if (c.has_input(2)) y = c.call("minimum", {y, c.input(2)});
      return one(y);
    });

    // ---- linear algebra -----------------------------------------------------------------------------
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

    // ---- neural network -----------------------------------------------------------------------------
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

    // ---- reductions ---------------------------------------------------------------------------------
    for (auto [o, k] : {std::pair{"ReduceMean", "mean"}, {"ReduceMax", "max"}, {"ReduceMin", "min"}, {"ReduceProd", "prod"}}) {
      const char* kiln = k;
      t.add(o, 1, [kiln](node_context& c) { return reduce(c, kiln, false); });
      t.add(o, 18, [kiln](node_context& c) { return reduce(c, kiln, true); });
    }
    // The composed reductions: an elementwise step, a sum, another elementwise step.
    struct composed {
      const char* name;
      const char* before;  // applied to x first ("" for none; "square" multiplies x by itself)
      const char* after;   // applied to the sum
    };
    for (auto r : {composed{"ReduceSumSquare", "square", ""}, composed{"ReduceL1", "abs", ""}, composed{"ReduceL2", "square", "sqrt"},
                   composed{"ReduceLogSum", "", "log"}, composed{"ReduceLogSumExp", "exp", "log"}}) {
      auto fn = [r](bool axes_as_input) {
        return [r, axes_as_input](node_context& c) {
          ir::expr x = c.input(0);
          if (std::string_view(r.before) == "square") x = c.call("multiply", {x, x});
          else if (*r.before) x = c.call(r.before, {x});
          std::vector<ir::expr> ins{x};
          for (std::size_t i = 1; i < c.num_inputs(); ++i) ins.push_back(c.has_input(i) ? c.input(i) : ir::expr());
          node_context inner = c.with_inputs(ins);
          ir::expr y = reduce(inner, "sum", axes_as_input)[0];
          if (*r.after) y = c.call(r.after, {y});
          return one(y);
        };
      };
      t.add(r.name, 1, fn(false));
      t.add(r.name, 18, fn(true));
    }
    t.add("ReduceSum", 1, [](node_context& c) { return reduce(c, "sum", false); });
    t.add("ReduceSum", 13, [](node_context& c) { return reduce(c, "sum", true); });
    for (auto [o, k] : {std::pair{"ArgMax", "argmax"}, {"ArgMin", "argmin"}}) {
      const char* kiln = k;
      t.add(o, 1, [kiln](node_context& c) {
        const std::int64_t axis = c.axis(c.attr_int("axis", 0), c.rank(0));
        const ir::attr_map attrs{{"axis", axis}, {"keepdims", c.attr_int("keepdims", 1) != 0}};
        if (c.attr_int("select_last_index", 0) == 0) return one(c.call(kiln, {c.input(0)}, attrs));
        // The last extreme is the first one along the reversed axis: (n - 1) - argmax(reverse(x)).
        const auto n = ir::as_int(c.shape(0)[std::size_t(axis)]);
        if (!n) c.fail("select_last_index 1 needs a static length along the axis");
        const ir::expr reversed = c.call("strided_slice", {c.input(0)},
                                         {{"axes", ir::int_array{axis}},
                                          {"begin", ir::int_array{-1}},
                                          {"end", ir::int_array{std::numeric_limits<std::int64_t>::min()}},
                                          {"strides", ir::int_array{-1}}});
        return one(c.call("subtract", {c.scalar(double(*n - 1), dtype::int64), c.call(kiln, {reversed}, attrs)}));
      });
    }

    // ---- shapes and data movement -------------------------------------------------------------------
    t.add("Reshape", 5, [](node_context& c) {
      const auto target = c.known_ints(1, "shape");  // symbolic entries too (shape_values.hpp)
      const auto in = c.shape(0);
      const bool allowzero = c.attr_int("allowzero", 0) != 0;
      std::vector<ir::prim_expr> dims;
      for (std::size_t i = 0; i < target.size(); ++i) {
        const auto k = ir::as_int(target[i]);
        if (k == 0 && !allowzero) {
          if (i >= in.size()) c.fail("shape entry " + std::to_string(i) + " is 0 (copy), but the input has rank " + std::to_string(in.size()));
          dims.push_back(in[i]);
        } else {
          if (k && *k < -1) c.fail("shape entry " + std::to_string(i) + " is " + std::to_string(*k));
          dims.push_back(target[i]);
        }
      }
      return one(reshape_to(c, c.input(0), dims));
    });
    t.add("Flatten", 1, [](node_context& c) {
      const auto d = c.shape(0);
      const auto r = std::int64_t(d.size());
      std::int64_t a = c.attr_int("axis", 1);
      if (a < -r || a > r) c.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
      const auto axis = std::size_t(a < 0 ? a + r : a);
      return one(reshape_to(c, c.input(0), {product(d, 0, axis), product(d, axis, d.size())}));
    });
    t.add("Transpose", 1, [](node_context& c) {
      ir::attr_map attrs;
      if (auto perm = c.attr_ints("perm")) attrs.set("axes", ir::int_array(*perm));
      return one(c.call("permute_dims", {c.input(0)}, attrs));
    });
    t.add("Squeeze", 1, [](node_context& c) { return squeeze(c, c.attr_ints("axes")); });
    t.add("Squeeze", 13, [](node_context& c) {
      return squeeze(c, c.has_input(1) ? std::optional(c.constant_ints(1, "axes")) : std::nullopt);
    });
    t.add("Unsqueeze", 1, [](node_context& c) {
      auto axes = c.attr_ints("axes");
      if (!axes) c.fail("attribute 'axes' is required");
      return unsqueeze(c, *axes);
    });
    t.add("Unsqueeze", 13, [](node_context& c) { return unsqueeze(c, c.constant_ints(1, "axes")); });
    t.add("Concat", 1, [](node_context& c) {
      std::vector<ir::expr> xs;
      for (std::size_t i = 0; i < c.num_inputs(); ++i) xs.push_back(c.input(i));
      const std::int64_t axis = c.axis(c.attr_int("axis"), c.rank(0));
      if (xs.size() == 1) return one(xs[0]);
      return one(c.call("concat", {ir::make_tuple(xs)}, {{"axis", axis}}));
    });
    t.add("Split", 1, [](node_context& c) {
      exprs outs;
      std::vector<std::int64_t> sizes = c.attr_ints("split").value_or(std::vector<std::int64_t>{});
      if (c.has_input(1)) sizes = c.constant_ints(1, "split");
      split_outputs(c, c.input(0), c.axis(c.attr_int("axis", 0), c.rank(0)), sizes, outs);
      return outs;
    });
    t.add("Split", 13, [](node_context& c) {
      exprs outs;
      std::vector<std::int64_t> sizes;
      if (c.has_input(1)) sizes = c.constant_ints(1, "split");
      split_outputs(c, c.input(0), c.axis(c.attr_int("axis", 0), c.rank(0)), sizes, outs);
      return outs;
    });
    t.add("Slice", 1, [](node_context& c) {
      auto starts = c.attr_ints("starts"), ends = c.attr_ints("ends");
      if (!starts || !ends) c.fail("attributes 'starts' and 'ends' are required");
      return slice(c, *starts, *ends, c.attr_ints("axes"), std::nullopt);
    });
    t.add("Slice", 10, [](node_context& c) {
      if (is_shape_value(c.input(1)) || is_shape_value(c.input(2))) return slice_to_symbolic_bounds(c);
      return slice(c, c.constant_ints(1, "starts"), c.constant_ints(2, "ends"),
                   c.has_input(3) ? std::optional(c.constant_ints(3, "axes")) : std::nullopt,
                   c.has_input(4) ? std::optional(c.constant_ints(4, "steps")) : std::nullopt);
    });
    t.add("Gather", 1, [](node_context& c) {
      const int r = c.rank(0);
      const std::int64_t axis = c.axis(c.attr_int("axis", 0), r);
      ir::expr idx = c.input(1);
      // Negative indices count from the end: made positive now when the indices are constants.
      if (const ir::ndarray* k = c.constant(1)) {
        const auto dim = ir::as_int(c.shape(0)[std::size_t(axis)]);
        bool negative = false;
        for (std::size_t i = 0; i < k->numel(); ++i) negative |= k->element_int(i) < 0;
        if (negative) {
          if (!dim) c.fail("negative indices into a symbolic dimension are not supported");
          std::vector<std::int64_t> fixed(k->numel());
          for (std::size_t i = 0; i < fixed.size(); ++i) fixed[i] = k->element_int(i) < 0 ? k->element_int(i) + *dim : k->element_int(i);
          std::vector<std::byte> bytes(fixed.size() * 8);
          if (!fixed.empty()) std::memcpy(bytes.data(), fixed.data(), bytes.size());
          idx = c.constant(ir::ndarray(dtype::int64, k->shape(), std::move(bytes)));
        }
      }
      return one(c.call("take", {c.input(0), idx}, {{"axis", axis}}));
    });
    t.add("GatherElements", 11, [](node_context& c) {
      return one(c.call("gather_elements", {c.input(0), c.input(1)}, {{"axis", c.axis(c.attr_int("axis", 0), c.rank(0))}}));
    });
    for (const char* scatter : {"ScatterElements", "Scatter"})  // Scatter is ScatterElements' old name (opsets 9 and 10)
      t.add(scatter, 9, [](node_context& c) {
        const std::string reduction = c.attr_string("reduction", "none");
        if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
          c.fail("reduction must be 'none', 'add', 'mul', 'max' or 'min', not '" + reduction + "'");
        return one(c.call("scatter_elements", {c.input(0), c.input(1), c.input(2)},
                          {{"axis", c.axis(c.attr_int("axis", 0), c.rank(0))}, {"reduction", reduction == "none" ? std::string("update") : reduction}}));
      });
    const auto topk = [](node_context& c, std::int64_t k) {
      const ir::expr both = c.call("topk", {c.input(0)},
                                   {{"k", k},
                                    {"axis", c.axis(c.attr_int("axis", -1), c.rank(0))},
                                    {"largest", c.attr_int("largest", 1) != 0},
                                    {"sorted", c.attr_int("sorted", 1) != 0}});
      return exprs{c.fold_or_emit(ir::make_tuple_get_item(both, 0)), c.fold_or_emit(ir::make_tuple_get_item(both, 1))};
    };
    t.add("TopK", 1, [=](node_context& c) { return topk(c, c.attr_int("k")); });
    t.add("TopK", 10, [=](node_context& c) {
      const auto k = c.constant_ints(1, "K");
      if (k.size() != 1) c.fail("K must hold one integer, got " + std::to_string(k.size()));
      return topk(c, k[0]);
    });
    t.add("Einsum", 12, einsum);
    t.add("GatherND", 11, [](node_context& c) {
      return one(c.call("gather_nd", {c.input(0), c.input(1)}, {{"batch_dims", c.attr_int("batch_dims", 0)}}));
    });
    t.add("ScatterND", 11, [](node_context& c) {
      const std::string reduction = c.attr_string("reduction", "none");
      if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
        c.fail("reduction must be 'none', 'add', 'mul', 'max' or 'min', not '" + reduction + "'");
      return one(c.call("scatter_nd", {c.input(0), c.input(1), c.input(2)}, {{"reduction", reduction == "none" ? std::string("update") : reduction}}));
    });
    t.add("CumSum", 11, [](node_context& c) {
      const auto axis = c.constant_ints(1, "axis");
      if (axis.size() != 1) c.fail("axis must be one integer, got " + std::to_string(axis.size()));
      return one(c.call("cumsum", {c.input(0)},
                        {{"axis", c.axis(axis[0], c.rank(0))}, {"exclusive", c.attr_int("exclusive", 0) != 0}, {"reverse", c.attr_int("reverse", 0) != 0}}));
    });
    t.add("Expand", 8, [](node_context& c) {
      auto out = broadcast_shapes(c, c.shape(0), c.known_ints(1, "shape"));
      return one(c.call("broadcast_to", {c.input(0), ir::make_shape_expr(out)}));
    });
    t.add("Trilu", 14, [](node_context& c) {  // where(mask, x, 0), the mask a constant over the last two axes
      const auto d = c.shape(0);
      if (d.size() < 2) c.fail("the input must have rank 2 or more, not " + std::to_string(d.size()));
      const auto rows = ir::as_int(d[d.size() - 2]), cols = ir::as_int(d[d.size() - 1]);
      if (!rows || !cols) c.fail("the last two dimensions must be static");
      std::int64_t k = 0;
      if (c.has_input(1)) {
        const auto kv = c.constant_ints(1, "k");
        if (kv.size() != 1) c.fail("k must be one integer, got " + std::to_string(kv.size()));
        k = kv[0];
      }
      const bool upper = c.attr_int("upper", 1) != 0;
      std::vector<std::byte> mask(std::size_t(*rows * *cols));
      for (std::int64_t i = 0; i < *rows; ++i)
        for (std::int64_t j = 0; j < *cols; ++j) {
          // Written so that no k, however large, overflows: j - i is within the dimensions.
          const std::int64_t diagonal = j - i;
          mask[std::size_t(i * *cols + j)] = std::byte(upper ? diagonal >= k : diagonal <= k);
        }
      const ir::expr m = c.constant(ir::ndarray(dtype::bool_, {*rows, *cols}, std::move(mask)));
      return one(c.call("where", {m, c.input(0), c.scalar(0, c.input_dtype(0))}));
    });
    t.add("OneHot", 9, [](node_context& c) {  // where(indices == [0, depth) along the new axis, on, off)
      const auto depth_values = c.constant_floats(1, "depth");
      if (depth_values.size() != 1) c.fail("depth must be one number, got " + std::to_string(depth_values.size()));
      const auto depth = static_cast<std::int64_t>(depth_values[0]);
      if (depth < 1) c.fail("depth must be at least 1, got " + std::to_string(depth));
      const int r = c.rank(0) + 1;
      const std::int64_t axis = c.axis(c.attr_int("axis", -1), r);
      // Indices of any numeric type, negative ones counted from the end.
      ir::expr idx = c.input_dtype(0) == dtype::int64 ? c.input(0) : c.call("astype", {c.input(0)}, {{"dtype", dtype::int64}});
      const ir::expr depth_e = c.constant(ir::ndarray::scalar(dtype::int64, double(depth)));
      idx = c.call("where", {c.call("less", {idx, c.constant(ir::ndarray::scalar(dtype::int64, 0))}), c.call("add", {idx, depth_e}), idx});
      auto d = c.shape(0);
      d.insert(d.begin() + axis, ir::make_int(1));
      const ir::expr hot = c.call("equal", {reshape_to(c, idx, d), iota_along(c, depth, std::size_t(r), std::size_t(axis))});
      if (c.rank(2) != 1 || ir::as_int(c.shape(2)[0]) != 2) c.fail("values must hold two elements, [off, on]");
      auto element = [&](std::int64_t i) {  // values[i] as a [1] tensor, which broadcasts
        return c.call("strided_slice", {c.input(2)},
                      {{"axes", ir::int_array{0}}, {"begin", ir::int_array{i}}, {"end", ir::int_array{i + 1}}, {"strides", ir::int_array{1}}});
      };
      return one(c.call("where", {hot, element(1), element(0)}));
    });
    for (const bool to_space : {true, false}) {
      t.add(to_space ? "DepthToSpace" : "SpaceToDepth", 1, [to_space](node_context& c) {
        const auto d = static_shape(c, 0, to_space ? "DepthToSpace" : "SpaceToDepth");
        if (d.size() != 4) c.fail("the input must be (N, C, H, W)");
        const std::int64_t b = c.attr_int("blocksize");
        if (b < 1) c.fail("blocksize must be at least 1, got " + std::to_string(b));
        const std::int64_t n = d[0], ch = d[1], h = d[2], w = d[3];
        if (!to_space) {
          if (h % b || w % b) c.fail("the height and width must be multiples of the block size " + std::to_string(b));
          return one(rearrange(c, {n, ch, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {n, ch * b * b, h / b, w / b}));
        }
        if (ch % (b * b)) c.fail("the channels must be a multiple of blocksize^2 = " + std::to_string(b * b));
        const std::string mode = c.attr_string("mode", "DCR");
        if (mode == "DCR") return one(rearrange(c, {n, b, b, ch / (b * b), h, w}, {0, 3, 4, 1, 5, 2}, {n, ch / (b * b), h * b, w * b}));
        if (mode == "CRD") return one(rearrange(c, {n, ch / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3}, {n, ch / (b * b), h * b, w * b}));
        c.fail("mode must be 'DCR' or 'CRD', not '" + mode + "'");
      });
    }
    t.add("EyeLike", 9, [](node_context& c) {  // a constant: ones where column - row = k
      const auto d = static_shape(c, 0, "EyeLike");
      if (d.size() != 2) c.fail("the input must be a matrix, got rank " + std::to_string(d.size()));
      const dtype dt = c.has_attr("dtype") ? require_dtype(int(c.attr_int("dtype")), "the dtype of EyeLike") : c.input_dtype(0);
      const std::int64_t k = c.attr_int("k", 0);
      if (std::size_t(d[0] * d[1]) * size_of(dt) > max_folded_bytes) c.fail("the constant would be too large to make at import");
      std::vector<double> v(std::size_t(d[0] * d[1]), 0.0);
      for (std::int64_t i = 0; i < d[0]; ++i)
        for (std::int64_t j = 0; j < d[1]; ++j) v[std::size_t(i * d[1] + j)] = j - i == k ? 1.0 : 0.0;
      return one(c.constant(ir::ndarray::from<double>(dt, d, std::span<const double>(v))));
    });
    t.add("Range", 11, [](node_context& c) {  // a constant: start, limit and delta must be known at import
      if (is_shape_value(c.input(0)) || is_shape_value(c.input(1))) {  // torch.arange(seq): made at run time
        const auto start = c.known_ints(0, "start"), limit = c.known_ints(1, "limit");
        const auto delta = c.constant_ints(2, "delta");
        if (start.size() != 1 || limit.size() != 1 || delta.size() != 1) c.fail("start, limit and delta must be scalars");
        if (delta[0] <= 0) c.fail("with a limit computed from symbolic dimensions, delta must be positive, is " + std::to_string(delta[0]));
        const ir::prim_expr span = limit[0] - start[0];
        const ir::prim_expr n = delta[0] == 1 ? span : ir::floordiv(span + (delta[0] - 1), ir::make_int(delta[0]));
        ir::expr r = symbolic_range(c, start[0], n, delta[0]);
        const dtype dt = c.input_dtype(2);  // delta is a constant tensor, of the type all three share
        return one(dt == dtype::int64 ? r : c.call("astype", {r}, {{"dtype", dt}}));
      }
      const dtype dt = c.input_dtype(0);
      const auto start = c.constant_floats(0, "start"), limit = c.constant_floats(1, "limit"), delta = c.constant_floats(2, "delta");
      if (start.size() != 1 || limit.size() != 1 || delta.size() != 1) c.fail("start, limit and delta must be scalars");
      if (delta[0] == 0) c.fail("delta must not be 0");
      const double count = std::ceil((limit[0] - start[0]) / delta[0]);
      const std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
      if (std::size_t(n) * size_of(dt) > max_folded_bytes) c.fail("the range would be too large to make at import");
      std::vector<double> v(static_cast<std::size_t>(n), 0.0);
      for (std::int64_t i = 0; i < n; ++i) v[std::size_t(i)] = start[0] + double(i) * delta[0];
      return one(c.constant(ir::ndarray::from<double>(dt, {n}, std::span<const double>(v))));
    });
    // Window functions (opset 17): a constant of `size` values, a sum of cosines over n / N, with
    // N = size (periodic, the default) or size - 1 (symmetric); ONNX's coefficients.
    const auto window = [](std::vector<double> a) {
      return [a](node_context& c) {
        const auto size = c.constant_ints(0, "size");
        if (size.size() != 1) c.fail("size must be one integer");
        if (size[0] < 0) c.fail("size must not be negative, is " + std::to_string(size[0]));
        if (std::size_t(size[0]) * 8 > max_folded_bytes) c.fail("the window would be too large to make at import");
        const dtype dt = require_dtype(int(c.attr_int("output_datatype", ::onnx::TensorProto::FLOAT)), "output_datatype");
        const double n_max = c.attr_int("periodic", 1) != 0 ? double(size[0]) : double(size[0] - 1);
        const double pi = 3.14159265358979323846;
        std::vector<double> v(static_cast<std::size_t>(size[0]), 0.0);
        for (std::size_t n = 0; n < v.size(); ++n)
          for (std::size_t k = 0; k < a.size(); ++k)
            v[n] += (k % 2 ? -a[k] : a[k]) * std::cos(n_max > 0 ? 2 * pi * double(k) * double(n) / n_max : 0.0);  // size 1 symmetric: n = 0
        return one(c.constant(ir::ndarray::from<double>(dt, {size[0]}, std::span<const double>(v))));
      };
    };
    t.add("HannWindow", 17, window({0.5, 0.5}));
    t.add("HammingWindow", 17, window({25.0 / 46.0, 21.0 / 46.0}));
    t.add("BlackmanWindow", 17, window({0.42, 0.5, 0.08}));
    t.add("MeanVarianceNormalization", 9, [](node_context& c) {  // (x - mean) / (std + 1e-9) over `axes`, as ONNX's function body
      const int r = c.rank(0);
      ir::int_array axes;
      for (auto a : c.attr_ints("axes").value_or(std::vector<std::int64_t>{0, 2, 3})) axes.push_back(c.axis(a, r));
      const dtype dt = c.input_dtype(0);
      const moments m = moments_over(c, c.input(0), axes);
      return one(c.call("divide", {m.dev, c.call("add", {c.call("sqrt", {m.var}), c.scalar(1e-9, dt)})}));
    });
    t.add("Shrink", 9, [](node_context& c) {  // x + bias below -lambd, x - bias above lambd, 0 between
      const dtype dt = c.input_dtype(0);
      const double bias = c.attr_float("bias", 0.0), lambd = c.attr_float("lambd", 0.5);
      const ir::expr x = c.input(0);
      const ir::expr above = c.call("where", {c.call("greater", {x, c.scalar(lambd, dt)}), c.call("subtract", {x, c.scalar(bias, dt)}), c.scalar(0, dt)});
      return one(c.call("where", {c.call("less", {x, c.scalar(-lambd, dt)}), c.call("add", {x, c.scalar(bias, dt)}), above}));
    });
    t.add("Tile", 6, [](node_context& c) {  // x reshaped to (1, d0, 1, d1, ...), broadcast to (r0, d0, r1, d1, ...), merged
      const auto reps = c.known_ints(1, "repeats");
      const auto d = c.shape(0);
      if (reps.size() != d.size()) c.fail("repeats has " + std::to_string(reps.size()) + " entries for rank " + std::to_string(d.size()));
      std::vector<ir::prim_expr> split, wide, out;
      for (std::size_t i = 0; i < d.size(); ++i) {
        if (auto r = ir::as_int(reps[i]); r && *r < 0) c.fail("a repeat is negative");
        split.push_back(ir::make_int(1));
        split.push_back(d[i]);
        wide.push_back(reps[i]);
        wide.push_back(d[i]);
        out.push_back(reps[i] * d[i]);
      }
      ir::expr y = c.call("broadcast_to", {reshape_to(c, c.input(0), split), ir::make_shape_expr(wide)});
      return one(reshape_to(c, y, out));
    });
    t.add("Shape", 1, [](node_context& c) {
      const auto d = c.shape(0);
      const auto r = std::int64_t(d.size());
      std::int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
      if (start < 0) start += r;
      if (end < 0) end += r;
      start = std::clamp<std::int64_t>(start, 0, r);
      end = std::clamp<std::int64_t>(end, 0, r);
      // A constant, or with symbolic dimensions a shape value (shape_values.hpp).
      return one(make_int_values({std::vector<ir::prim_expr>(d.begin() + std::ptrdiff_t(start), d.begin() + std::ptrdiff_t(std::max(start, end))), false}));
    });
    t.add("Size", 1, [](node_context& c) {
      const auto d = c.shape(0);
      return one(make_int_values({{product(d, 0, d.size())}, true}));
    });
    t.add("Constant", 1, [](node_context& c) {
      if (auto* v = c.attr_tensor("value")) return one(c.constant(to_ndarray(*v, "the value of node '" + c.node().name() + "'")));
      if (c.has_attr("value_float")) return one(c.scalar(c.attr_float("value_float", 0), dtype::float32));
      if (c.has_attr("value_int")) return one(c.constant(ir::ndarray::scalar(dtype::int64, double(c.attr_int("value_int")))));
      if (auto v = c.attr_ints("value_ints")) return one(c.ints(*v));
      if (auto v = c.attr_floats("value_floats")) {
        const std::int64_t n = std::int64_t(v->size());
        return one(c.constant(ir::ndarray::from<float>(dtype::float32, {n}, std::span<const float>(*v))));
      }
      c.fail("a Constant without a supported value attribute (sparse and string values are not supported)");
    });
    t.add("ConstantOfShape", 9, [](node_context& c) {
      ir::ndarray fill = ir::ndarray::scalar(dtype::float32, 0.0);
      if (auto* v = c.attr_tensor("value")) fill = to_ndarray(*v, "the value of node '" + c.node().name() + "'");
      if (fill.numel() != 1) c.fail("the value must hold one element");
      if (!c.constant(0)) {  // a shape value with symbolic entries: the fill broadcast at run time
        const auto dims = c.known_ints(0, "shape");
        for (const auto& d : dims)
          if (auto k = ir::as_int(d); k && *k < 0) c.fail("negative dimension " + std::to_string(*k));
        return one(c.call("broadcast_to", {c.constant(ir::ndarray(fill.dt(), {}, std::vector<std::byte>(fill.bytes().begin(), fill.bytes().end()))),
                                           ir::make_shape_expr(dims)}));
      }
      std::vector<std::int64_t> shape = c.constant_ints(0, "shape");
      std::size_t n = 1;
      for (auto d : shape) {
        if (d < 0) c.fail("negative dimension " + std::to_string(d));
        n *= std::size_t(d);
      }
      if (n * size_of(fill.dt()) > max_folded_bytes) c.fail("the constant would be too large to make at import");
      std::vector<std::byte> bytes(n * size_of(fill.dt()));
      for (std::size_t i = 0; i < n; ++i) std::memcpy(bytes.data() + i * size_of(fill.dt()), fill.bytes().data(), size_of(fill.dt()));
      return one(c.constant(ir::ndarray(fill.dt(), shape, std::move(bytes))));
    });
    // Upsample (deprecated in opset 10) and Resize-10: asymmetric coordinates; nearest takes the
    // lower neighbour when enlarging and the upper when shrinking (ONNX Runtime's rule for these)
    const auto legacy_resize = [](node_context& c, std::vector<double> scales) {
      resize_spec s;
      s.method = c.attr_string("mode", "nearest");
      if (s.method != "nearest" && s.method != "linear" && s.method != "bilinear")
        c.fail("mode must be 'nearest' or 'linear', not '" + s.method + "'");
      if (s.method == "bilinear") s.method = "linear";
      s.coordinates = "asymmetric";
      const bool up = std::all_of(scales.begin(), scales.end(), [](double v) { return v >= 1; });
      const bool down = std::all_of(scales.begin(), scales.end(), [](double v) { return v <= 1; });
      if (s.method == "nearest" && !up && !down) c.fail("nearest resizing that enlarges some axes and shrinks others is not supported before opset 11");
      s.rounding = up ? "floor" : "ceil";
      s.scales = std::move(scales);
      return resize(c, std::move(s));
    };
    t.add("Upsample", 7, [=](node_context& c) {
      auto scales = c.attr_floats("scales");
      if (!scales) c.fail("attribute 'scales' is required");
      return legacy_resize(c, std::vector<double>(scales->begin(), scales->end()));
    });
    t.add("Upsample", 9, [=](node_context& c) { return legacy_resize(c, c.constant_floats(1, "scales")); });
    t.add("Resize", 10, [=](node_context& c) { return legacy_resize(c, c.constant_floats(1, "scales")); });
    t.add("Resize", 11, [](node_context& c) {
      resize_spec s;
      s.method = c.attr_string("mode", "nearest");
      s.coordinates = c.attr_string("coordinate_transformation_mode", "half_pixel");
      s.rounding = c.attr_string("nearest_mode", "round_prefer_floor");
      s.cubic_alpha = c.attr_float("cubic_coeff_a", -0.75);
      s.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
      s.extrapolation = c.attr_float("extrapolation_value", 0.0);
      if (c.opset() >= 18) {
        if (c.attr_int("antialias", 0) != 0) c.fail("antialiased resizing is not supported");
        if (const auto p = c.attr_string("keep_aspect_ratio_policy", "stretch"); p != "stretch")
          c.fail("keep_aspect_ratio_policy '" + p + "' is not supported (only 'stretch')");
        if (auto axes = c.attr_ints("axes")) s.axes = *axes;
      }
      if (s.coordinates == "tf_crop_and_resize" && c.has_input(1)) s.roi = c.constant_floats(1, "roi");
      if (c.has_input(2)) s.scales = c.constant_floats(2, "scales");
      if (c.has_input(3)) s.sizes = c.constant_ints(3, "sizes");
      return resize(c, std::move(s));
    });
    t.add("Pad", 2, [](node_context& c) {
      auto pads = c.attr_ints("pads");
      if (!pads) c.fail("attribute 'pads' is required");
      return pad(c, *pads, c.attr_float("value", 0.0));
    });
    t.add("Pad", 11, [](node_context& c) {
      if (c.has_input(3)) c.fail("the axes input of Pad is not supported");
      return pad(c, c.constant_ints(1, "pads"), c.has_input(2) ? c.constant_floats(2, "constant_value").at(0) : 0.0);
    });
    return t;
  }();
  return table;
}

}  // namespace kiln::frontend::onnx
