// SPDX-License-Identifier: Apache-2.0
/// \file
/// `node_context`: what an operator converter sees of one ONNX node — its inputs as IR
/// expressions, its attributes with ONNX's defaults, the opset it is converted at — and how it
/// emits IR.
///
/// `call(op, args, attrs)` builds a type-checked operator call and binds it; when every operand is
/// a constant, the call is evaluated at once with kiln's kernels (through the reference evaluator)
/// and the result is a constant. That is how shape subgraphs (`Shape → Gather → Concat →
/// Reshape`) become the static shapes the compiler wants: a converter that needs a value at
/// import time (`Reshape`'s shape, `Slice`'s starts) asks for `constant_ints(i)`, which names the
/// input when it is not known.
#pragma once

#include <kiln/frontend/onnx/tensor.hpp>
#include <kiln/interpreter/fold.hpp>
#include <kiln/interpreter/reference_evaluator.hpp>
#include <kiln/ir/builder.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/transform/tensor_conversion.hpp>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace kiln::frontend::onnx {

/// Results larger than this are not computed at import time (they stay calls, for the compiler).
inline constexpr std::size_t max_folded_bytes = std::size_t(64) << 20;

/// An int64 constant holding `v` exactly: 1-D, or with `scalar` rank 0 (of `v`'s one element).
inline ir::expr int64_constant(const std::vector<std::int64_t>& v, bool scalar = false) {
  std::vector<std::byte> bytes(v.size() * sizeof(std::int64_t));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  std::vector<std::int64_t> shape;
  if (!scalar) shape.push_back(std::int64_t(v.size()));
  return ir::make_constant(ir::ndarray(dtype::int64, std::move(shape), std::move(bytes)));
}

/// Whether `e` is a shape value: dimensions known at import only as expressions.
inline bool is_shape_value(const ir::expr& e) { return e && (ir::isa<ir::shape_expr_node>(e) || ir::isa<ir::prim_value_node>(e)); }

/// Integers known at import: a scalar (`scalar`) or a 1-D list.
struct int_values {
  std::vector<ir::prim_expr> values;
  bool scalar = false;
};

/// The integers `e` holds at import: a shape value's, or an integer constant's of rank 0 or 1.
inline std::optional<int_values> int_values_of(const ir::expr& e) {
  if (!e) return std::nullopt;
  if (auto* s = ir::dyn_cast<ir::shape_expr_node>(e)) return int_values{s->values, false};
  if (auto* p = ir::dyn_cast<ir::prim_value_node>(e)) {
    if (!is_int(p->dt)) return std::nullopt;
    return int_values{{p->int_value}, true};
  }
  if (auto* c = ir::dyn_cast<ir::constant_node>(e)) {
    if (!is_int(c->data.dt()) || c->data.shape().size() > 1) return std::nullopt;
    int_values out{{}, c->data.shape().empty()};
    for (std::size_t k = 0; k < c->data.numel(); ++k) out.values.push_back(ir::make_int(c->data.element_int(k)));
    return out;
  }
  return std::nullopt;
}

class node_context {
public:
  /// `where` names the node in messages (the importer gives "node 'name' (Op)", or "node '#3'
  /// (Op)" for an unnamed node, its index in the graph); by default the node's name.
  node_context(const ::onnx::NodeProto& node, int opset, const std::vector<ir::expr>& inputs, ir::block_builder& bb,
               interpreter::reference_evaluator& eval, std::string where = {})
      : node_(node), opset_(opset), inputs_(inputs), bb_(bb), eval_(eval),
        where_(where.empty() ? "node '" + node.name() + "' (" + node.op_type() + ")" : std::move(where)) {
    for (auto& a : node.attribute()) attrs_[a.name()] = &a;
  }

  const ::onnx::NodeProto& node() const noexcept { return node_; }

  /// The same node seen with other inputs (for converters that rewrite an input and then reuse
  /// another converter); the inputs must outlive the returned context.
  node_context with_inputs(const std::vector<ir::expr>& inputs) const {
    node_context c(node_, opset_, inputs, bb_, eval_, where_);
    return c;
  }
  const std::string& op_type() const noexcept { return node_.op_type(); }
  /// The opset version of the node's domain in the model.
  int opset() const noexcept { return opset_; }

  // ---- inputs -------------------------------------------------------------------------------------

  /// Number of inputs given (trailing optional inputs may be absent).
  std::size_t num_inputs() const noexcept { return inputs_.size(); }
  /// Whether optional input `i` is given (present and not the empty name).
  bool has_input(std::size_t i) const noexcept { return i < inputs_.size() && inputs_[i]; }
  /// Input `i`; an error naming it when absent.
  const ir::expr& input(std::size_t i) const {
    if (!has_input(i)) fail("input " + std::to_string(i) + " is required but not given");
    return inputs_[i];
  }
  const ir::tensor_type_node& tensor_type(std::size_t i) const {
    auto* t = ir::dyn_cast<ir::tensor_type_node>(input(i)->checked_type);
    if (!t) fail("input " + std::to_string(i) + " must be a tensor, but has type " + ir::to_string(input(i)->checked_type));
    return *t;
  }
  /// The rank of input `i`; an error when unknown.
  int rank(std::size_t i) const {
    const int r = tensor_type(i).ndim;
    if (r < 0) fail("input " + std::to_string(i) + " has unknown rank");
    return r;
  }
  /// The dimensions of input `i` (constants or symbolic); an error when unknown.
  std::vector<ir::prim_expr> shape(std::size_t i) const {
    const auto& t = tensor_type(i);
    if (!t.shape) fail("input " + std::to_string(i) + " has an unknown shape");
    return *t.shape;
  }
  dtype input_dtype(std::size_t i) const { return tensor_type(i).dt; }

  /// The value of input `i` when it is a constant (an initializer, a `Constant`, or computed at
  /// import time), else nothing.
  const ir::ndarray* constant(std::size_t i) const {
    if (!has_input(i)) return nullptr;
    if (auto* c = ir::dyn_cast<ir::constant_node>(inputs_[i])) return &c->data;
    return nullptr;
  }
  /// Input `i` as integers, which must be known at import time.
  std::vector<std::int64_t> constant_ints(std::size_t i, const char* what) const {
    const ir::ndarray* c = constant(i);
    if (!c)
      fail("input " + std::to_string(i) + " (" + what +
           ") must be known when the model is imported (a constant, or computed from constants and static shapes); "
           "fix symbolic dimensions with import_options::shapes");
    std::vector<std::int64_t> out(c->numel());
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = c->element_int(k);
    return out;
  }
  /// Input `i` as integers known at import (a shape, sizes, repeats): a constant's, or a shape
  /// value's, whose entries may be symbolic (shape_values.hpp).
  std::vector<ir::prim_expr> known_ints(std::size_t i, const char* what) const {
    if (auto v = has_input(i) ? int_values_of(inputs_[i]) : std::nullopt) return v->values;
    (void)constant_ints(i, what);  // the error
    fail("input " + std::to_string(i) + " (" + what + ") must be integers");
  }
  std::vector<double> constant_floats(std::size_t i, const char* what) const {
    const ir::ndarray* c = constant(i);
    if (!c) fail("input " + std::to_string(i) + " (" + what + ") must be known when the model is imported");
    std::vector<double> out(c->numel());
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = c->element(k);
    return out;
  }

  // ---- attributes ---------------------------------------------------------------------------------

  bool has_attr(const std::string& name) const { return attrs_.count(name) != 0; }
  std::int64_t attr_int(const std::string& name, std::int64_t fallback) const {
    auto* a = find(name, ::onnx::AttributeProto::INT);
    return a ? a->i() : fallback;
  }
  std::int64_t attr_int(const std::string& name) const {
    auto* a = find(name, ::onnx::AttributeProto::INT);
    if (!a) fail("attribute '" + name + "' is required");
    return a->i();
  }
  double attr_float(const std::string& name, double fallback) const {
    auto* a = find(name, ::onnx::AttributeProto::FLOAT);
    return a ? a->f() : fallback;
  }
  std::string attr_string(const std::string& name, std::string fallback) const {
    auto* a = find(name, ::onnx::AttributeProto::STRING);
    return a ? a->s() : fallback;
  }
  std::optional<std::vector<std::int64_t>> attr_ints(const std::string& name) const {
    auto* a = find(name, ::onnx::AttributeProto::INTS);
    if (!a) return std::nullopt;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
  }
  std::optional<std::vector<float>> attr_floats(const std::string& name) const {
    auto* a = find(name, ::onnx::AttributeProto::FLOATS);
    if (!a) return std::nullopt;
    return std::vector<float>(a->floats().begin(), a->floats().end());
  }
  std::optional<std::vector<std::string>> attr_strings(const std::string& name) const {
    auto* a = find(name, ::onnx::AttributeProto::STRINGS);
    if (!a) return std::nullopt;
    return std::vector<std::string>(a->strings().begin(), a->strings().end());
  }
  const ::onnx::TensorProto* attr_tensor(const std::string& name) const {
    auto* a = find(name, ::onnx::AttributeProto::TENSOR);
    return a ? &a->t() : nullptr;
  }

  // ---- emitting -----------------------------------------------------------------------------------

  /// `op(args, attrs)`, type-checked, computed now when every operand is a constant, else bound.
  ir::expr call(const std::string& op, std::vector<ir::expr> args, const ir::attr_map& attrs = {}) {
    ir::expr c = ir::call_op(op, std::move(args), attrs);
    return fold_or_emit(c);
  }
  /// Binds `e` (or computes it, when it is a foldable call).
  ir::expr fold_or_emit(const ir::expr& e) {
    if (auto folded = try_fold(e)) return folded;
    return bb_.emit(e);
  }
  ir::expr constant(const ir::ndarray& a) const { return ir::make_constant(a); }
  ir::expr scalar(double v, dtype dt) const { return ir::make_constant(v, dt); }
  /// A 1-d int64 constant (exact: not through double).
  ir::expr ints(const std::vector<std::int64_t>& v) const { return int64_constant(v); }

  /// An `import_error` naming the node.
  [[noreturn]] void fail(const std::string& msg) const {
    throw import_error("kiln::frontend::onnx: " + where_ + ": " + msg);
  }

  /// Normalizes axis `a` (which may be negative) for a tensor of rank `r`.
  std::int64_t axis(std::int64_t a, int r, const char* what = "axis") const {
    if (a < -r || a >= r) fail(std::string(what) + " " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
    return a < 0 ? a + r : a;
  }

private:
  const ::onnx::AttributeProto* find(const std::string& name, ::onnx::AttributeProto::AttributeType type) const {
    auto it = attrs_.find(name);
    if (it == attrs_.end()) return nullptr;
    if (it->second->type() != type && it->second->type() != ::onnx::AttributeProto::UNDEFINED)
      fail("attribute '" + name + "' has type " + ::onnx::AttributeProto::AttributeType_Name(it->second->type()) + ", expected " +
           ::onnx::AttributeProto::AttributeType_Name(type));
    return it->second;
  }

  /// `e` computed now when its operands are constants (`interpreter::fold_call`, as the pass
  /// fold_constant computes), so that shape subgraphs give static shapes.
  ir::expr try_fold(const ir::expr& e) { return interpreter::fold_call(eval_, e, std::int64_t(max_folded_bytes)); }

  const ::onnx::NodeProto& node_;
  int opset_;
  const std::vector<ir::expr>& inputs_;
  ir::block_builder& bb_;
  interpreter::reference_evaluator& eval_;
  std::string where_;
  std::map<std::string, const ::onnx::AttributeProto*> attrs_;
};

/// A converter: the node's outputs as IR expressions, one per output the node declares (an
/// output nobody uses may be null).
using converter_fn = std::function<std::vector<ir::expr>(node_context&)>;

/// One way to convert an operator, valid from opset `since` until the next entry for the same
/// operator (ONNX's versioning: a converter is chosen as the largest `since` ≤ the model's opset).
struct converter_entry {
  int since;
  converter_fn fn;
};

namespace detail {

/// `x` reshaped to `dims`.
inline ir::expr reshape_to(node_context& c, const ir::expr& x, std::vector<ir::prim_expr> dims) {
  return c.call("reshape", {x, ir::make_shape_expr(std::move(dims))});
}

/// The integers [0, n) as an int64 constant of rank `rank`, along axis `axis` (1 elsewhere): what
/// an index tensor is compared with to make a one-hot mask (NLL loss, Hardmax, OneHot).
inline ir::expr iota_along(node_context& c, std::int64_t n, std::size_t rank, std::size_t axis) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n), 0);
  std::iota(ids.begin(), ids.end(), std::int64_t{0});
  std::vector<ir::prim_expr> dims(rank, ir::make_int(1));
  dims[axis] = ir::make_int(n);
  return reshape_to(c, c.ints(ids), dims);
}

}  // namespace detail

}  // namespace kiln::frontend::onnx
