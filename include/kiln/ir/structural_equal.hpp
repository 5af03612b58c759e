// SPDX-License-Identifier: Apache-2.0
/// \file
/// Structural equality and hashing of IR, up to renaming of bound variables.
///
/// Two pieces of IR are structurally equal when they have the same shape and the same values,
/// with variables compared by where they are bound rather than by identity or name (alpha
/// equivalence): `fn(x) { y = x + 1; y }` equals `fn(a) { b = a + 1; b }`. Inside a function,
/// whose parameters define them, symbolic size variables are matched one-to-one in first-occurrence
/// order. Variables used without being bound in the compared IR (free variables) must be the same
/// object, and so must size variables outside a function: `R.shape([n])` and `R.shape([m])` within
/// one function are different values (TVM's `map_free_vars = false`). `structural_hash` is
/// consistent with `structural_equal`: equal IR hashes equally.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/ir/op.hpp>

#include <boost/container_hash/hash.hpp>

#include <unordered_map>

namespace kiln::ir {

namespace detail {

class equal_checker {
public:
  bool node_eq(const node* a, const node* b) {
    if (a == nullptr || b == nullptr) return a == b;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
      case node_kind::int_imm: return cast<int_imm_node>(a).value == cast<int_imm_node>(b).value;
      case node_kind::size_var: return map_size_var(a, b);
      case node_kind::prim_binary: {
        auto &x = cast<prim_binary_node>(a), &y = cast<prim_binary_node>(b);
        return x.op == y.op && node_eq(x.a.get(), y.a.get()) && node_eq(x.b.get(), y.b.get());
      }
      case node_kind::object_type: return true;
      case node_kind::prim_type: return cast<prim_type_node>(a).dt == cast<prim_type_node>(b).dt;
      case node_kind::shape_type: {
        auto &x = cast<shape_type_node>(a), &y = cast<shape_type_node>(b);
        return x.ndim == y.ndim && opt_list_eq(x.values, y.values);
      }
      case node_kind::tensor_type: {
        auto &x = cast<tensor_type_node>(a), &y = cast<tensor_type_node>(b);
        return x.dt == y.dt && x.ndim == y.ndim && opt_list_eq(x.shape, y.shape);
      }
      case node_kind::tuple_type: return list_eq(cast<tuple_type_node>(a).fields, cast<tuple_type_node>(b).fields);
      case node_kind::func_type: {
        auto &x = cast<func_type_node>(a), &y = cast<func_type_node>(b);
        return list_eq(x.params, y.params) && node_eq(x.ret.get(), y.ret.get());
      }
      case node_kind::var:
      case node_kind::dataflow_var: return var_use_eq(a, b);
      case node_kind::constant: return cast<constant_node>(a).data == cast<constant_node>(b).data;
      case node_kind::global_var: return cast<global_var_node>(a).name == cast<global_var_node>(b).name;
      case node_kind::op: return cast<op_node>(a).name() == cast<op_node>(b).name();
      case node_kind::extern_func: return cast<extern_func_node>(a).symbol == cast<extern_func_node>(b).symbol;
      case node_kind::call: {
        auto &x = cast<call_node>(a), &y = cast<call_node>(b);
        return node_eq(x.callee.get(), y.callee.get()) && list_eq(x.args, y.args) && x.attrs == y.attrs &&
               list_eq(x.type_args, y.type_args);
      }
      case node_kind::tuple: return list_eq(cast<tuple_node>(a).fields, cast<tuple_node>(b).fields);
      case node_kind::tuple_get_item: {
        auto &x = cast<tuple_get_item_node>(a), &y = cast<tuple_get_item_node>(b);
        return x.index == y.index && node_eq(x.tuple.get(), y.tuple.get());
      }
      case node_kind::if_: {
        auto &x = cast<if_node>(a), &y = cast<if_node>(b);
        return node_eq(x.cond.get(), y.cond.get()) && node_eq(x.then_branch.get(), y.then_branch.get()) &&
               node_eq(x.else_branch.get(), y.else_branch.get());
      }
      case node_kind::seq: {
        auto &x = cast<seq_expr_node>(a), &y = cast<seq_expr_node>(b);
        if (x.blocks.size() != y.blocks.size()) return false;
        for (std::size_t i = 0; i < x.blocks.size(); ++i)
          if (!block_eq(x.blocks[i], y.blocks[i])) return false;
        return node_eq(x.body.get(), y.body.get());
      }
      case node_kind::shape_expr: return list_eq(cast<shape_expr_node>(a).values, cast<shape_expr_node>(b).values);
      case node_kind::prim_value: {
        auto &x = cast<prim_value_node>(a), &y = cast<prim_value_node>(b);
        return x.dt == y.dt && node_eq(x.int_value.get(), y.int_value.get()) &&
               (x.int_value ? true : std::memcmp(&x.float_value, &y.float_value, sizeof(double)) == 0);
      }
      case node_kind::string_imm: return cast<string_imm_node>(a).value == cast<string_imm_node>(b).value;
      case node_kind::function: {
        auto &x = cast<function_node>(a), &y = cast<function_node>(b);
        const in_function scope(*this);
        return x.attrs == y.attrs && defs_eq(x.params, y.params) && node_eq(x.ret_type.get(), y.ret_type.get()) &&
               node_eq(x.body.get(), y.body.get());
      }
      case node_kind::prim_func: {
        auto &x = cast<prim_func_node>(a), &y = cast<prim_func_node>(b);
        const in_function scope(*this);
        return x.attrs == y.attrs && x.num_outputs == y.num_outputs && defs_eq(x.params, y.params) &&
               node_eq(x.body.get(), y.body.get());
      }
      case node_kind::module: {
        auto &x = cast<ir_module_node>(a), &y = cast<ir_module_node>(b);
        if (!(x.attrs == y.attrs) || x.size() != y.size()) return false;
        for (std::size_t i = 0; i < x.size(); ++i) {
          if (x.functions()[i].gv->name != y.functions()[i].gv->name) return false;
          equal_checker fresh;  // each function binds its own variables
          if (!fresh.node_eq(x.functions()[i].func.get(), y.functions()[i].func.get())) return false;
        }
        return true;
      }
    }
    return false;
  }

private:
  template <class T>
  static const T& cast(const node* n) {
    return static_cast<const T&>(*n);
  }
  template <class T>
  bool list_eq(const std::vector<T>& a, const std::vector<T>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!node_eq(a[i].get(), b[i].get())) return false;
    return true;
  }
  template <class T>
  bool opt_list_eq(const std::optional<std::vector<T>>& a, const std::optional<std::vector<T>>& b) {
    if (a.has_value() != b.has_value()) return false;
    return !a || list_eq(*a, *b);
  }
  /// Marks the comparison of a function's parameters and body: size variables are defined there.
  struct in_function {
    explicit in_function(equal_checker& c) : c_(c) { ++c_.function_depth_; }
    ~in_function() { --c_.function_depth_; }
    in_function(const in_function&) = delete;
    in_function& operator=(const in_function&) = delete;
    equal_checker& c_;
  };
  bool map_size_var(const node* a, const node* b) {
    if (function_depth_ == 0) return a == b;  // free: the same variable
    auto ia = size_fwd_.find(a);
    auto ib = size_bwd_.find(b);
    if (ia == size_fwd_.end() && ib == size_bwd_.end()) {
      size_fwd_.emplace(a, b);
      size_bwd_.emplace(b, a);
      return true;
    }
    return ia != size_fwd_.end() && ia->second == b;
  }
  bool var_use_eq(const node* a, const node* b) {
    auto ia = var_fwd_.find(a);
    if (ia != var_fwd_.end()) return ia->second == b;
    return a == b && var_bwd_.find(b) == var_bwd_.end();  // free variable: must be the same object
  }
  /// A binding site: types must agree, then `a` stands for `b` from here on.
  bool def_eq(const var& a, const var& b) {
    if (a->kind != b->kind || !node_eq(a->checked_type.get(), b->checked_type.get())) return false;
    var_fwd_[a.get()] = b.get();
    var_bwd_[b.get()] = a.get();
    return true;
  }
  bool defs_eq(const std::vector<var>& a, const std::vector<var>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!def_eq(a[i], b[i])) return false;
    return true;
  }
  bool block_eq(const binding_block& a, const binding_block& b) {
    if (a.dataflow != b.dataflow || a.bindings.size() != b.bindings.size()) return false;
    for (std::size_t i = 0; i < a.bindings.size(); ++i) {
      auto &x = a.bindings[i], &y = b.bindings[i];
      if (!node_eq(x.value.get(), y.value.get()) || x.is_match_cast() != y.is_match_cast()) return false;
      if (x.is_match_cast() && !node_eq(x.cast_type.get(), y.cast_type.get())) return false;
      if (!def_eq(x.variable, y.variable)) return false;
    }
    return true;
  }

  std::unordered_map<const node*, const node*> var_fwd_, var_bwd_, size_fwd_, size_bwd_;
  int function_depth_ = 0;
};

class hasher {
public:
  std::size_t hash(const node* n) {
    std::size_t h = 0;
    if (!n) return 0x9e3779b9u;
    boost::hash_combine(h, static_cast<int>(n->kind));
    switch (n->kind) {
      case node_kind::int_imm: mix(h, cast<int_imm_node>(n).value); break;
      case node_kind::size_var:
        if (function_depth_ > 0) mix(h, index_of(size_ids_, n));
        else mix(h, reinterpret_cast<std::uintptr_t>(n));  // free: identity, as structural_equal compares it
        break;
      case node_kind::prim_binary: {
        auto& x = cast<prim_binary_node>(n);
        mix(h, static_cast<int>(x.op));
        mix(h, hash(x.a.get()));
        mix(h, hash(x.b.get()));
        break;
      }
      case node_kind::object_type: break;
      case node_kind::prim_type: mix(h, static_cast<int>(cast<prim_type_node>(n).dt)); break;
      case node_kind::shape_type: {
        auto& x = cast<shape_type_node>(n);
        mix(h, x.ndim);
        if (x.values) list(h, *x.values);
        break;
      }
      case node_kind::tensor_type: {
        auto& x = cast<tensor_type_node>(n);
        mix(h, static_cast<int>(x.dt));
        mix(h, x.ndim);
        if (x.shape) list(h, *x.shape);
        break;
      }
      case node_kind::tuple_type: list(h, cast<tuple_type_node>(n).fields); break;
      case node_kind::func_type:
        list(h, cast<func_type_node>(n).params);
        mix(h, hash(cast<func_type_node>(n).ret.get()));
        break;
      case node_kind::var:
      case node_kind::dataflow_var: {
        auto it = var_ids_.find(n);
        if (it != var_ids_.end()) mix(h, it->second);
        else mix(h, reinterpret_cast<std::uintptr_t>(n));  // free variable: identity
        break;
      }
      case node_kind::constant: {
        auto& d = cast<constant_node>(n).data;
        mix(h, static_cast<int>(d.dt()));
        for (auto s : d.shape()) mix(h, s);
        mix(h, d.content_hash());
        break;
      }
      case node_kind::global_var: mix(h, cast<global_var_node>(n).name); break;
      case node_kind::op: mix(h, cast<op_node>(n).name()); break;
      case node_kind::extern_func: mix(h, cast<extern_func_node>(n).symbol); break;
      case node_kind::call: {
        auto& x = cast<call_node>(n);
        mix(h, hash(x.callee.get()));
        list(h, x.args);
        attrs(h, x.attrs);
        list(h, x.type_args);
        break;
      }
      case node_kind::tuple: list(h, cast<tuple_node>(n).fields); break;
      case node_kind::tuple_get_item:
        mix(h, cast<tuple_get_item_node>(n).index);
        mix(h, hash(cast<tuple_get_item_node>(n).tuple.get()));
        break;
      case node_kind::if_: {
        auto& x = cast<if_node>(n);
        mix(h, hash(x.cond.get()));
        mix(h, hash(x.then_branch.get()));
        mix(h, hash(x.else_branch.get()));
        break;
      }
      case node_kind::seq: {
        auto& x = cast<seq_expr_node>(n);
        for (auto& b : x.blocks) {
          mix(h, b.dataflow);
          for (auto& bd : b.bindings) {
            mix(h, hash(bd.value.get()));
            mix(h, bd.is_match_cast());
            if (bd.cast_type) mix(h, hash(bd.cast_type.get()));
            def(h, bd.variable);
          }
        }
        mix(h, hash(x.body.get()));
        break;
      }
      case node_kind::shape_expr: list(h, cast<shape_expr_node>(n).values); break;
      case node_kind::prim_value: {
        auto& x = cast<prim_value_node>(n);
        mix(h, static_cast<int>(x.dt));
        if (x.int_value) mix(h, hash(x.int_value.get()));
        else mix(h, std::bit_cast<std::uint64_t>(x.float_value));
        break;
      }
      case node_kind::string_imm: mix(h, cast<string_imm_node>(n).value); break;
      case node_kind::function: {
        auto& x = cast<function_node>(n);
        ++function_depth_;
        attrs(h, x.attrs);
        for (auto& p : x.params) def(h, p);
        mix(h, hash(x.ret_type.get()));
        mix(h, hash(x.body.get()));
        --function_depth_;
        break;
      }
      case node_kind::prim_func: {
        auto& x = cast<prim_func_node>(n);
        ++function_depth_;
        attrs(h, x.attrs);
        mix(h, x.num_outputs);
        for (auto& p : x.params) def(h, p);
        mix(h, hash(x.body.get()));
        --function_depth_;
        break;
      }
      case node_kind::module: {
        auto& x = cast<ir_module_node>(n);
        attrs(h, x.attrs);
        for (auto& e : x.functions()) {
          mix(h, e.gv->name);
          hasher fresh;
          mix(h, fresh.hash(e.func.get()));
        }
        break;
      }
    }
    return h;
  }

private:
  template <class T>
  static const T& cast(const node* n) {
    return static_cast<const T&>(*n);
  }
  template <class V>
  static void mix(std::size_t& h, const V& v) {
    boost::hash_combine(h, v);
  }
  template <class T>
  void list(std::size_t& h, const std::vector<T>& v) {
    mix(h, v.size());
    for (auto& x : v) mix(h, hash(x.get()));
  }
  static void attrs(std::size_t& h, const attr_map& a) {
    for (auto& [k, v] : a) {
      mix(h, k);
      mix(h, static_cast<int>(v.kind()));
      std::visit(
          [&](const auto& x) {
            using X = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<X, std::monostate>) mix(h, 0);
            else if constexpr (std::is_same_v<X, dtype>) mix(h, static_cast<int>(x));
            else if constexpr (std::is_same_v<X, double>) mix(h, std::bit_cast<std::uint64_t>(x));
            else if constexpr (std::is_same_v<X, int_array>) mix(h, boost::hash_range(x.begin(), x.end()));
            else if constexpr (std::is_same_v<X, float_array>)
              for (double d : x) mix(h, std::bit_cast<std::uint64_t>(d));
            else if constexpr (std::is_same_v<X, int_dict>)
              for (auto& [k, n] : x) mix(h, k), mix(h, n);
            else mix(h, x);
          },
          v.raw());
    }
  }
  static std::size_t index_of(std::unordered_map<const node*, std::size_t>& ids, const node* n) {
    return ids.emplace(n, ids.size()).first->second;
  }
  void def(std::size_t& h, const var& v) {
    mix(h, static_cast<int>(v->kind));
    mix(h, hash(v->checked_type.get()));
    var_ids_[v.get()] = next_var_++;
  }

  std::unordered_map<const node*, std::size_t> var_ids_, size_ids_;
  int function_depth_ = 0;  // > 0 while hashing a function: its size variables are numbered
  std::size_t next_var_ = 0;
};

}  // namespace detail

/// True when `a` and `b` are the same IR up to the names of bound variables.
template <class A, class B>
bool structural_equal(const ref<A>& a, const ref<B>& b) {
  return detail::equal_checker().node_eq(a.get(), b.get());
}

/// A hash of the IR's structure, consistent with `structural_equal`.
template <class T>
std::size_t structural_hash(const ref<T>& a) {
  return detail::hasher().hash(a.get());
}

/// Function objects for hashed containers keyed by structure (e.g. common-subexpression tables).
struct structural_hash_fn {
  template <class T>
  std::size_t operator()(const ref<T>& a) const {
    return structural_hash(a);
  }
};
struct structural_equal_fn {
  template <class T>
  bool operator()(const ref<T>& a, const ref<T>& b) const {
    return structural_equal(a, b);
  }
};

}  // namespace kiln::ir
