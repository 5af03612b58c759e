// SPDX-License-Identifier: Apache-2.0
/// \file
/// `to_dot`: a module as a Graphviz graph, for looking at (MLIR's `--view-op-graph`; TVM users
/// open models in Netron).
///
/// \code
/// std::ofstream("model.dot") << kiln::ir::to_dot(module);   // then: dot -Tsvg model.dot -o model.svg
/// \endcode
///
/// Each function is a cluster; each parameter, binding and constant is a node, with an edge from
/// every value a binding uses to the binding. A binding's label is its variable, what it calls
/// (`R.nn.conv2d`, the kernel symbol of a `call_dps_packed`, `@function`) and its type. A fused
/// kernel (a call whose arguments carry a fused expression, `"(relu (add x0 x1)) ; a b"`) is a
/// cluster of its own, with one node per operator it fuses. Kernel functions (`prim_func`) are one
/// node each.
#pragma once

#include <kiln/ir/function.hpp>
#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/ir/printer.hpp>

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::ir {

struct dot_options {
  /// Labels longer than this are cut with "...".
  std::size_t max_label = 96;
  /// Show each binding's type on a second line of its label.
  bool show_types = true;
};

namespace detail {

class dot_writer {
public:
  explicit dot_writer(dot_options opt) : opt_(opt) {}

  std::string module(const ir_module& m) {
    out_ = "digraph kiln {\n  compound=true;\n  node [shape=box, style=rounded, fontname=\"monospace\", fontsize=10];\n"
           "  edge [arrowsize=0.6];\n";
    std::size_t index = 0;
    for (const auto& e : m->functions()) {
      const std::string cluster = "f" + std::to_string(index++);
      if (auto* f = dyn_cast<function_node>(e.func))
        function(cluster, e.gv->name, *f);
      else
        out_ += "  " + cluster + " [shape=component, label=" + quote("@" + e.gv->name + " (kernel function)") + "];\n";
    }
    return out_ + "}\n";
  }

private:
  void function(const std::string& id, const std::string& name, const function_node& f) {
    out_ += "  subgraph cluster_" + id + " {\n    label=" + quote("@" + name) + ";\n    fontname=\"monospace\";\n";
    prefix_ = id;
    for (const var& p : f.params) {
      const std::string n = node_id();
      ids_[p.get()] = n;
      out_ += "    " + n + " [shape=ellipse, label=" + quote(labelled(p->name_hint, p->checked_type)) + "];\n";
    }
    body(f.body);
    out_ += "  }\n";
  }

  void body(const expr& e) {
    if (auto* s = dyn_cast<seq_expr_node>(e)) {
      for (const binding_block& block : s->blocks)
        for (const binding& b : block.bindings) bind(b);
      const std::string ret = node_id();
      out_ += "    " + ret + " [shape=plaintext, label=\"return\"];\n";
      edges_into(s->body, ret);
      return;
    }
    const std::string ret = node_id();
    out_ += "    " + ret + " [shape=plaintext, label=\"return\"];\n";
    edges_into(e, ret);
  }

  void bind(const binding& b) {
    const std::string n = node_id();
    std::string what = callee_text(b.value);
    if (b.is_match_cast()) what = "R.match_cast(" + what + ")";
    const std::string label = labelled(b.variable->name_hint + " = " + what, b.is_match_cast() ? b.cast_type : b.variable->checked_type);
    if (const std::string fused = fused_expression(b.value); !fused.empty()) {
      out_ += "    subgraph cluster_" + n + " {\n      label=" + quote("fused: " + callee_text(b.value)) +
              ";\n      style=dashed;\n      " + n + " [label=" + quote(label) + "];\n";
      fused_ops(fused, n);
      out_ += "    }\n";
    } else {
      out_ += "    " + n + " [label=" + quote(label) + "];\n";
    }
    edges_into(b.value, n);
    ids_[b.variable.get()] = n;
  }

  /// Edges into node `to` from what `e` uses: its variables and constants, and, for an operand
  /// that is itself a call (`R.nn.relu(R.add(x, b))`), a node of its own with its operands.
  void edges_into(const expr& e, const std::string& to) {
    std::unordered_set<const expr_node*> seen;
    operands(e, to, seen, true);
  }
  void operands(const expr& e, const std::string& to, std::unordered_set<const expr_node*>& seen, bool top) {
    if (!e) return;
    if (isa<var_node>(e)) {
      auto it = ids_.find(e.get());
      if (it != ids_.end() && seen.insert(e.get()).second) out_ += "    " + it->second + " -> " + to + ";\n";
      return;
    }
    if (auto* c = dyn_cast<constant_node>(e)) {
      if (!seen.insert(e.get()).second) return;
      auto it = ids_.find(e.get());
      if (it == ids_.end()) {
        const std::string n = node_id();
        it = ids_.emplace(e.get(), n).first;
        std::string shape;
        for (std::size_t i = 0; i < c->data.shape().size(); ++i) shape += (i ? ", " : "") + std::to_string(c->data.shape()[i]);
        out_ += "    " + n + " [shape=note, fontsize=8, label=" + quote("const (" + shape + ") " + std::string(name(c->data.dt()))) + "];\n";
      }
      out_ += "    " + it->second + " -> " + to + ";\n";
      return;
    }
    if (auto* call = dyn_cast<call_node>(e)) {
      if (!top) {  // a nested call: a node of its own
        const std::string n = node_id();
        out_ += "    " + n + " [label=" + quote(labelled(callee_text(e), e->checked_type)) + "];\n";
        out_ += "    " + n + " -> " + to + ";\n";
        std::unordered_set<const expr_node*> inner;
        operands(e, n, inner, true);
        return;
      }
      if (isa<var_node>(call->callee)) operands(call->callee, to, seen, false);
      for (const expr& a : call->args) operands(a, to, seen, false);
      return;
    }
    if (auto* t = dyn_cast<tuple_node>(e)) {
      for (const expr& f : t->fields) operands(f, to, seen, false);
      return;
    }
    if (auto* g = dyn_cast<tuple_get_item_node>(e)) return operands(g->tuple, to, seen, false);
    if (auto* i = dyn_cast<if_node>(e)) return operands(i->cond, to, seen, false);
    // shapes, prim values, strings, functions: not data flow
  }

  /// What a binding computes, in a few words.
  static std::string callee_text(const expr& e) {
    auto* c = dyn_cast<call_node>(e);
    if (!c) {
      if (isa<tuple_node>(e)) return "tuple";
      if (auto* t = dyn_cast<tuple_get_item_node>(e)) return "[" + std::to_string(t->index) + "]";
      if (isa<if_node>(e)) return "R.If";
      if (isa<constant_node>(e)) return "const";
      if (auto* v = dyn_cast<var_node>(e)) return v->name_hint;
      return print(e, print_options::readable());
    }
    if (auto* o = dyn_cast<op_node>(c->callee)) {
      std::string s = "R." + o->name();
      if (!c->args.empty()) {  // call_tir, call_dps_packed, call_builtin_with_ctx: the target
        if (auto* x = dyn_cast<extern_func_node>(c->args[0])) s += " " + x->symbol;
        else if (auto* g = dyn_cast<global_var_node>(c->args[0])) s += " @" + g->name;
      }
      return s;
    }
    if (auto* g = dyn_cast<global_var_node>(c->callee)) return "@" + g->name;
    if (auto* x = dyn_cast<extern_func_node>(c->callee)) return x->symbol;
    if (auto* v = dyn_cast<var_node>(c->callee)) return v->name_hint + "(...)";
    return "call";
  }

  /// The fused expression a call carries (`"(relu (add x0 x1)) ; a b"`), or empty.
  static std::string fused_expression(const expr& e) {
    auto* c = dyn_cast<call_node>(e);
    if (!c) return {};
    auto look = [](const std::vector<expr>& args) -> std::string {
      for (const expr& a : args)
        if (auto* s = dyn_cast<string_imm_node>(a); s && s->value.size() > 2 && s->value[0] == '(') return s->value;
      return {};
    };
    std::string found = look(c->args);
    if (found.empty())
      for (const expr& a : c->args)
        if (auto* t = dyn_cast<tuple_node>(a)) found = look(t->fields);
    return found;
  }

  /// One node per operator of an s-expression, edges from operands to their operator, and from
  /// the outermost operator(s) to `root`.
  void fused_ops(const std::string& text, const std::string& root) {
    const std::string_view s = std::string_view(text).substr(0, text.find(';'));
    std::size_t at = 0;
    std::vector<std::string> stack;  // the open operators' nodes
    while (at < s.size()) {
      if (s[at] == '(') {
        std::size_t end = ++at;
        while (end < s.size() && s[end] != ' ' && s[end] != '(' && s[end] != ')') ++end;
        const std::string n = node_id();
        out_ += "      " + n + " [shape=plain, fontsize=9, label=" + quote(std::string(s.substr(at, end - at))) + "];\n";
        out_ += "      " + n + " -> " + (stack.empty() ? root : stack.back()) + " [style=dotted];\n";
        stack.push_back(n);
        at = end;
      } else if (s[at] == ')') {
        if (!stack.empty()) stack.pop_back();
        ++at;
      } else {
        ++at;
      }
    }
  }

  std::string labelled(const std::string& head, const type& t) const {
    std::string s = head;
    if (opt_.show_types && t) {
      std::string ty = to_string(t);
      std::string compact;  // R.Tensor((2, 4), "float32") -> Tensor((2, 4), float32)
      for (std::size_t i = 0; i < ty.size(); ++i) {
        if (ty.compare(i, 2, "R.") == 0 && (i == 0 || !std::isalnum(static_cast<unsigned char>(ty[i - 1])))) {
          ++i;
          continue;
        }
        if (ty[i] != '"') compact += ty[i];
      }
      s += "\n" + compact;
    }
    return s;
  }

  std::string quote(const std::string& text) const {
    std::string s = "\"";
    std::size_t shown = 0;
    for (char ch : text) {
      if (shown++ == opt_.max_label) {
        s += "...";
        break;
      }
      if (ch == '"' || ch == '\\') s += '\\';
      if (ch == '\n') {
        s += "\\n";
        shown = 0;
        continue;
      }
      if (static_cast<unsigned char>(ch) < 0x20) continue;
      s += ch;
    }
    return s + "\"";
  }

  std::string node_id() { return prefix_ + "n" + std::to_string(next_++); }

  dot_options opt_;
  std::string out_, prefix_;
  std::size_t next_ = 0;
  std::unordered_map<const expr_node*, std::string> ids_;
};

}  // namespace detail

/// The module as a Graphviz `digraph` (see the file comment).
inline std::string to_dot(const ir_module& m, dot_options opt = {}) { return detail::dot_writer(opt).module(m); }

}  // namespace kiln::ir
