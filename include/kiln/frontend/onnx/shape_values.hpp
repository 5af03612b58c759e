// SPDX-License-Identifier: Apache-2.0
/// \file
/// Shape subgraphs over symbolic dimensions. A model exported with a dynamic batch or sequence
/// (PyTorch's `dynamic_axes`) computes its reshapes' targets from `Shape`: `Shape → Gather →
/// Mul → Unsqueeze → Concat → Reshape`. When the dimensions are static the importer computes
/// those values as constants (node_context). When some are symbolic, `Shape` gives a *shape
/// value* instead: an IR `shape_expr` (a 1-D list of dimensions) or an integer `prim_value` (a
/// scalar), whose entries are the model's size variables and expressions over them. The shape
/// arithmetic below — Gather, Slice, Concat, Unsqueeze, Squeeze, Reshape, Shape, Add, Sub, Mul,
/// Div, Mod, Equal, Where, Cast to an integer type, Identity — maps shape values to shape values
/// (Equal to constants, when provable: a dimension is never negative), as TVM's Relax importer
/// does; Reshape, Expand, ConstantOfShape and Tile take them as their targets, Slice as its bounds
/// and Range as its limits (converters.hpp: indices made at run time). Any other operator given
/// one is an error naming the symbolic dimensions to fix.
#pragma once

#include <kiln/frontend/onnx/node_context.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::frontend::onnx {

/// `v` as an expression: an int64 constant when every entry is static, else a shape value.
inline ir::expr make_int_values(const int_values& v) {
  std::vector<std::int64_t> known;
  for (const auto& d : v.values)
    if (auto k = ir::as_int(d)) known.push_back(*k);
  if (known.size() == v.values.size()) return int64_constant(known, v.scalar);
  return v.scalar ? ir::make_prim_value(v.values.at(0)) : ir::make_shape_expr(v.values);
}

/// The size variables a shape value's entries use, for messages ("batch, seq").
inline std::string symbolic_names(const ir::expr& e) {
  std::set<std::string> names;
  std::vector<ir::prim_expr> values;
  if (auto v = int_values_of(e)) values = v->values;
  for (const auto& d : values)
    if (!ir::as_int(d)) names.insert(ir::to_string(d));
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// Whether operator `op` takes a shape value as its input `i` (its converter reads it through
/// `node_context::known_ints`): the target of Reshape, Expand, ConstantOfShape and Tile, Slice's
/// starts and ends, Range's three operands. Their other inputs are tensors (a shape value there
/// is shape arithmetic, or an error).
inline bool takes_shape_value(const std::string& op, std::size_t i) {
  if (op == "Reshape" || op == "Expand" || op == "Tile") return i == 1;
  if (op == "ConstantOfShape") return i == 0;
  if (op == "Slice") return i == 1 || i == 2;
  return op == "Range";
}

/// Where over shape values with a constant condition (PyTorch's `expand(-1, ...)`: the -1s of
/// the target replaced by the input's dimensions): elementwise, with numpy's broadcasting.
inline std::optional<std::vector<ir::expr>> shape_where(node_context& c) {
  if (c.num_inputs() < 3 || !c.has_input(0) || !c.has_input(1) || !c.has_input(2)) return std::nullopt;
  const ir::ndarray* cond = c.constant(0);
  const auto x = int_values_of(c.input(1)), y = int_values_of(c.input(2));
  if (!cond || cond->dt() != dtype::bool_ || cond->shape().size() > 1 || !x || !y) return std::nullopt;
  const std::size_t nc = cond->numel(), n = std::max({nc, x->values.size(), y->values.size()});
  for (std::size_t m : {nc, x->values.size(), y->values.size()})
    if (m != n && m != 1) return std::nullopt;
  int_values out{{}, cond->shape().empty() && x->scalar && y->scalar};
  for (std::size_t k = 0; k < n; ++k)
    out.values.push_back(cond->element_int(nc == 1 ? 0 : k) != 0 ? x->values[x->values.size() == 1 ? 0 : k] : y->values[y->values.size() == 1 ? 0 : k]);
  return std::vector<ir::expr>{make_int_values(out)};
}

/// Node `c` computed on shape values (at least one input is one, the others integer constants):
/// its outputs, or nothing when the operator is not shape arithmetic or its operands are not
/// values it can compute with (then the importer reports it).
inline std::optional<std::vector<ir::expr>> convert_shape_arithmetic(node_context& c) {
  const std::string& op = c.op_type();
  if (op == "Where") return shape_where(c);
  std::vector<int_values> in;
  for (std::size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) {
      in.emplace_back();
      continue;
    }
    auto v = int_values_of(c.input(i));
    if (!v) return std::nullopt;
    in.push_back(std::move(*v));
  }
  const auto all_static = [](const int_values& v) {
    return std::all_of(v.values.begin(), v.values.end(), [](const ir::prim_expr& d) { return ir::as_int(d).has_value(); });
  };
  const auto ints = [&](std::size_t i) {
    std::vector<std::int64_t> out;
    for (const auto& d : in.at(i).values) out.push_back(*ir::as_int(d));
    return out;
  };
  const auto result = [](int_values v) { return std::optional<std::vector<ir::expr>>(std::vector<ir::expr>{make_int_values(v)}); };

  // (Checked without ONNX's checker, a node may lack inputs its operator requires.)
  const std::size_t needs = op == "Gather" || op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Mod" || op == "Equal" || op == "Reshape" ? 2
                            : op == "Slice"                                                                                             ? 3
                                                                                                                                        : 1;
  for (std::size_t i = 0; i < needs; ++i)
    if (!c.has_input(i)) return std::nullopt;
  if (op == "Identity") return std::vector<ir::expr>{c.input(0)};
  if (op == "Shape") {  // of a shape value: its length
    if (c.has_attr("start") || c.has_attr("end")) return std::nullopt;
    if (in[0].scalar) return result({{}, false});
    return result({{ir::make_int(std::int64_t(in[0].values.size()))}, false});
  }
  if (op == "Reshape") {  // a list kept a list ([-1] or [n]), or one value made a scalar ([])
    if (!c.has_input(1) || !all_static(in[1])) return std::nullopt;
    const auto target = ints(1);
    const auto n = std::int64_t(in[0].values.size());
    if (target.size() == 1 && (target[0] == -1 || target[0] == n)) return result({in[0].values, false});
    if (target.empty() && n == 1) return result({in[0].values, true});
    return std::nullopt;
  }
  if (op == "Equal") {  // known when provable: a dimension is never negative
    const int_values& a = in[0];
    const int_values& b = in[1];
    const std::size_t n = std::max(a.values.size(), b.values.size());
    if ((a.values.size() != n && a.values.size() != 1) || (b.values.size() != n && b.values.size() != 1)) return std::nullopt;
    std::vector<std::byte> bits;
    for (std::size_t k = 0; k < n; ++k) {
      const ir::prim_expr& x = a.values[a.values.size() == 1 ? 0 : k];
      const ir::prim_expr& y = b.values[b.values.size() == 1 ? 0 : k];
      const auto kx = ir::as_int(x), ky = ir::as_int(y);
      bool equal;
      if (ir::prove_equal(x, y)) equal = true;
      else if (ir::prove_not_equal(x, y) || (kx && *kx < 0 && !ky) || (ky && *ky < 0 && !kx)) equal = false;
      else return std::nullopt;
      bits.push_back(std::byte(equal ? 1 : 0));
    }
    const bool scalar = a.scalar && b.scalar;
    const std::vector<std::int64_t> shape = scalar ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{std::int64_t(n)};
    return std::vector<ir::expr>{ir::make_constant(ir::ndarray(dtype::bool_, shape, std::move(bits)))};
  }
  if (op == "Cast") {
    const int to = int(c.attr_int("to"));
    const bool integer = to == ::onnx::TensorProto::INT64 || to == ::onnx::TensorProto::INT32 || to == ::onnx::TensorProto::INT16 ||
                         to == ::onnx::TensorProto::INT8;
    if (!integer) return std::nullopt;
    return result(in[0]);
  }
  if (op == "Gather") {
    if (in[0].scalar || c.axis(c.attr_int("axis", 0), 1) != 0 || !all_static(in[1])) return std::nullopt;
    const auto n = std::int64_t(in[0].values.size());
    int_values out{{}, in[1].scalar};
    for (auto k : ints(1)) {
      if (k < -n || k >= n) c.fail("index " + std::to_string(k) + " is out of range for " + std::to_string(n) + " dimensions");
      out.values.push_back(in[0].values[std::size_t(k < 0 ? k + n : k)]);
    }
    return result(out);
  }
  if (op == "Unsqueeze") {  // a scalar to a list of one
    std::vector<std::int64_t> axes = c.opset() >= 13 ? (c.has_input(1) && all_static(in[1]) ? ints(1) : std::vector<std::int64_t>{})
                                                     : c.attr_ints("axes").value_or(std::vector<std::int64_t>{});
    if (!in[0].scalar || axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) return std::nullopt;
    return result({in[0].values, false});
  }
  if (op == "Squeeze") {  // a list of one to a scalar
    if (in[0].scalar || in[0].values.size() != 1) return std::nullopt;
    return result({in[0].values, true});
  }
  if (op == "Concat") {
    if (c.attr_int("axis", 0) != 0 && c.attr_int("axis", 0) != -1) return std::nullopt;
    int_values out;
    for (const auto& v : in) {
      if (v.scalar) return std::nullopt;
      out.values.insert(out.values.end(), v.values.begin(), v.values.end());
    }
    return result(out);
  }
  if (op == "Slice" && c.opset() >= 10) {
    if (in[0].scalar) return std::nullopt;
    for (std::size_t i = 1; i < in.size(); ++i)
      if (c.has_input(i) && !all_static(in[i])) return std::nullopt;
    if (ints(1).size() != 1 || ints(2).size() != 1) return std::nullopt;
    if (c.has_input(3) && (ints(3).size() != 1 || (ints(3)[0] != 0 && ints(3)[0] != -1))) return std::nullopt;
    const std::int64_t n = std::int64_t(in[0].values.size()), step = c.has_input(4) ? ints(4).at(0) : 1;
    if (step == 0) c.fail("a step is 0");
    // numpy's clamping of start and end for the step's direction
    const auto clamp = [&](std::int64_t v) {
      if (v < 0) v = v < -n ? -n - 1 : v + n;
      return step > 0 ? std::clamp<std::int64_t>(v, 0, n) : std::clamp<std::int64_t>(v, -1, n - 1);
    };
    const std::int64_t begin = clamp(ints(1)[0]), end = clamp(ints(2)[0]);
    int_values out;
    for (std::int64_t k = begin; step > 0 ? k < end : k > end; k += step) out.values.push_back(in[0].values[std::size_t(k)]);
    return result(out);
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Mod") {
    const int_values& a = in[0];
    const int_values& b = in[1];
    const std::size_t n = std::max(a.values.size(), b.values.size());
    if ((a.values.size() != n && a.values.size() != 1) || (b.values.size() != n && b.values.size() != 1)) return std::nullopt;
    int_values out{{}, a.scalar && b.scalar};
    for (std::size_t k = 0; k < n; ++k) {
      const ir::prim_expr& x = a.values[a.values.size() == 1 ? 0 : k];
      const ir::prim_expr& y = b.values[b.values.size() == 1 ? 0 : k];
      const auto kx = ir::as_int(x), ky = ir::as_int(y);
      if ((op == "Div" || op == "Mod") && ky == 0) c.fail("division by zero in shape arithmetic");
      if (op == "Add") out.values.push_back(x + y);
      else if (op == "Sub") out.values.push_back(x - y);
      else if (op == "Mul") out.values.push_back(x * y);
      else if (op == "Mod" && c.attr_int("fmod", 0) != 0)
        return std::nullopt;
      else if (op == "Div" && kx && ky) {  // ONNX's integer Div truncates
        if (*kx == std::numeric_limits<std::int64_t>::min() && *ky == -1) c.fail("shape arithmetic overflows int64");
        out.values.push_back(ir::make_int(*kx / *ky));
      } else if (op == "Mod" && kx && ky)  // fmod 0: the divisor's sign
        out.values.push_back(ir::floormod(x, y));
      else if (ky && *ky > 0)  // a dimension is not negative: floor and truncation agree
        out.values.push_back(op == "Div" ? ir::floordiv(x, y) : ir::floormod(x, y));
      else
        return std::nullopt;
    }
    return result(out);
  }
  return std::nullopt;
}

}  // namespace kiln::frontend::onnx
