// SPDX-License-Identifier: Apache-2.0
/// \file
/// The text format, printing side: readable, deterministic, and parsed back by `parse_module`.
///
/// The format follows TVMScript's Relax dialect closely:
/// \code
///   @I.ir_module
///   class Module:
///       @R.function
///       def main(x: R.Tensor((n, 784), "float32"), w: R.Tensor((784, 10), "float32")) -> R.Tensor((n, 10), "float32"):
///           with R.dataflow():
///               lv: R.Tensor((n, 10), "float32") = R.matmul(x, w)
///               gv: R.Tensor((n, 10), "float32") = R.nn.relu(lv)
///               R.output(gv)
///           return gv
/// \endcode
/// Size variables (`n`) are introduced by their first use in a parameter type or `R.match_cast`.
/// Names come from the variables' hints, made unique within a function by a numeric suffix, so
/// printing the same module twice gives the same text. Operator attributes equal to their defaults
/// are left out.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>

#include <charconv>
#include <utility>
#include <limits>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace kiln::ir {

struct print_options {
  /// Print the type annotation of every binding (`lv: R.Tensor(...) = ...`).
  bool show_binding_types = true;
  /// Constants with more elements are elided: `R.const(meta[3], "float32", shape=(64, 3, 7, 7))`,
  /// the constant's dtype, shape and its index among the elided ones (TVM prints
  /// `metadata["relax.expr.Constant"][3]`, MLIR `dense_resource<__elided__>`). The default prints
  /// every element, so that the text reads back alone; `readable()` elides as tools and Python do.
  std::size_t max_constant_elements = std::numeric_limits<std::size_t>::max();
  /// When set, receives each elided constant, in the order of their `meta[i]` indices: give them
  /// to `parse_module` (`parse_options::constants`) to read the elided text back.
  std::vector<ndarray>* elided_constants = nullptr;

  /// The largest constant printed in full by `readable()`.
  static constexpr std::size_t readable_constant_elements = 16;
  /// How IR is printed for people to read (instruments, `--print-after-all`, Python's `str`):
  /// constants of more than 16 elements elided.
  static print_options readable() {
    print_options o;
    o.max_constant_elements = readable_constant_elements;
    return o;
  }
};

namespace detail {

inline bool is_reserved_name(std::string_view s) {
  static const std::unordered_set<std::string_view> words = {
      "if", "else", "elif", "return", "with", "def", "class", "True", "False", "None", "and", "or", "not", "pass", "in",
      "is", "for", "while", "lambda", "R", "T", "I", "cls", "inf", "nan"};
  return words.count(s) != 0;
}

/// Shortest text that reads back as the same value, always marked as a float (`1.0`, `inf`).
inline std::string float_text(double v, dtype dt) {
  if (v != v) return "nan";
  if (v == std::numeric_limits<double>::infinity()) return "inf";
  if (v == -std::numeric_limits<double>::infinity()) return "-inf";
  char buf[64];
  std::to_chars_result r = dt == dtype::float64 ? std::to_chars(buf, buf + sizeof buf, v)
                                                : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

/// A shape's dimensions as the inside of a Python tuple, as `shape=(...)` prints them: "2, 3",
/// "4," for one dimension, "" for none.
inline std::string tuple_contents(std::span<const std::int64_t> dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  if (dims.size() == 1) s += ",";
  return s;
}

inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

inline std::string attr_text(const attr_value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, std::monostate>) return "None";
        else if constexpr (std::is_same_v<X, bool>) return x ? "True" : "False";
        else if constexpr (std::is_same_v<X, std::int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<X, double>) return float_text(x, dtype::float64);
        else if constexpr (std::is_same_v<X, std::string>) return quote(x);
        else if constexpr (std::is_same_v<X, dtype>) return quote(name(x));
        else if constexpr (std::is_same_v<X, int_dict>) {
          std::string s = "{";
          bool first = true;
          for (auto& [k, n] : x) s += (std::exchange(first, false) ? "" : ", ") + quote(k) + ": " + std::to_string(n);
          return s + "}";
        } else if constexpr (std::is_same_v<X, float_array>) {
          std::string s = "[";
          for (std::size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + float_text(x[i], dtype::float64);
          return s + "]";
        } else {
          std::string s = "[";
          for (std::size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + std::to_string(x[i]);
          return s + "]";
        }
      },
      v.raw());
}

inline std::string attr_dict(const attr_map& a) {
  std::string s = "{";
  bool first = true;
  for (auto& [k, v] : a) {
    s += (first ? "" : ", ") + quote(k) + ": " + attr_text(v);
    first = false;
  }
  return s + "}";
}

class ir_printer {
public:
  explicit ir_printer(print_options o) : opt_(o) {}

  std::string module(const ir_module& m) {
    out_ = "# kiln IR\n@I.ir_module\nclass Module:\n";
    if (!m->attrs.empty()) line(1, "I.module_attrs(" + attr_dict(m->attrs) + ")");
    bool first = m->attrs.empty();
    for (auto& e : m->functions()) {
      if (!first) out_ += "\n";
      first = false;
      func(e.gv->name, e.func, 1);
    }
    if (m->functions().empty() && m->attrs.empty()) line(1, "pass");
    return std::move(out_);
  }

  std::string function(const std::string& name, const base_func& f) {
    out_.clear();
    func(name, f, 0);
    return std::move(out_);
  }

  std::string expression(const expr& e) { return ex(e); }

private:
  void line(int indent, const std::string& s) {
    out_.append(static_cast<std::size_t>(indent) * 4, ' ');
    out_ += s;
    out_ += '\n';
  }

  std::string fresh(const std::string& hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
    if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "v" + base;
    if (is_reserved_name(base)) base += "_";
    std::string name = base;
    for (int i = 1; used_.count(name); ++i) name = base + std::to_string(i);
    used_.insert(name);
    return name;
  }
  std::string var_name(const var_node* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    return names_.emplace(v, fresh(v->name_hint)).first->second;  // free variable
  }
  std::string size_name(const size_var_node& v) {
    auto it = names_.find(&v);
    if (it != names_.end()) return it->second;
    return names_.emplace(&v, fresh(v.name)).first->second;
  }
  std::string ty(const type& t) {
    return to_string(t, [this](const size_var_node& v) { return size_name(v); });
  }
  std::string dim(const prim_expr& p) {
    return to_string(p, [this](const size_var_node& v) { return size_name(v); });
  }
  std::string def(const var& v) {
    std::string n = fresh(v->name_hint);
    names_[v.get()] = n;
    return n;
  }

  void func(const std::string& name, const base_func& f, int indent) {
    names_.clear();
    used_.clear();
    if (auto* fn = dyn_cast<function_node>(f)) {
      const std::string sig = params(fn->params);
      line(indent, "@R.function");
      line(indent, "def " + name + "(" + sig + ") -> " + ty(fn->ret_type) + ":");
      if (!fn->attrs.empty()) line(indent + 1, "R.func_attr(" + attr_dict(fn->attrs) + ")");
      seq_body(static_cast<const seq_expr_node&>(*fn->body), indent + 1);
      return;
    }
    auto& pf = static_cast<const prim_func_node&>(*f);
    const std::string sig = params(pf.params);
    line(indent, pf.num_outputs == 1 ? "@T.prim_func" : "@T.prim_func(num_outputs=" + std::to_string(pf.num_outputs) + ")");
    line(indent, "def " + name + "(" + sig + "):");
    if (!pf.attrs.empty()) line(indent + 1, "T.func_attr(" + attr_dict(pf.attrs) + ")");
    if (pf.body) seq_body(static_cast<const seq_expr_node&>(*pf.body), indent + 1);
    else line(indent + 1, "pass");
  }

  /// `x: R.Tensor(...), y: ...`, defining the parameters and, through their types, the size
  /// variables they introduce.
  std::string params(const std::vector<var>& ps) {
    std::string sig;
    for (auto& p : ps) {
      std::string pt = ty(p->checked_type);  // names the size variables first
      sig += (sig.empty() ? "" : ", ") + def(p) + ": " + pt;
    }
    return sig;
  }

  void seq_body(const seq_expr_node& s, int indent) {
    for (auto& b : s.blocks) block(b, indent);
    line(indent, "return " + ex(s.body));
  }

  void block(const binding_block& b, int indent) {
    if (!b.dataflow) {
      for (auto& bd : b.bindings) bind(bd, indent);
      return;
    }
    line(indent, "with R.dataflow():");
    std::string outputs;
    for (auto& bd : b.bindings) {
      bind(bd, indent + 1);
      if (!bd.variable->is_dataflow()) outputs += (outputs.empty() ? "" : ", ") + var_name(bd.variable.get());
    }
    if (!outputs.empty()) line(indent + 1, "R.output(" + outputs + ")");
  }

  void bind(const binding& b, int indent) {
    if (auto* i = dyn_cast<if_node>(b.value)) {
      std::string cond = ex(i->cond);
      line(indent, "if " + cond + ":");
      branch(static_cast<const seq_expr_node&>(*i->then_branch), b.variable, indent + 1);
      line(indent, "else:");
      branch(static_cast<const seq_expr_node&>(*i->else_branch), b.variable, indent + 1);
      return;
    }
    if (b.is_match_cast()) {
      std::string value = ex(b.value);
      std::string t = ty(b.cast_type);  // may introduce size variables
      line(indent, def(b.variable) + " = R.match_cast(" + value + ", " + t + ")");
      return;
    }
    std::string value = ex(b.value);
    std::string t = opt_.show_binding_types ? ": " + ty(b.variable->checked_type) : std::string();
    line(indent, def(b.variable) + t + " = " + value);
  }

  /// An if branch: its bindings, then `result_var: T = body` (the variable shared by both branches).
  void branch(const seq_expr_node& s, const var& result, int indent) {
    for (auto& b : s.blocks) block(b, indent);
    std::string value = ex(s.body);
    auto it = names_.find(result.get());
    std::string n = it != names_.end() ? it->second : def(result);
    line(indent, n + ": " + ty(result->checked_type) + " = " + value);
  }

  std::string list(const std::vector<expr>& xs) {
    std::string s;
    for (std::size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + ex(xs[i]);
    return s;
  }

  std::string ex(const expr& e) {
    switch (e->kind) {
      case node_kind::var:
      case node_kind::dataflow_var: return var_name(static_cast<const var_node*>(e.get()));
      case node_kind::constant: return constant(static_cast<const constant_node&>(*e).data);
      case node_kind::global_var: return "cls." + static_cast<const global_var_node&>(*e).name;
      case node_kind::op: return "R." + static_cast<const op_node&>(*e).name();
      case node_kind::extern_func: return "R.ExternFunc(" + quote(static_cast<const extern_func_node&>(*e).symbol) + ")";
      case node_kind::call: return call(static_cast<const call_node&>(*e));
      case node_kind::tuple: {
        auto& t = static_cast<const tuple_node&>(*e);
        return "(" + list(t.fields) + (t.fields.size() == 1 ? ",)" : ")");
      }
      case node_kind::tuple_get_item: {
        auto& t = static_cast<const tuple_get_item_node&>(*e);
        return ex(t.tuple) + "[" + std::to_string(t.index) + "]";
      }
      case node_kind::shape_expr: {
        auto& s = static_cast<const shape_expr_node&>(*e);
        return "R.shape(" + to_string(s.values, [this](const size_var_node& v) { return size_name(v); }, "[", "]") + ")";
      }
      case node_kind::prim_value: {
        auto& p = static_cast<const prim_value_node&>(*e);
        if (!p.int_value) return "R.prim_value(" + float_text(p.float_value, p.dt) + ", " + quote(name(p.dt)) + ")";
        if (p.dt == dtype::int64) return "R.prim_value(" + dim(p.int_value) + ")";
        return "R.prim_value(" + dim(p.int_value) + ", " + quote(name(p.dt)) + ")";
      }
      case node_kind::string_imm: return "R.str(" + quote(static_cast<const string_imm_node&>(*e).value) + ")";
      case node_kind::if_:
        throw error("kiln::ir::print: an if expression must be bound to a variable to be printed (bind it with block_builder::emit)");
      case node_kind::seq:
        throw error("kiln::ir::print: a sequence expression can only be a function body or an if branch");
      default: throw error("kiln::ir::print: not an expression node");
    }
  }

  std::string call(const call_node& c) {
    if (auto* o = dyn_cast<op_node>(c.callee)) {
      std::string s = "R." + o->name() + "(" + list(c.args);
      for (auto& f : o->attr_schema()) {
        const attr_value* v = c.attrs.find(f.name);
        if (!v || *v == f.default_value) continue;
        s += ", " + f.name + "=" + attr_text(*v);
      }
      if (!c.type_args.empty()) s += (o->name() == "call_tir" || o->name() == "call_dps_packed" ? ", out_sinfo=" : ", type_args=") + type_list(c.type_args);
      return s + ")";
    }
    if (auto* x = dyn_cast<extern_func_node>(c.callee)) {
      std::string s = "R.call_packed(" + quote(x->symbol);
      for (auto& a : c.args) s += ", " + ex(a);
      return s + ", sinfo_args=" + type_list(c.type_args) + ")";
    }
    return ex(c.callee) + "(" + list(c.args) + ")";
  }

  std::string type_list(const std::vector<type>& ts) {
    if (ts.size() == 1) return ty(ts[0]);
    std::string s = "[";
    for (std::size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ty(ts[i]);
    return s + "]";
  }

  std::string scalar(const ndarray& a, std::size_t i) {
    switch (a.dt()) {
      case dtype::bool_: return a.element(i) != 0 ? "True" : "False";
      case dtype::float16:
      case dtype::float32:
      case dtype::float64: return float_text(a.element(i), a.dt());
      default: return std::to_string(a.element_int(i));
    }
  }

  std::string constant(const ndarray& a) {
    const std::string dt = quote(name(a.dt()));
    if (a.numel() > opt_.max_constant_elements) {
      std::size_t index = elided_++;
      if (opt_.elided_constants) opt_.elided_constants->push_back(a);
      return "R.const(meta[" + std::to_string(index) + "], " + dt + ", shape=(" + tuple_contents(a.shape()) + "))";
    }
    if (a.shape().empty()) return "R.const(" + scalar(a, 0) + ", " + dt + ")";
    bool has_zero = false;
    for (auto d : a.shape()) has_zero |= d == 0;
    if (has_zero) return "R.const([], " + dt + ", shape=(" + tuple_contents(a.shape()) + "))";
    std::size_t flat = 0;
    return "R.const(" + nested(a, 0, flat) + ", " + dt + ")";
  }
  std::string nested(const ndarray& a, std::size_t axis, std::size_t& flat) {
    std::string s = "[";
    for (std::int64_t i = 0; i < a.shape()[axis]; ++i) {
      if (i) s += ", ";
      if (axis + 1 == a.shape().size()) s += scalar(a, flat++);
      else s += nested(a, axis + 1, flat);
    }
    return s + "]";
  }

  print_options opt_;
  std::size_t elided_ = 0;
  std::string out_;
  std::unordered_map<const node*, std::string> names_;
  std::unordered_set<std::string> used_;
};

}  // namespace detail

/// The module in the text format.
inline std::string print(const ir_module& m, print_options opt = {}) { return detail::ir_printer(opt).module(m); }

/// One function, as it appears inside a module (without the class around it).
inline std::string print(const std::string& name, const base_func& f, print_options opt = {}) {
  return detail::ir_printer(opt).function(name, f);
}

/// An expression on one line (variables named by their hints); for messages and debugging.
inline std::string print(const expr& e, print_options opt = {}) { return detail::ir_printer(opt).expression(e); }

}  // namespace kiln::ir
