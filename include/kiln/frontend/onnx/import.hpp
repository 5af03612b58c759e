// SPDX-License-Identifier: Apache-2.0
/// \file
/// `frontend::onnx::import`: an ONNX model as a kiln IR module (Relax's `from_onnx`).
///
/// \code
/// ir::ir_module m = kiln::frontend::onnx::import_file("resnet18.onnx", {.shapes = {{"input", {1, 3, 224, 224}}}});
/// vm::executable ex = kiln::compile(m);
/// \endcode
///
/// The module has one function, `main`:
/// - graph inputs (those that are not initializers) become its parameters, with the model's dtype
///   and shape; a `dim_param` becomes a symbolic dimension — the same name, the same dimension —
///   and a dimension with neither value nor name a fresh one; `import_options::shapes` fixes an
///   input's shape (a batch size, say);
/// - initializers become constants, or, with `keep_params_in_input`, trailing parameters;
/// - each node becomes IR through the converter for its operator at the model's opset
///   (`converter_table`); calls whose operands are all constants are computed at import, so shape
///   subgraphs give static shapes;
/// - one output is the function's result, several a tuple.
///
/// A node whose operator is older than every converter kiln has for it (Reshape before opset 5,
/// with its shape as an attribute, say) is brought up by ONNX's version converter: the whole
/// model is converted to the first opset from which kiln converts each such operator, and that
/// model is imported. Where the converter has no adapter for a step, the error lists those
/// operators with the converter's reason.
///
/// Errors are `import_error`s that say what and where. Before anything is converted, the model is
/// checked by ONNX's checker, and every node's operator is looked up: a model with operators kiln
/// cannot import gets **one** error listing each such operator with the nodes that use it. A
/// malformed or truncated file is an error naming the file.
#pragma once

#include <kiln/frontend/onnx/converters.hpp>
#include <kiln/support/config.hpp>
#include <kiln/support/file.hpp>
#include <kiln/transform/properties.hpp>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::frontend::onnx {

struct import_options {
  /// Shapes that replace the model's for the named inputs (e.g. a fixed batch size).
  std::map<std::string, std::vector<std::int64_t>> shapes = {};
  /// Initializers become trailing parameters of `main` (in the model's order) instead of constants.
  bool keep_params_in_input = false;
  /// Graph inputs bound to known values: they become constants instead of parameters, so that
  /// a model taking a shape, axes or pads as an input can be specialized for them.
  std::map<std::string, ir::ndarray> constant_inputs = {};
  /// Run ONNX's model checker first.
  bool check_model = true;
  /// The converters to use (kiln's by default; a user's table may add operators).
  const converter_table* converters = nullptr;
  /// Where tensors stored outside the model (ONNX's external data, as models over 2 GiB are
  /// saved) are looked up: their `location`s are relative to it. `import_file` uses the model's
  /// folder when this is empty; `import_bytes` reads no external data without it.
  std::filesystem::path external_data_dir = {};
  /// Upper bounds of the model's symbolic dimensions, by their `dim_param` names
  /// (`{"past_sequence_length", 1023}`), given to `main` as its `tir_var_upper_bound` attribute
  /// (TVM's): the compiler then plans memory for the largest sizes, so that calls at every length
  /// up to them reuse one arena, and the VM refuses a call beyond a bound by name.
  std::map<std::string, std::int64_t> upper_bounds = {};
  /// `import_file` only: the main graph's large initializers (64 KiB and more) become constants
  /// over the file's own pages, mapped read-only, instead of being read into memory; the compiler
  /// copies or packs each one and gives its pages back, so that the weights are never in memory
  /// twice (mapped_model.hpp). The file must then not be truncated or written in place while the
  /// module is in use (replacing it by a rename is safe); the compiler refuses, naming the file,
  /// when it was. False reads every weight into memory.
  bool map_weights = true;
};

/// Reads every tensor of `model` stored as external data (initializers and Constant nodes'
/// values, in the main graph and its subgraphs) from its file under `dir` into the tensor's
/// raw_data, as ONNX's `load_external_data_for_model` does. A location must be a relative path
/// inside `dir`; the file must hold offset + length bytes. Errors name the tensor and the file.
KILN_DECL void load_external_data(::onnx::ModelProto& model, const std::filesystem::path& dir);

namespace detail {

inline std::string sanitize(const std::string& name) {
  std::string s;
  for (char ch : name) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v" + s;
  return s;
}

/// The opset of the default domain `model` imports (-1: none).
inline int default_opset(const ::onnx::ModelProto& model) {
  int opset = -1;
  for (auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = int(o.version());
  return opset;
}

/// The opset ONNX's version converter should bring `model` to: the first from which `table`
/// converts every operator of the main graph that is older than all of its converters (0: none is).
inline int upgrade_opset(const ::onnx::ModelProto& model, const converter_table& table) {
  const int opset = default_opset(model);
  int target = 0;
  if (opset < 0) return 0;
  for (auto& n : model.graph().node())
    if ((n.domain().empty() || n.domain() == "ai.onnx") && table.predates(n.op_type(), opset))
      target = std::max(target, table.first_opset(n.op_type()));
  return target;
}

/// The converters `options` asks for: its own table, or kiln's.
inline const converter_table& converters_of(const import_options& options) {
  return options.converters ? *options.converters : converter_table::builtin();
}

/// ONNX's checker on `model`; its complaint becomes an import_error.
inline void check_model(const ::onnx::ModelProto& model) {
  try {
    ::onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw import_error(std::string("kiln::frontend::onnx: the model is not valid ONNX: ") + e.what());
  }
}

/// What import_model learnt before the importer runs.
struct import_state {
  bool checked = false;          ///< ONNX's checker has accepted the model already
  std::string upgrade_failure = {};  ///< why ONNX's version converter could not bring the model up (empty: not asked)
  /// The model being imported, when the importer owns it (import_bytes, import_file): each
  /// initializer's data is then freed once it is a constant, so that a model's weights are not held
  /// twice while it is imported.
  ::onnx::ModelProto* owned = nullptr;
  /// The main graph's initializers whose raw_data lies in the mapped file (import_file with
  /// import_options::map_weights): the model holds a one-byte placeholder instead.
  const std::map<std::string, mapped_raw_data>* mapped = nullptr;
};

/// Mends what ONNX 1.12's version converter writes wrongly: its Reshape 4 -> 5 adapter makes the
/// shape a Constant whose tensor has no dims (a scalar) but holds every value. Such a tensor, in a
/// model the converter made, is the vector it was meant to be.
inline void mend_upgraded(::onnx::ModelProto& model) {
  for (auto& n : *model.mutable_graph()->mutable_node()) {
    if (n.op_type() != "Constant" || !n.domain().empty()) continue;
    for (auto& a : *n.mutable_attribute()) {
      if (a.name() != "value" || !a.has_t()) continue;
      ::onnx::TensorProto& t = *a.mutable_t();
      if (t.dims_size() == 0 && t.data_type() == ::onnx::TensorProto::INT64 && t.int64_data_size() != 1) t.add_dims(t.int64_data_size());
    }
  }
}

class importer {
public:
  /// `state.upgrade_failure` goes into the error that lists the operators kiln cannot import.
  importer(const ::onnx::ModelProto& model, const import_options& options, import_state state = {})
      : model_(model), options_(options), table_(converters_of(options)), eval_(ir::make_module()), state_(std::move(state)) {}

  ir::ir_module run() {
    read_opsets();
    if (options_.check_model && !state_.checked) check_model(model_);
    const auto& g = model_.graph();
    check_operators(g);

    std::set<std::string> initializer_names;
    for (auto& t : g.initializer()) initializer_names.insert(t.name());
    auto check_names = [&](const auto& map, const char* option) {
      for (auto& name : map) {
        bool found = false;
        for (auto& in : g.input()) found |= in.name() == name.first;
        if (!found) fail(std::string("import_options::") + option + " names '" + name.first + "', which is not an input of the graph");
      }
    };
    check_names(options_.shapes, "shapes");
    check_names(options_.constant_inputs, "constant_inputs");

    for (auto& in : g.input())
      if (in.type().has_tensor_type() && in.type().tensor_type().has_shape())
        for (auto& d : in.type().tensor_type().shape().dim())
          if (d.has_dim_param() && !d.dim_param().empty() && sanitize(d.dim_param()) == d.dim_param()) dim_names_.insert(d.dim_param());
    std::vector<ir::var> params;
    for (auto& in : g.input()) {
      if (initializer_names.count(in.name())) continue;  // an initializer listed as an input (IR version < 4)
      if (auto it = options_.constant_inputs.find(in.name()); it != options_.constant_inputs.end()) {
        const ir::type declared = input_type(in);
        ir::expr c = ir::make_constant(it->second);
        if (!ir::is_base_of(declared, c->checked_type))
          fail("import_options::constant_inputs gives '" + in.name() + "' a value of type " + ir::to_string(c->checked_type) +
               ", but the model declares " + ir::to_string(declared));
        values_[in.name()] = c;
        continue;
      }
      ir::var v = ir::make_var(sanitize(in.name()), input_type(in));
      params.push_back(v);
      values_[in.name()] = v;
    }
    for (int i = 0; i < g.initializer_size(); ++i) {
      const ::onnx::TensorProto& t = g.initializer(i);
      const mapped_raw_data* raw = nullptr;
      if (state_.mapped)
        if (auto it = state_.mapped->find(t.name()); it != state_.mapped->end()) raw = &it->second;
      ir::ndarray a = to_ndarray(t, "initializer '" + t.name() + "'", raw);
      if (state_.owned) release_data(*state_.owned->mutable_graph()->mutable_initializer(i));
      if (options_.keep_params_in_input) {
        ir::var v = ir::make_var(sanitize(t.name()), ir::make_constant(a)->checked_type);
        params.push_back(v);
        values_[t.name()] = v;
      } else {
        values_[t.name()] = ir::make_constant(std::move(a));
      }
    }

    bb_.begin_function("main", params);
    bb_.begin_dataflow();
    for (int i = 0; i < g.node_size(); ++i) convert(g.node(i), i);
    std::vector<ir::expr> outs;
    for (auto& o : g.output()) {
      outs.push_back(value(o.name(), "graph output '" + o.name() + "'"));
      if (is_shape_value(outs.back()))
        fail("graph output '" + o.name() + "' is computed from the symbolic dimension(s) " + symbolic_names(outs.back()) +
             " (a shape, not a tensor kiln computes); fix them with import_options::shapes (kiln-run --shape)");
    }
    ir::expr result = outs.size() == 1 ? outs[0] : ir::make_tuple(outs);
    ir::var gv = bb_.emit_output(result, "gv");
    bb_.end_dataflow();
    bb_.end_function(gv);
    ir::ir_module m = bb_.module();
    if (!options_.upper_bounds.empty()) {
      ir::int_dict bounds;
      for (const auto& [name, bound] : options_.upper_bounds) {
        auto it = size_vars_.find(name);
        if (it == size_vars_.end()) it = size_vars_.find(sanitize(name));
        if (it == size_vars_.end()) {
          std::string known;
          for (const auto& v : size_vars_) known += (known.empty() ? "" : ", ") + v.first;
          fail("import_options::upper_bounds names '" + name + "', which is not a symbolic dimension of the model's inputs (" +
               (known.empty() ? std::string("it has none") : "they are: " + known) + ")");
        }
        if (bound < 0) fail("import_options::upper_bounds gives '" + name + "' negative bound " + std::to_string(bound));
        bounds[it->first] = bound;
      }
      m = ir::with_function(m, "main", ir::with_attr(m->lookup("main"), transform::properties::upper_bound_attr, std::move(bounds)));
    }
    return m;
  }

private:
  [[noreturn]] static void fail(const std::string& msg) { throw import_error("kiln::frontend::onnx: " + msg); }

  void read_opsets() {
    opset_ = default_opset(model_);
    if (opset_ < 0) fail("the model imports no version of the default operator set (ai.onnx)");
  }

  /// Every operator the model uses has a converter at its opset; else one error listing them all.
  void check_operators(const ::onnx::GraphProto& g) {
    std::map<std::string, std::vector<std::string>> unsupported;  // what -> where
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      const std::string where = n.name().empty() ? "#" + std::to_string(i) : "'" + n.name() + "'";
      if (!n.domain().empty() && n.domain() != "ai.onnx") {
        unsupported[n.domain() + "." + n.op_type() + " (domain '" + n.domain() + "' is not supported)"].push_back(where);
        continue;
      }
      if (!table_.knows(n.op_type())) {
        unsupported[n.op_type()].push_back(where);
      } else if (table_.predates(n.op_type(), opset_)) {
        unsupported[n.op_type() + " (at opset " + std::to_string(opset_) + "; kiln converts it from opset " +
                    std::to_string(table_.first_opset(n.op_type())) + ")"]
            .push_back(where);
      }
    }
    if (unsupported.empty()) return;
    std::string msg = "the model uses " + std::to_string(unsupported.size()) + " operator" + (unsupported.size() == 1 ? "" : "s") +
                      " kiln cannot import:";
    for (auto& [op, nodes] : unsupported) {
      msg += "\n  " + op + ": " + std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s") + " (";
      for (std::size_t i = 0; i < nodes.size() && i < 5; ++i) msg += (i ? ", " : "") + nodes[i];
      if (nodes.size() > 5) msg += ", ...";
      msg += ")";
    }
    if (!state_.upgrade_failure.empty()) msg += "\n" + state_.upgrade_failure;
    fail(msg);
  }

  ir::type input_type(const ::onnx::ValueInfoProto& in) {
    const std::string what = "graph input '" + in.name() + "'";
    if (!in.type().has_tensor_type()) fail(what + " is not a tensor (sequences, maps and optionals are not supported)");
    const auto& tt = in.type().tensor_type();
    const dtype dt = require_dtype(tt.elem_type(), what);
    if (auto it = options_.shapes.find(in.name()); it != options_.shapes.end()) {
      std::vector<ir::prim_expr> dims;
      for (auto d : it->second) {
        if (d < 0) fail("import_options::shapes gives '" + in.name() + "' negative dimension " + std::to_string(d));
        dims.push_back(ir::make_int(d));
      }
      if (tt.has_shape() && tt.shape().dim_size() != int(dims.size()))
        fail("import_options::shapes gives '" + in.name() + "' rank " + std::to_string(dims.size()) + ", but the model gives rank " +
             std::to_string(tt.shape().dim_size()));
      return ir::tensor_type(std::move(dims), dt);
    }
    if (!tt.has_shape()) return ir::make_ref<ir::tensor_type_node>(dt, -1, std::nullopt);
    std::vector<ir::prim_expr> dims;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) fail(what + " has negative dimension " + std::to_string(d.dim_value()));
        dims.push_back(ir::make_int(d.dim_value()));
      } else {
        const bool named = d.has_dim_param() && !d.dim_param().empty();
        if (named)
          if (auto e = dim_expression(d.dim_param())) {
            dims.push_back(*e);
            continue;
          }
        dims.push_back(size_var(named ? sanitize(d.dim_param()) : sanitize(in.name()) + "_dim" + std::to_string(i)));
      }
    }
    return ir::tensor_type(std::move(dims), dt);
  }

  /// Frees tensor `t`'s data (its name, type and dims stay).
  static void release_data(::onnx::TensorProto& t) {
    std::string().swap(*t.mutable_raw_data());
    t.clear_raw_data();
    ::onnx::TensorProto values;  // the typed fields, swapped out and freed with it
    values.mutable_float_data()->Swap(t.mutable_float_data());
    values.mutable_double_data()->Swap(t.mutable_double_data());
    values.mutable_int32_data()->Swap(t.mutable_int32_data());
    values.mutable_int64_data()->Swap(t.mutable_int64_data());
    values.mutable_uint64_data()->Swap(t.mutable_uint64_data());
  }

  ir::prim_expr size_var(const std::string& name) {
    auto it = size_vars_.find(name);
    if (it == size_vars_.end()) it = size_vars_.emplace(name, ir::make_size_var(name)).first;
    return it->second;
  }

  /// A dim_param written as arithmetic over other inputs' dimension names and integers
  /// (`past_sequence_length + sequence_length`, as Hugging Face Optimum and ONNX Runtime's
  /// transformer tools name the attention mask's length): that expression (+, -, *, parentheses),
  /// so the importer knows the mask is as long as the cache and the new positions together, and
  /// the VM checks it when the function is called. Nothing when the text is not such an
  /// expression, or names a dimension no input has on its own (`seq-len` is one name).
  std::optional<ir::prim_expr> dim_expression(const std::string& text) {
    if (text.find_first_of("+-*()") == std::string::npos) return std::nullopt;
    std::size_t pos = 0;
    bool ok = true;
    const auto skip = [&] {
      while (pos < text.size() && text[pos] == ' ') ++pos;
    };
    std::function<ir::prim_expr()> sum;
    const auto factor = [&]() -> ir::prim_expr {
      skip();
      if (pos < text.size() && text[pos] == '(') {
        ++pos;
        ir::prim_expr e = sum();
        skip();
        if (pos >= text.size() || text[pos] != ')') ok = false;
        ++pos;
        return e;
      }
      const std::size_t start = pos;
      if (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
        while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
        if (pos - start > 15) ok = false;  // beyond any dimension
        return ir::make_int(ok ? std::stoll(text.substr(start, pos - start)) : 0);
      }
      while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_')) ++pos;
      const std::string name = text.substr(start, pos - start);
      if (name.empty() || !dim_names_.count(name)) {
        ok = false;
        return ir::make_int(0);
      }
      return size_var(name);
    };
    const auto product = [&] {
      ir::prim_expr e = factor();
      for (skip(); ok && pos < text.size() && text[pos] == '*'; skip()) {
        ++pos;
        e = e * factor();
      }
      return e;
    };
    sum = [&] {
      ir::prim_expr e = product();
      for (skip(); ok && pos < text.size() && (text[pos] == '+' || text[pos] == '-'); skip()) {
        const char op = text[pos++];
        e = op == '+' ? e + product() : e - product();
      }
      return e;
    };
    ir::prim_expr e = sum();
    skip();
    if (!ok || pos != text.size()) return std::nullopt;
    return e;
  }

  ir::expr value(const std::string& name, const std::string& what) const {
    auto it = values_.find(name);
    if (it == values_.end()) fail(what + " refers to '" + name + "', which no input, initializer or earlier node defines");
    return it->second;
  }

  static bool is_float16(const ir::expr& e) {
    auto* t = ir::dyn_cast<ir::tensor_type_node>(e->checked_type);
    return t && t->dt == dtype::float16;
  }
  /// Whether node `n` reads float16 tensors and is not one of the operators that only move,
  /// reshape, inspect or convert them (those keep float16).
  static bool computes_in_float32(const ::onnx::NodeProto& n, const std::vector<ir::expr>& inputs) {
    static const std::set<std::string> storage = {"Cast",      "CastLike", "Shape",     "Size",    "Identity", "Constant", "Reshape",
                                                  "Flatten",   "Squeeze",  "Unsqueeze", "Transpose", "Concat", "Split",    "Slice",
                                                  "Gather",    "Expand",   "Tile",      "EyeLike"};
    if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
    if (storage.count(n.op_type())) return false;
    return std::any_of(inputs.begin(), inputs.end(), [](const ir::expr& e) { return e && is_float16(e); });
  }

  void convert(const ::onnx::NodeProto& n, int index) {
    const std::string where = "node '" + (n.name().empty() ? "#" + std::to_string(index) : n.name()) + "' (" + n.op_type() + ")";
    std::vector<ir::expr> inputs;
    for (int i = 0; i < n.input_size(); ++i)
      inputs.push_back(n.input(i).empty() ? ir::expr() : value(n.input(i), where + " input " + std::to_string(i)));
    node_context ctx(n, opset_, inputs, bb_, eval_, where);
    std::vector<ir::expr> outs;
    try {
      // Dimensions computed from symbolic ones (shape_values.hpp): shape arithmetic stays
      // symbolic; Reshape, Expand, ConstantOfShape, Tile, Slice and Range take the result as
      // their targets or bounds (takes_shape_value); nothing else can.
      if (std::any_of(inputs.begin(), inputs.end(), is_shape_value)) {
        if (auto symbolic = convert_shape_arithmetic(ctx)) {
          bind_outputs(n, where, *symbolic);
          return;
        }
        for (std::size_t i = 0; i < inputs.size(); ++i)
          if (is_shape_value(inputs[i]) && !takes_shape_value(n.op_type(), i))
            fail(where + ": input " + std::to_string(i) + " is computed at import from the symbolic dimension(s) " + symbolic_names(inputs[i]) +
                 ", which this operator cannot take; fix them with import_options::shapes (kiln-run --shape)");
      }
      // float16 is a storage type for kiln's kernels: an operator that computes on float16
      // tensors computes in float32, its float results rounded back to float16 (exact for the
      // operators that only move elements; what ONNX Runtime's CPU kernels do for most others)
      if (computes_in_float32(n, inputs)) {
        std::vector<ir::expr> wide = inputs;
        for (auto& e : wide)
          if (e && is_float16(e)) e = ctx.call("astype", {e}, {{"dtype", dtype::float32}});
        node_context wctx = ctx.with_inputs(wide);
        outs = table_.find(n.op_type(), opset_)->fn(wctx);
        for (auto& o : outs)
          if (auto* t = o ? ir::dyn_cast<ir::tensor_type_node>(o->checked_type) : nullptr; t && t->dt == dtype::float32)
            o = ctx.call("astype", {o}, {{"dtype", dtype::float16}});
      } else {
        outs = table_.find(n.op_type(), opset_)->fn(ctx);
      }
    } catch (const import_error&) {
      throw;
    } catch (const kiln::error& e) {
      fail(where + ": " + e.what());
    }
    bind_outputs(n, where, outs);
  }

  void bind_outputs(const ::onnx::NodeProto& n, const std::string& where, const std::vector<ir::expr>& outs) {
    if (outs.size() < std::size_t(n.output_size()))
      fail(where + ": the converter gave " + std::to_string(outs.size()) + " outputs for " + std::to_string(n.output_size()));
    for (int i = 0; i < n.output_size(); ++i)
      if (!n.output(i).empty()) values_[n.output(i)] = outs[std::size_t(i)];
  }

  const ::onnx::ModelProto& model_;
  const import_options& options_;
  const converter_table& table_;
  interpreter::reference_evaluator eval_;
  ir::block_builder bb_;
  int opset_ = -1;
  import_state state_;
  std::unordered_map<std::string, ir::expr> values_;
  std::map<std::string, ir::size_var> size_vars_;
  std::set<std::string> dim_names_;  // the dim_params that are names (dim_expression)
};

}  // namespace detail

/// The IR of an ONNX model already parsed.
KILN_DECL ir::ir_module import_model(const ::onnx::ModelProto& model, const import_options& options = {});

/// The IR of an ONNX model held in memory; `source` names it in errors.
KILN_DECL ir::ir_module import_bytes(std::span<const std::byte> bytes, const std::string& source = "model bytes",
                                     const import_options& options = {});

/// The IR of the ONNX model in file `path`. Its large weights stay in the file, mapped, until the
/// compiler reads them (import_options::map_weights).
KILN_DECL ir::ir_module import_file(const std::filesystem::path& path, const import_options& options = {});

}  // namespace kiln::frontend::onnx

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/frontend/onnx/impl/import.ipp>
#endif
