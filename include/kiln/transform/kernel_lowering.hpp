// SPDX-License-Identifier: Apache-2.0
/// \file
/// How each operator call becomes a call of one of kiln's kernels: the table `legalize_ops`
/// lowers with, `fold_constant` and the reference evaluator run with.
///
/// A rule reads one call (its arguments, attributes and result type) and gives the kernel's
/// registered name and its arguments — the call's operands and its attributes as IR values:
///
///     R.sum(x, axis=[1], keepdims=True)   ->  kernels.sum(x, R.shape([1]), R.prim_value(True, "bool"), out)
///     R.nn.softmax(x, axis=-1)            ->  kernels.softmax(x, R.prim_value(-1), out)
///     R.reshape(x, R.shape([n, 16]))      ->  kernels.reshape_view(x, R.shape([n, 16]))   (returns a view)
///
/// Most kernels are destination-passing (the output, allocated by the caller, comes last and the
/// kernel returns nothing); `reshape` returns a view of its input instead, which memory planning
/// treats as an alias that keeps its source alive. The list of operands ends before the output:
/// the code that emits the call appends it.
///
/// The table is extensible: a user who registers an operator registers its lowering here too
/// (`kernel_lowering::global().add("my.op", rule)`), with a native of the same name in the VM's
/// function registry.
#pragma once

#include <kiln/ir/expr.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/support/error.hpp>

#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

namespace kiln::transform {

/// A call that has a lowering rule but cannot be lowered as it is (an unsupported attribute, an
/// unknown result shape, ...). The message says why, without the location (the caller adds it).
class lowering_error : public error {
public:
  using error::error;
};

/// What an operator call becomes.
struct kernel_call {
  enum class form : std::uint8_t {
    destination_passing,  ///< kernel(args..., out) writes the output(s) the caller allocated
    returns_view,         ///< kernel(args...) returns a view of its first argument
  };
  std::string kernel;           ///< the registered native, e.g. "kernels.add"
  std::vector<ir::expr> args;   ///< the operands before the output, as IR values
  form kind = form::destination_passing;
};

using lowering_rule = std::function<kernel_call(const ir::call_node&)>;

/// Operator name to lowering rule. Thread-safe.
class kernel_lowering {
public:
  /// The table holding the rules of kiln's built-in operators and any the program added.
  static kernel_lowering& global();

  /// Adds or replaces the rule of operator `op_name`.
  void add(std::string op_name, lowering_rule rule) {
    std::unique_lock lock(mutex_);
    rules_[std::move(op_name)] = std::move(rule);
  }
  /// The rule of operator `op_name`, or null.
  const lowering_rule* find(const std::string& op_name) const {
    std::shared_lock lock(mutex_);
    auto it = rules_.find(op_name);
    return it == rules_.end() ? nullptr : &it->second;
  }
  bool contains(const std::string& op_name) const { return find(op_name) != nullptr; }
  /// The operators that have a rule, sorted.
  std::vector<std::string> names() const {
    std::shared_lock lock(mutex_);
    std::vector<std::string> out;
    for (auto& [n, r] : rules_) out.push_back(n);
    return out;
  }

  /// The lowering of `call`, an operator call; a `lowering_error` when there is no rule or the rule
  /// refuses the call.
  kernel_call lower(const ir::call_node& call) const {
    auto* o = ir::dyn_cast<ir::op_node>(call.callee);
    if (!o) throw lowering_error("the callee is not an operator");
    const lowering_rule* rule = find(o->name());
    if (!rule) throw lowering_error("no kernel implements operator R." + o->name());
    return (*rule)(call);
  }

private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, lowering_rule> rules_;
};

// ---- building blocks for rules ------------------------------------------------------------------

namespace lower {

inline ir::expr integer(std::int64_t v) { return ir::make_prim_value(v); }
inline ir::expr boolean(bool v) { return ir::make_prim_value(v ? 1 : 0, dtype::bool_); }
inline ir::expr real(double v) { return ir::make_float_prim_value(v, dtype::float64); }
inline ir::expr string(std::string s) { return ir::make_string_imm(std::move(s)); }
inline ir::expr null() { return ir::call_op("null_value", {}); }
/// A list of floats as a float64 vector constant (None: the null value).
inline ir::expr reals(const ir::attr_value* v) {
  if (!v || v->is_none()) return null();
  const auto& a = v->as<ir::float_array>();
  return ir::make_constant(ir::ndarray::from<double>(dtype::float64, {static_cast<std::int64_t>(a.size())}, std::span<const double>(a)));
}
inline ir::expr ints(const ir::int_array& v) {
  std::vector<ir::prim_expr> d;
  for (auto x : v) d.push_back(ir::make_int(x));
  return ir::make_shape_expr(std::move(d));
}

template <class T>
const T& attr(const ir::call_node& c, const char* key) {
  return c.attrs.find(key)->as<T>();
}
inline bool attr_is_none(const ir::call_node& c, const char* key) {
  const ir::attr_value* v = c.attrs.find(key);
  return !v || v->is_none();
}

/// The dtype of the call's tensor result (an error when it is not a tensor of known dtype).
inline dtype result_dtype(const ir::call_node& c) {
  auto* t = ir::dyn_cast<ir::tensor_type_node>(c.checked_type);
  if (!t || !is_known(t->dt)) throw lowering_error("the result dtype is unknown (" + ir::to_string(c.checked_type) + ")");
  return t->dt;
}
/// The dtype of tensor argument `i`.
inline dtype arg_dtype(const ir::call_node& c, std::size_t i) {
  auto* t = ir::dyn_cast<ir::tensor_type_node>(c.args[i]->checked_type);
  return t ? t->dt : dtype::void_;
}

/// A destination-passing call of `kernel` with the call's own operands followed by `extra`.
inline kernel_call dps(std::string kernel, const ir::call_node& c, std::vector<ir::expr> extra = {}) {
  kernel_call k{std::move(kernel), c.args, kernel_call::form::destination_passing};
  k.args.insert(k.args.end(), extra.begin(), extra.end());
  return k;
}

}  // namespace lower

namespace detail {

inline void add_builtin_lowerings(kernel_lowering& t) {
  using namespace lower;
  using ir::call_node;
  auto same_name = [](std::string kernel) {
    return [kernel](const call_node& c) { return dps(kernel, c); };
  };
  for (const char* n : {"add", "subtract", "multiply", "divide", "floor_divide", "fmod", "power", "maximum", "minimum", "equal", "not_equal",
                        "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "where", "exp", "log", "sqrt",
                        "rsqrt", "tanh", "sigmoid", "erf", "negative", "abs", "logical_not", "sin", "cos", "tan", "asin",
                        "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round"})
    t.add(n, same_name(std::string("kernels.") + n));
  t.add("nn.relu", same_name("kernels.relu"));
  t.add("nn.gelu", [](const call_node& c) {
    return dps(attr<std::string>(c, "approximate") == "tanh" ? "kernels.gelu_tanh" : "kernels.gelu", c);
  });
  t.add("astype", same_name("kernels.cast"));
  t.add("clip", [](const call_node& c) {
    const double inf = std::numeric_limits<double>::infinity();
    return dps("kernels.clip", c, {real(c.attrs.get_or<double>("min", -inf)), real(c.attrs.get_or<double>("max", inf))});
  });

  // reductions
  for (const char* n : {"sum", "mean", "max", "min", "prod"})
    t.add(n, [kernel = std::string("kernels.") + n](const call_node& c) {
      const bool keepdims = attr<bool>(c, "keepdims");
      if (!attr_is_none(c, "axis") && attr<ir::int_array>(c, "axis").empty())  // reduces nothing
        return dps("kernels.copy", c);
      return dps(kernel, c, {attr_is_none(c, "axis") ? ints({}) : ints(attr<ir::int_array>(c, "axis")), boolean(keepdims)});
    });
  for (const char* n : {"argmax", "argmin"})
    t.add(n, [kernel = std::string("kernels.") + n](const call_node& c) {
      return dps(kernel, c, {attr_is_none(c, "axis") ? null() : integer(attr<std::int64_t>(c, "axis")), boolean(attr<bool>(c, "keepdims"))});
    });
  t.add("nn.softmax", [](const call_node& c) { return dps("kernels.softmax", c, {integer(attr<std::int64_t>(c, "axis"))}); });
  t.add("nn.log_softmax", [](const call_node& c) { return dps("kernels.log_softmax", c, {integer(attr<std::int64_t>(c, "axis"))}); });
  t.add("nn.layer_norm", [](const call_node& c) {
    return dps("kernels.layer_norm", c,
               {ints(attr<ir::int_array>(c, "axes")), real(attr<double>(c, "epsilon")), boolean(attr<bool>(c, "center")),
                boolean(attr<bool>(c, "scale"))});
  });

  // linear algebra and convolution
  auto same_dtype_out = [](const call_node& c, const char* op) {
    const dtype out = result_dtype(c), in = arg_dtype(c, 0);
    if (is_known(in) && out != in)
      throw lowering_error(std::string(op) + " with out_dtype " + std::string(name(out)) + " on " + std::string(name(in)) +
                           " operands has no kernel (the kernels compute in the operands' dtype); cast the operands instead");
  };
  t.add("matmul", [=](const call_node& c) {
    same_dtype_out(c, "matmul");
    return dps("kernels.matmul", c, {boolean(false), boolean(false)});
  });
  t.add("nn.conv2d", [=](const call_node& c) {
    same_dtype_out(c, "conv2d");
    kernel_call k{"kernels.conv2d", {c.args[0], c.args[1], null(), ints(attr<ir::int_array>(c, "strides")), ints(attr<ir::int_array>(c, "padding")),
                                     ints(attr<ir::int_array>(c, "dilation")), integer(attr<std::int64_t>(c, "groups"))}};
    return k;
  });
  t.add("nn.conv2d_transpose", [=](const call_node& c) {
    same_dtype_out(c, "conv2d_transpose");
    return dps("kernels.conv2d_transpose", c,
               {ints(attr<ir::int_array>(c, "strides")), ints(attr<ir::int_array>(c, "padding")), ints(attr<ir::int_array>(c, "output_padding")),
                ints(attr<ir::int_array>(c, "dilation")), integer(attr<std::int64_t>(c, "groups"))});
  });
  auto pool = [](const call_node& c, const char* kernel, bool avg) {
    kernel_call k{kernel, {c.args[0], ints(attr<ir::int_array>(c, "pool_size")), ints(attr<ir::int_array>(c, "strides")),
                           ints(attr<ir::int_array>(c, "padding")), ints(attr<ir::int_array>(c, "dilation")), boolean(attr<bool>(c, "ceil_mode"))}};
    if (avg) k.args.push_back(boolean(attr<bool>(c, "count_include_pad")));
    return k;
  };
  t.add("nn.max_pool2d", [=](const call_node& c) { return pool(c, "kernels.max_pool2d", false); });
  t.add("nn.avg_pool2d", [=](const call_node& c) { return pool(c, "kernels.avg_pool2d", true); });
  t.add("nn.adaptive_avg_pool2d", same_name("kernels.adaptive_avg_pool2d"));
  t.add("nn.global_avg_pool2d", same_name("kernels.global_avg_pool2d"));
  t.add("nn.pad", [](const call_node& c) {
    return dps("kernels.pad", c, {ints(attr<ir::int_array>(c, "pad_width")), string(attr<std::string>(c, "pad_mode")), real(attr<double>(c, "pad_value"))});
  });

  // data movement
  t.add("reshape", [](const call_node& c) {
    // The result's own shape (any -1 resolved, possibly symbolic) rather than the operand.
    ir::expr shape = c.args[1];
    if (auto* tt = ir::dyn_cast<ir::tensor_type_node>(c.checked_type); tt && tt->shape) shape = ir::make_shape_expr(*tt->shape);
    return kernel_call{"kernels.reshape_view", {c.args[0], shape}, kernel_call::form::returns_view};
  });
  t.add("permute_dims", [](const call_node& c) {
    return dps("kernels.permute_dims", c, {attr_is_none(c, "axes") ? ints({}) : ints(attr<ir::int_array>(c, "axes"))});
  });
  t.add("broadcast_to", [](const call_node& c) { return kernel_call{"kernels.broadcast_to", {c.args[0]}}; });
  t.add("concat", [](const call_node& c) { return dps("kernels.concat", c, {integer(attr<std::int64_t>(c, "axis"))}); });
  t.add("split", [](const call_node& c) { return dps("kernels.split", c, {integer(attr<std::int64_t>(c, "axis"))}); });
  t.add("strided_slice", [](const call_node& c) {
    return dps("kernels.strided_slice", c,
               {ints(attr<ir::int_array>(c, "axes")), ints(attr<ir::int_array>(c, "begin")), ints(attr<ir::int_array>(c, "end")),
                attr_is_none(c, "strides") ? ints({}) : ints(attr<ir::int_array>(c, "strides"))});
  });
  t.add("take", [](const call_node& c) {
    return dps("kernels.take", c, {attr_is_none(c, "axis") ? null() : integer(attr<std::int64_t>(c, "axis"))});
  });
  t.add("scatter_elements", [](const call_node& c) {
    return dps("kernels.scatter_elements", c, {integer(attr<std::int64_t>(c, "axis")), string(attr<std::string>(c, "reduction"))});
  });
  t.add("image.resize", [](const call_node& c) {
    return dps("kernels.resize", c,
               {reals(c.attrs.find("scales")), reals(c.attrs.find("roi")), string(attr<std::string>(c, "method")),
                string(attr<std::string>(c, "coordinate_transformation_mode")), string(attr<std::string>(c, "rounding_method")),
                real(attr<double>(c, "cubic_alpha")), boolean(attr<bool>(c, "cubic_exclude")), real(attr<double>(c, "extrapolation_value"))});
  });
  t.add("topk", [](const call_node& c) {
    return dps("kernels.topk", c,
               {integer(attr<std::int64_t>(c, "k")), integer(attr<std::int64_t>(c, "axis")), boolean(attr<bool>(c, "largest")),
                boolean(attr<bool>(c, "sorted"))});
  });
  t.add("gather_nd", [](const call_node& c) { return dps("kernels.gather_nd", c, {integer(attr<std::int64_t>(c, "batch_dims"))}); });
  t.add("scatter_nd", [](const call_node& c) { return dps("kernels.scatter_nd", c, {string(attr<std::string>(c, "reduction"))}); });
  t.add("gather_elements", [](const call_node& c) { return dps("kernels.gather_elements", c, {integer(attr<std::int64_t>(c, "axis"))}); });
  t.add("cumsum", [](const call_node& c) {
    return dps("kernels.cumsum", c,
               {attr_is_none(c, "axis") ? null() : integer(attr<std::int64_t>(c, "axis")), boolean(attr<bool>(c, "exclusive")),
                boolean(attr<bool>(c, "reverse"))});
  });
}

}  // namespace detail

inline kernel_lowering& kernel_lowering::global() {
  static kernel_lowering* t = [] {
    auto* table = new kernel_lowering;  // never destroyed: rules may be used during static destruction
    detail::add_builtin_lowerings(*table);
    return table;
  }();
  return *t;
}

}  // namespace kiln::transform
