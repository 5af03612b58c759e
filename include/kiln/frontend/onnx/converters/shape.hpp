// SPDX-License-Identifier: Apache-2.0
/// \file
/// The ONNX importer's shape and data-movement converters. Shapes and data movement: Reshape, Transpose, Concat, Split, Slice, Gather, Pad, Resize, Einsum, ...,
/// over static and symbolic shapes (`shape_values.hpp`).
#pragma once

#include <kiln/frontend/onnx/converters/common.hpp>

namespace kiln::frontend::onnx {

namespace detail {

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

/// Adds the shape and data-movement converters to `t`.
inline void add_shape_converters(converter_table& t) {
  using namespace detail;
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
}

}  // namespace kiln::frontend::onnx
