// SPDX-License-Identifier: Apache-2.0
/// \file
/// Operator definitions and the registry's classes: `op_node`, attribute schemas, `call_context`
/// for inference rules, `op_registry`. Include `kiln/ir/op.hpp` to use them: it adds kiln's
/// built-in operators, `op_registry::global()` and `call_op`.
///
/// An operator is registered once, by name, with its argument names, a schema for its attributes
/// (name, kind, default) and a rule that computes the result type of a call from the argument
/// types and attributes. `call_op` looks the operator up, checks and completes the attributes
/// against the schema, runs the rule, and returns the call with its type. Every failure is a
/// `type_error` whose message starts with the operator's name and names the argument at fault.
///
/// The registry is process-wide and thread-safe; user code registers its own operators through
/// `op_registry::global().add(...)`.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/support/strings.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>

namespace kiln::ir {

/// How an operator combines with others under operator fusion (TVM's OpPatternKind).
enum class op_pattern : std::uint8_t {
  elemwise,          ///< out[i] = f(in[i])
  broadcast,         ///< elementwise with numpy broadcasting
  injective,         ///< each output element reads one input element (reshape, transpose, ...)
  reduction,         ///< commutative reduction over axes
  out_elemwise_fusable,  ///< complex op whose output can take elementwise epilogues (matmul, conv)
  opaque,            ///< not fusable
};

/// One attribute an operator accepts.
struct attr_field {
  std::string name;
  attr_kind kind;
  attr_value default_value;  ///< used when the call does not give the attribute
  bool required = false;     ///< the call must give it
  bool nullable = false;     ///< None is an accepted value
};

class op_node;

/// What an inference rule sees of a call, with helpers that produce uniform error messages.
class call_context {
public:
  call_context(const op_node& op, const std::vector<expr>& args, const attr_map& attrs, const std::vector<type>& type_args)
      : op_(op), args_(args), attrs_(attrs), type_args_(type_args) {}

  const op_node& op() const noexcept { return op_; }
  const std::vector<expr>& args() const noexcept { return args_; }
  const attr_map& attrs() const noexcept { return attrs_; }
  const std::vector<type>& type_args() const noexcept { return type_args_; }
  const type& arg_type(std::size_t i) const { return args_[i]->checked_type; }

  /// The name of argument `i` as the error messages give it: `'weight' (#2)`.
  std::string arg_label(std::size_t i) const;
  /// Throws a `type_error` that starts with the operator's name.
  [[noreturn]] void fail(const std::string& message) const;
  /// Throws a `type_error` about argument `i`.
  [[noreturn]] void fail_arg(std::size_t i, const std::string& message) const { fail("argument " + arg_label(i) + " " + message); }

  /// Argument `i`'s type as a tensor type; fails if it is not a tensor.
  const tensor_type_node& tensor(std::size_t i) const {
    auto* t = dyn_cast<tensor_type_node>(arg_type(i));
    if (!t) fail_arg(i, "must be a tensor, but has type " + to_string(arg_type(i)));
    return *t;
  }
  /// Argument `i`'s type as a tensor of known rank; fails otherwise.
  const tensor_type_node& ranked_tensor(std::size_t i) const {
    auto& t = tensor(i);
    if (t.ndim < 0) fail_arg(i, "must have a known rank, but has type " + to_string(arg_type(i)));
    return t;
  }

  template <class T>
  const T& attr(const std::string& key) const {
    return attrs_.find(key)->as<T>();
  }
  bool attr_is_none(const std::string& key) const { return attrs_.find(key)->is_none(); }

private:
  const op_node& op_;
  const std::vector<expr>& args_;
  const attr_map& attrs_;
  const std::vector<type>& type_args_;
};

using infer_rule = std::function<type(const call_context&)>;

/// A registered operator. As an expression it is the callee of a call.
class op_node final : public expr_node {
public:
  struct info {
    std::string name;
    std::vector<std::string> arg_names;
    std::vector<attr_field> attrs;
    infer_rule infer;
    op_pattern pattern = op_pattern::opaque;
    std::string description;
    /// Number of explicit result types (`type_args`) a call must give; 0 for ordinary operators.
    std::size_t num_type_args = 0;
  };

  explicit op_node(info i) : expr_node(node_kind::op, object_type()), info_(std::move(i)) {}
  static bool classof(const node& n) noexcept { return n.kind == node_kind::op; }

  const std::string& name() const noexcept { return info_.name; }
  const std::vector<std::string>& arg_names() const noexcept { return info_.arg_names; }
  const std::vector<attr_field>& attr_schema() const noexcept { return info_.attrs; }
  op_pattern pattern() const noexcept { return info_.pattern; }
  const std::string& description() const noexcept { return info_.description; }
  std::size_t num_type_args() const noexcept { return info_.num_type_args; }

  const attr_field* find_attr(const std::string& key) const {
    for (auto& f : info_.attrs)
      if (f.name == key) return &f;
    return nullptr;
  }
  /// The result type of a call with these (already normalised) arguments and attributes.
  type infer(const std::vector<expr>& args, const attr_map& attrs, const std::vector<type>& type_args) const {
    return info_.infer(call_context(*this, args, attrs, type_args));
  }

  /// Checks `given` against the schema and returns the complete attribute map (defaults filled
  /// in, ints widened to floats, dtype names parsed). Throws a `type_error` naming the attribute.
  attr_map normalize_attrs(const attr_map& given) const {
    for (auto& [key, value] : given)
      if (!find_attr(key)) {
        std::string known;
        for (auto& f : info_.attrs) known += (known.empty() ? "" : ", ") + f.name;
        throw type_error(name() + ": unknown attribute '" + key + "'; " +
                         (known.empty() ? std::string("it takes no attributes") : "its attributes are: " + known));
      }
    attr_map out;
    for (auto& f : info_.attrs) {
      const attr_value* v = given.find(f.name);
      if (!v) {
        if (f.required) throw type_error(name() + ": attribute '" + f.name + "' is required");
        out.set(f.name, f.default_value);
        continue;
      }
      out.set(f.name, coerce(f, *v));
    }
    return out;
  }

private:
  attr_value coerce(const attr_field& f, const attr_value& v) const {
    if (v.kind() == f.kind) return v;
    if (v.is_none() && f.nullable) return v;
    if (f.kind == attr_kind::floating && v.kind() == attr_kind::integer) return static_cast<double>(v.as<std::int64_t>());
    if (f.kind == attr_kind::data_type && v.kind() == attr_kind::string) {
      if (auto d = parse_dtype(v.as<std::string>())) return *d;
      throw type_error(name() + ": attribute '" + f.name + "' must be a dtype name, not \"" + v.as<std::string>() + "\"");
    }
    if (f.kind == attr_kind::ints && v.kind() == attr_kind::integer) return int_array{v.as<std::int64_t>()};
    if (f.kind == attr_kind::floats && v.kind() == attr_kind::ints) {  // [1, 2] where floats are wanted
      const auto& a = v.as<int_array>();
      return float_array(a.begin(), a.end());
    }
    if (f.kind == attr_kind::floats && (v.kind() == attr_kind::floating || v.kind() == attr_kind::integer))
      return float_array{v.kind() == attr_kind::floating ? v.as<double>() : static_cast<double>(v.as<std::int64_t>())};
    throw type_error(name() + ": attribute '" + f.name + "' must be " + ::kiln::ir::name(f.kind) +
                     (f.nullable ? " or None" : "") + ", but a " + ::kiln::ir::name(v.kind()) + " was given");
  }

  info info_;
};
using op = ref<op_node>;

inline std::string call_context::arg_label(std::size_t i) const {
  const auto& names = op_.arg_names();
  return "'" + (i < names.size() ? names[i] : std::string("arg")) + "' (#" + std::to_string(i + 1) + ")";
}
inline void call_context::fail(const std::string& message) const { throw type_error(op_.name() + ": " + message); }

/// The process-wide operator table.
class op_registry {
public:
  /// The registry holding kiln's built-in operators and any the program added.
  static op_registry& global();

  /// Registers an operator; an error if the name is taken.
  op add(op_node::info i) {
    std::unique_lock lock(mutex_);
    if (ops_.count(i.name)) throw error("kiln::ir::op_registry: operator '" + i.name + "' is already registered");
    if (!i.infer) throw error("kiln::ir::op_registry: operator '" + i.name + "' needs a type inference rule");
    std::string n = i.name;
    op o = make_ref<op_node>(std::move(i));
    ops_.emplace(std::move(n), o);
    return o;
  }
  /// The operator named `name`, or null.
  op find(const std::string& name) const {
    std::shared_lock lock(mutex_);
    auto it = ops_.find(name);
    return it == ops_.end() ? op() : it->second;
  }
  /// The operator named `name`; an error listing close names if there is none.
  op get(const std::string& name) const {
    if (op o = find(name)) return o;
    throw error("kiln::ir: unknown operator '" + name + "'" + kiln::detail::did_you_mean(name, names()));
  }
  /// Names of all registered operators, sorted.
  std::vector<std::string> names() const {
    std::shared_lock lock(mutex_);
    std::vector<std::string> r;
    for (auto& [k, v] : ops_) r.push_back(k);
    std::sort(r.begin(), r.end());
    return r;
  }

private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, op> ops_;
};

namespace detail {
/// Binds the size variables of `param` to what `arg` has in the same places; false on a provable
/// mismatch.
inline bool bind_dims(const type& param, const type& arg, std::vector<std::pair<const size_var_node*, prim_expr>>& binds,
                      std::string& why) {
  auto bind_list = [&](const std::vector<prim_expr>& p, const std::vector<prim_expr>& a) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      prim_expr want = substitute(p[i], [&](const size_var_node& v) -> prim_expr {
        for (auto& [k, val] : binds)
          if (k == &v) return val;
        return {};
      });
      if (auto* sv = dyn_cast<size_var_node>(want)) {
        binds.emplace_back(sv, a[i]);
        continue;
      }
      if (prove_not_equal(want, a[i])) {
        why = "dimension " + std::to_string(i) + " is " + to_string(a[i]) + " but " + to_string(want) + " is expected";
        return false;
      }
    }
    return true;
  };
  if (auto* pt = dyn_cast<tensor_type_node>(param)) {
    auto* at = dyn_cast<tensor_type_node>(arg);
    if (!at) return why = "a tensor is expected", false;
    if (is_known(pt->dt) && is_known(at->dt) && pt->dt != at->dt)
      return why = "dtype " + std::string(name(at->dt)) + " but " + std::string(name(pt->dt)) + " is expected", false;
    if (pt->ndim >= 0 && at->ndim >= 0 && pt->ndim != at->ndim)
      return why = "rank " + std::to_string(at->ndim) + " but rank " + std::to_string(pt->ndim) + " is expected", false;
    if (pt->shape && at->shape) return bind_list(*pt->shape, *at->shape);
    return true;
  }
  if (auto* ps = dyn_cast<shape_type_node>(param)) {
    auto* as = dyn_cast<shape_type_node>(arg);
    if (!as) return why = "a shape is expected", false;
    if (ps->ndim >= 0 && as->ndim >= 0 && ps->ndim != as->ndim) return why = "a shape of rank " + std::to_string(ps->ndim) + " is expected", false;
    if (ps->values && as->values) return bind_list(*ps->values, *as->values);
    return true;
  }
  if (auto* pt = dyn_cast<tuple_type_node>(param)) {
    auto* at = dyn_cast<tuple_type_node>(arg);
    if (!at || at->fields.size() != pt->fields.size()) return why = "a tuple of " + std::to_string(pt->fields.size()) + " fields is expected", false;
    for (std::size_t i = 0; i < pt->fields.size(); ++i)
      if (!bind_dims(pt->fields[i], at->fields[i], binds, why)) return false;
    return true;
  }
  if (param->kind == node_kind::object_type) return true;
  if (param->kind != arg->kind && arg->kind != node_kind::object_type) return why = "a " + to_string(param) + " is expected", false;
  return true;
}
}  // namespace detail

/// The result type of calling something of type `callee` with `args`: the parameter types are
/// matched against the arguments (binding the callee's size variables to the caller's dimensions)
/// and substituted into the return type. `what` names the callee in error messages.
inline type infer_call_result(const type& callee, const std::vector<expr>& args, const std::string& what) {
  auto* ft = dyn_cast<func_type_node>(callee);
  if (!ft) throw type_error(what + ": the callee has type " + to_string(callee) + ", which is not callable");
  if (ft->params.size() != args.size())
    throw type_error(what + ": expects " + std::to_string(ft->params.size()) + " arguments, but " +
                     std::to_string(args.size()) + " were given");
  std::vector<std::pair<const size_var_node*, prim_expr>> binds;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string why;
    if (!detail::bind_dims(ft->params[i], args[i]->checked_type, binds, why))
      throw type_error(what + ": argument #" + std::to_string(i + 1) + " has type " + to_string(args[i]->checked_type) +
                       ", which does not match parameter type " + to_string(ft->params[i]) + ": " + why);
  }
  return substitute(ft->ret, [&](const size_var_node& v) -> prim_expr {
    for (auto& [k, val] : binds)
      if (k == &v) return val;
    return {};
  });
}

}  // namespace kiln::ir
