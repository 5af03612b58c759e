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
#include <kiln/kernels/calling_convention.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>

#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
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

namespace arg = kernels::abi::arg;

/// The null value, for an optional argument (`arg::tensor_or_null`, `arg::integer_or_null`, ...).
struct null_kind {};

/// An IR value of a known argument kind (`kernels/calling_convention.hpp`): what the helpers below
/// make, so that `call` can check each against the kernel's signature. An untyped `ir::expr` (an
/// operand of the call) is accepted where the signature wants a tensor, a tuple of tensors or a
/// shape value.
template <class Kind>
struct typed {
  ir::expr value;
  operator ir::expr() const& { return value; }  // NOLINT: implicit on purpose, into argument lists
  operator ir::expr() && { return std::move(value); }
};

inline typed<arg::integer> integer(std::int64_t v) { return {ir::make_prim_value(v)}; }
inline typed<arg::boolean> boolean(bool v) { return {ir::make_prim_value(v ? 1 : 0, dtype::bool_)}; }
inline typed<arg::real> real(double v) { return {ir::make_float_prim_value(v, dtype::float64)}; }
inline typed<arg::string> string(std::string s) { return {ir::make_string_imm(std::move(s))}; }
inline typed<null_kind> null() { return {ir::call_op("null_value", {})}; }
inline typed<arg::integer_or_null> integer_or_null(std::optional<std::int64_t> v) {
  return {v ? ir::make_prim_value(*v) : null().value};
}
/// A list of floats as a float64 vector constant (None: the null value).
inline typed<arg::reals_or_null> reals(const ir::attr_value* v) {
  if (!v || v->is_none()) return {null().value};
  const auto& a = v->as<ir::float_array>();
  return {ir::make_constant(ir::ndarray::from<double>(dtype::float64, {static_cast<std::int64_t>(a.size())}, std::span<const double>(a)))};
}
inline typed<arg::shape> ints(const ir::int_array& v) {
  std::vector<ir::prim_expr> d;
  for (auto x : v) d.push_back(ir::make_int(x));
  return {ir::make_shape_expr(std::move(d))};
}
/// `e`, an IR value known to be of kind `Kind` (an argument taken over from another call).
template <class Kind>
typed<Kind> as(ir::expr e) {
  return {std::move(e)};
}

namespace detail {
template <class Param, class A>
inline constexpr bool accepts = false;
// An operand of the call: a tensor, a tuple of tensors or a shape value.
template <class Param>
inline constexpr bool accepts<Param, ir::expr> =
    std::is_same_v<Param, arg::tensor> || std::is_same_v<Param, arg::tensor_or_null> || std::is_same_v<Param, arg::tensors> ||
    std::is_same_v<Param, arg::shape>;
template <class Param, class Kind>
inline constexpr bool accepts<Param, typed<Kind>> =
    std::is_same_v<Param, Kind> || (std::is_same_v<Kind, null_kind> && (std::is_same_v<Param, arg::tensor_or_null> ||
                                                                         std::is_same_v<Param, arg::integer_or_null> ||
                                                                         std::is_same_v<Param, arg::reals_or_null>)) ||
    (std::is_same_v<Kind, arg::integer> && std::is_same_v<Param, arg::integer_or_null>);

template <class K, std::size_t First, class... A, std::size_t... I>
consteval void check_args(std::index_sequence<I...>) {
  (
      [] {
        using param = std::tuple_element_t<First + I, typename K::args>;
        using given = std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>;
        static_assert(accepts<param, given>, "an argument of this kernel call does not have the kind its signature in "
                                             "kernels/calling_convention.hpp gives at this position");
      }(),
      ...);
}

template <class K>
constexpr bool ends_with_operands = K::arity > 0 && std::is_same_v<std::tuple_element_t<K::arity - 1, typename K::args>, arg::operands>;

template <class K>
kernel_call make_call(std::string name, std::vector<ir::expr> args) {
  return {std::move(name), std::move(args),
          K::returns == kernels::abi::result::returns_value ? kernel_call::form::returns_view : kernel_call::form::destination_passing};
}
}  // namespace detail

/// A call of kernel `K` with arguments `a...`: every argument the compiler gives, in the order and
/// of the kinds its signature states (all but the destination, which the caller of the kernel
/// appends, and a fused kernel's variadic operands, which `with_operands` appends).
template <kernels::abi::kernel_signature K, class... A>
kernel_call call(A&&... a) {
  static_assert(sizeof...(A) == K::given, "a kernel call with more or fewer arguments than its signature in "
                                          "kernels/calling_convention.hpp gives");
  detail::check_args<K, 0, A...>(std::index_sequence_for<A...>{});
  return detail::make_call<K>(std::string(K::name), {ir::expr(std::forward<A>(a))...});
}

/// A destination-passing call of kernel `K` with the call's own operands followed by `extra...`,
/// the attributes the signature lists after them.
template <kernels::abi::kernel_signature K, class... A>
kernel_call dps(const ir::call_node& c, A&&... extra) {
  static_assert(K::returns == kernels::abi::result::destination_passing, "dps: this kernel returns its result");
  static_assert(sizeof...(A) <= K::given, "a kernel call with more arguments than its signature in kernels/calling_convention.hpp gives");
  detail::check_args<K, K::given - sizeof...(A), A...>(std::index_sequence_for<A...>{});
  if (c.args.size() + sizeof...(A) != K::given)
    throw lowering_error(kiln::detail::concat("kernel ", K::name, " takes ", K::given - sizeof...(A), " operands before its attributes, the call has ",
                                              c.args.size()));
  kernel_call k = detail::make_call<K>(std::string(K::name), c.args);
  (k.args.push_back(ir::expr(std::forward<A>(extra))), ...);
  return k;
}
/// `dps` for the kernel named `name` of the family `K`.
template <kernels::abi::kernel_signature K>
kernel_call dps_named(std::string name, const ir::call_node& c) {
  static_assert(K::returns == kernels::abi::result::destination_passing, "dps: this kernel returns its result");
  if (c.args.size() != K::given)
    throw lowering_error(kiln::detail::concat("kernel ", name, " takes ", K::given, " operands, the call has ", c.args.size()));
  return detail::make_call<K>(std::move(name), c.args);
}

/// `k`, a call of a fused kernel (its signature ends with `arg::operands`), with the epilogue's
/// operands appended.
template <kernels::abi::kernel_signature K>
kernel_call with_operands(kernel_call k, const std::vector<ir::expr>& operands) {
  static_assert(detail::ends_with_operands<K>, "with_operands: this kernel takes no variadic operands");
  k.args.insert(k.args.end(), operands.begin(), operands.end());
  return k;
}

/// `k` as an IR call: `R.call_dps_packed(R.ExternFunc(kernel), (args...), out_sinfo=result)`, or,
/// for a kernel that returns its result, `R.call_packed(kernel, args..., sinfo_args=result)`.
inline ir::expr emit(kernel_call k, const ir::type& result) {
  if (k.kind == kernel_call::form::returns_view) return ir::call_extern(std::move(k.kernel), std::move(k.args), result);
  return ir::call_op("call_dps_packed", {ir::make_extern_func(std::move(k.kernel)), ir::make_tuple(std::move(k.args))}, {}, {result});
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


}  // namespace lower

namespace detail {

inline void add_builtin_lowerings(kernel_lowering& t) {
  using namespace lower;
  using ir::call_node;
  namespace abi = kernels::abi;
  auto attr_axis = [](const call_node& c, const char* key) {
    return integer_or_null(attr_is_none(c, key) ? std::nullopt : std::optional(attr<std::int64_t>(c, key)));
  };

  // elementwise: the operators of the same name as their kernels
  for (std::string_view n : abi::binary_operators) t.add(std::string(n), [k = "kernels." + std::string(n)](const call_node& c) { return dps_named<abi::binary>(k, c); });
  for (std::string_view n : abi::unary_operators) {
    if (n == "relu" || n.starts_with("gelu")) continue;  // nn.relu, nn.gelu below
    t.add(std::string(n), [k = "kernels." + std::string(n)](const call_node& c) { return dps_named<abi::unary>(k, c); });
  }
  t.add("where", [](const call_node& c) { return dps<abi::where>(c); });
  t.add("nn.relu", [](const call_node& c) { return dps_named<abi::unary>("kernels.relu", c); });
  t.add("nn.gelu", [](const call_node& c) {
    return dps_named<abi::unary>(attr<std::string>(c, "approximate") == "tanh" ? "kernels.gelu_tanh" : "kernels.gelu", c);
  });
  t.add("astype", [](const call_node& c) { return dps<abi::cast>(c); });
  t.add("clip", [](const call_node& c) {
    const double inf = std::numeric_limits<double>::infinity();
    return dps<abi::clip>(c, real(c.attrs.get_or<double>("min", -inf)), real(c.attrs.get_or<double>("max", inf)));
  });

  // reductions
  auto reduction = [](auto kernel) {
    return [](const call_node& c) {
      const bool keepdims = attr<bool>(c, "keepdims");
      if (!attr_is_none(c, "axis") && attr<ir::int_array>(c, "axis").empty())  // reduces nothing
        return dps<abi::copy>(c);
      return dps<typename decltype(kernel)::type>(c, attr_is_none(c, "axis") ? ints({}) : ints(attr<ir::int_array>(c, "axis")), boolean(keepdims));
    };
  };
  t.add("sum", reduction(std::type_identity<abi::sum>{}));
  t.add("mean", reduction(std::type_identity<abi::mean>{}));
  t.add("max", reduction(std::type_identity<abi::max>{}));
  t.add("min", reduction(std::type_identity<abi::min>{}));
  t.add("prod", reduction(std::type_identity<abi::prod>{}));
  t.add("argmax", [=](const call_node& c) { return dps<abi::argmax>(c, attr_axis(c, "axis"), boolean(attr<bool>(c, "keepdims"))); });
  t.add("argmin", [=](const call_node& c) { return dps<abi::argmin>(c, attr_axis(c, "axis"), boolean(attr<bool>(c, "keepdims"))); });
  t.add("nn.softmax", [](const call_node& c) { return dps<abi::softmax>(c, integer(attr<std::int64_t>(c, "axis"))); });
  t.add("nn.log_softmax", [](const call_node& c) { return dps<abi::log_softmax>(c, integer(attr<std::int64_t>(c, "axis"))); });
  t.add("nn.layer_norm", [](const call_node& c) {
    return dps<abi::layer_norm>(c, ints(attr<ir::int_array>(c, "axes")), real(attr<double>(c, "epsilon")), boolean(attr<bool>(c, "center")),
                                boolean(attr<bool>(c, "scale")));
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
    return dps<abi::matmul>(c, boolean(false), boolean(false));
  });
  t.add("nn.conv2d", [=](const call_node& c) {
    same_dtype_out(c, "conv2d");
    return call<abi::conv2d>(c.args[0], c.args[1], null(), ints(attr<ir::int_array>(c, "strides")), ints(attr<ir::int_array>(c, "padding")),
                             ints(attr<ir::int_array>(c, "dilation")), integer(attr<std::int64_t>(c, "groups")));
  });
  t.add("nn.conv2d_transpose", [=](const call_node& c) {
    same_dtype_out(c, "conv2d_transpose");
    return dps<abi::conv2d_transpose>(c, ints(attr<ir::int_array>(c, "strides")), ints(attr<ir::int_array>(c, "padding")),
                                      ints(attr<ir::int_array>(c, "output_padding")), ints(attr<ir::int_array>(c, "dilation")),
                                      integer(attr<std::int64_t>(c, "groups")));
  });
  auto window = [](const call_node& c, const char* key) { return ints(attr<ir::int_array>(c, key)); };
  t.add("nn.max_pool2d", [=](const call_node& c) {
    return call<abi::max_pool2d>(c.args[0], window(c, "pool_size"), window(c, "strides"), window(c, "padding"), window(c, "dilation"),
                                 boolean(attr<bool>(c, "ceil_mode")));
  });
  t.add("nn.avg_pool2d", [=](const call_node& c) {
    return call<abi::avg_pool2d>(c.args[0], window(c, "pool_size"), window(c, "strides"), window(c, "padding"), window(c, "dilation"),
                                 boolean(attr<bool>(c, "ceil_mode")), boolean(attr<bool>(c, "count_include_pad")));
  });
  t.add("nn.adaptive_avg_pool2d", [](const call_node& c) { return dps<abi::adaptive_avg_pool2d>(c); });
  t.add("nn.global_avg_pool2d", [](const call_node& c) { return dps<abi::global_avg_pool2d>(c); });
  t.add("nn.pad", [](const call_node& c) {
    return dps<abi::pad>(c, ints(attr<ir::int_array>(c, "pad_width")), string(attr<std::string>(c, "pad_mode")), real(attr<double>(c, "pad_value")));
  });

  // data movement
  t.add("reshape", [](const call_node& c) {
    // The result's own shape (any -1 resolved, possibly symbolic) rather than the operand.
    ir::expr shape = c.args[1];
    if (auto* tt = ir::dyn_cast<ir::tensor_type_node>(c.checked_type); tt && tt->shape) shape = ir::make_shape_expr(*tt->shape);
    return call<abi::reshape_view>(c.args[0], shape);
  });
  t.add("permute_dims", [](const call_node& c) {
    return dps<abi::permute_dims>(c, attr_is_none(c, "axes") ? ints({}) : ints(attr<ir::int_array>(c, "axes")));
  });
  t.add("broadcast_to", [](const call_node& c) { return call<abi::broadcast_to>(c.args[0]); });
  t.add("concat", [](const call_node& c) { return dps<abi::concat>(c, integer(attr<std::int64_t>(c, "axis"))); });
  t.add("split", [](const call_node& c) { return dps<abi::split>(c, integer(attr<std::int64_t>(c, "axis"))); });
  t.add("strided_slice", [](const call_node& c) {
    return dps<abi::strided_slice>(c, ints(attr<ir::int_array>(c, "axes")), ints(attr<ir::int_array>(c, "begin")), ints(attr<ir::int_array>(c, "end")),
                                   attr_is_none(c, "strides") ? ints({}) : ints(attr<ir::int_array>(c, "strides")));
  });
  t.add("take", [=](const call_node& c) { return dps<abi::take>(c, attr_axis(c, "axis")); });
  t.add("scatter_elements", [](const call_node& c) {
    return dps<abi::scatter_elements>(c, integer(attr<std::int64_t>(c, "axis")), string(attr<std::string>(c, "reduction")));
  });
  t.add("image.resize", [](const call_node& c) {
    return dps<abi::resize>(c, reals(c.attrs.find("scales")), reals(c.attrs.find("roi")), string(attr<std::string>(c, "method")),
                            string(attr<std::string>(c, "coordinate_transformation_mode")), string(attr<std::string>(c, "rounding_method")),
                            real(attr<double>(c, "cubic_alpha")), boolean(attr<bool>(c, "cubic_exclude")), real(attr<double>(c, "extrapolation_value")));
  });
  t.add("topk", [](const call_node& c) {
    return dps<abi::topk>(c, integer(attr<std::int64_t>(c, "k")), integer(attr<std::int64_t>(c, "axis")), boolean(attr<bool>(c, "largest")),
                          boolean(attr<bool>(c, "sorted")));
  });
  t.add("gather_nd", [](const call_node& c) { return dps<abi::gather_nd>(c, integer(attr<std::int64_t>(c, "batch_dims"))); });
  t.add("scatter_nd", [](const call_node& c) { return dps<abi::scatter_nd>(c, string(attr<std::string>(c, "reduction"))); });
  t.add("gather_elements", [](const call_node& c) { return dps<abi::gather_elements>(c, integer(attr<std::int64_t>(c, "axis"))); });
  t.add("cumsum", [=](const call_node& c) {
    return dps<abi::cumsum>(c, attr_axis(c, "axis"), boolean(attr<bool>(c, "exclusive")), boolean(attr<bool>(c, "reverse")));
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
