// SPDX-License-Identifier: Apache-2.0
/// \file
/// What the ONNX converters of every operator family share: the converter table, and the helpers
/// more than one family uses. Each family registers its converters into the table from its own
/// header in this folder (`elementwise.hpp`, `linalg.hpp`, `nn.hpp`, `recurrent.hpp`,
/// `reduce.hpp`, `shape.hpp`); `../converters.hpp` puts them together.
#pragma once

#include <kiln/frontend/onnx/node_context.hpp>
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
  /// The opsets from which `op_type`'s converters apply, ascending (empty when it has none).
  std::vector<int> since_opsets(const std::string& op_type) const {
    std::vector<int> out;
    if (auto it = table_.find(op_type); it != table_.end())
      for (auto& e : it->second) out.push_back(e.since);
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

/// The shape of a value the importer made (each has a static rank).
inline std::vector<ir::prim_expr> shape_of(const ir::expr& e) { return ir::dyn_cast<ir::tensor_type_node>(e->checked_type)->shape.value(); }

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

}  // namespace detail

}  // namespace kiln::frontend::onnx
