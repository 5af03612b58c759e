// SPDX-License-Identifier: Apache-2.0
/// \file
/// The kernels' calling convention: for each kernel, the name it is registered under in the VM
/// and the kind of each of its arguments, in order, as a C++ type.
///
/// Two sides must agree on it. The compiler (`transform/`) emits calls of kernels by name, with
/// the call's operands and attributes as IR values; the VM's registration of the kernels
/// (`vm/kernels.hpp`) unpacks those values into the kernels' C++ parameters. Both go through the
/// types here:
///
///     // transform/kernel_lowering.hpp: the arguments' kinds are checked against the signature
///     lower::call<abi::softmax>(c.args[0], lower::integer(axis))
///     // vm/impl/kernels.ipp: the callable's parameter types are checked against it
///     add<abi::softmax>(r, [](tensor x, std::int64_t axis, tensor out) { softmax(x, axis, out); });
///
/// so a kernel whose arguments change on one side and not the other fails to compile, with a
/// `static_assert` naming the kernel and the argument. A kernel call is destination-passing unless
/// its signature says otherwise (`returns_value`): the inputs, then any attributes, then the output
/// (`arg::out`), which the caller allocates; the kernel returns nothing.
///
/// This header holds no kernel code and depends on nothing but the standard library, so that the
/// compiler can include it without the kernels.
#pragma once

#include <kiln/support/fixed_string.hpp>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kiln::kernels::abi {

/// The kinds of argument a kernel takes.
namespace arg {
struct tensor {};           ///< a tensor
struct tensor_or_null {};   ///< a tensor, or the null value (an optional operand: a bias, a mask)
struct tensors {};          ///< a tuple of tensors (concat's inputs)
struct shape {};            ///< a shape value: a list of integers (axes, strides, a layout)
struct integer {};          ///< an int64 value
struct integer_or_null {};  ///< an int64 value, or the null value (an optional axis)
struct boolean {};          ///< a bool value
struct real {};             ///< a float64 value
struct string {};           ///< a string (a fused epilogue's description, a mode's name)
struct reals_or_null {};    ///< a float64 vector, or the null value (resize's scales)
struct out {};              ///< the destination: the output tensor, allocated by the caller
struct outs {};             ///< the destinations as a tuple of tensors (split, topk)
/// Any number of tensors to the end of the call: a fused epilogue's operands, then the output.
struct operands {};
}  // namespace arg

/// What a kernel call gives back.
enum class result : unsigned char {
  destination_passing,  ///< writes its output argument(s) and returns nothing
  returns_value,        ///< returns a tensor (`reshape_view`: a view of its input)
};

/// The signature of kernel `Name`: its argument kinds in order. The name is the one it is
/// registered under and the compiler emits ("kernels.softmax").
template <fixed_string Name, result R, class... Args>
struct kernel {
  static constexpr std::string_view name = Name;
  static constexpr result returns = R;
  using args = std::tuple<Args...>;
  static constexpr std::size_t arity = sizeof...(Args);
  /// The arguments the compiler gives (all but a destination or the variadic operands at the end).
  static constexpr std::size_t given = [] {
    std::size_t n = 0;
    ((n += !(std::is_same_v<Args, arg::out> || std::is_same_v<Args, arg::outs> || std::is_same_v<Args, arg::operands>)), ...);
    return n;
  }();
};

template <fixed_string Name, class... Args>
using dps = kernel<Name, result::destination_passing, Args...>;
template <fixed_string Name, class... Args>
using returning = kernel<Name, result::returns_value, Args...>;

/// Whether `T` is a kernel signature.
template <class T>
inline constexpr bool is_kernel_v = false;
template <fixed_string N, result R, class... A>
inline constexpr bool is_kernel_v<kernel<N, R, A...>> = true;
template <class T>
concept kernel_signature = is_kernel_v<T>;

/// Whether `Fused` is the fused form of `Base`: `Base`'s arguments up to its destination, then an
/// epilogue's description and its operands (`conv2d` and `conv2d_fused`).
template <class Base, class Fused>
constexpr bool is_fused_form_of = [] {
  if constexpr (Base::arity == 0 || Fused::arity != Base::arity + 1 ||
                !std::is_same_v<std::tuple_element_t<Base::arity - 1, typename Base::args>, arg::out>) {
    return false;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return std::is_same_v<std::tuple<std::tuple_element_t<I, typename Base::args>..., arg::string, arg::operands>, typename Fused::args>;
    }(std::make_index_sequence<Base::arity - 1>{});
  }
}();

// ---- elementwise ----------------------------------------------------------------------------

/// The elementwise kernels of one and of two operands, registered as "kernels.<name>".
inline constexpr std::string_view unary_operators[] = {
    "negative", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "gelu", "gelu_tanh", "logical_not", "sin", "cos",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round"};
inline constexpr std::string_view binary_operators[] = {
    "add",  "subtract", "multiply",   "divide",  "floor_divide",  "fmod",        "power",      "maximum",  "minimum",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or"};

constexpr bool is_unary_operator(std::string_view op) { return std::ranges::find(unary_operators, op) != std::end(unary_operators); }
constexpr bool is_binary_operator(std::string_view op) { return std::ranges::find(binary_operators, op) != std::end(binary_operators); }

/// kernels.<unary op>(x, out)
using unary = dps<"kernels.<unary>", arg::tensor, arg::out>;
/// kernels.<binary op>(a, b, out), broadcasting
using binary = dps<"kernels.<binary>", arg::tensor, arg::tensor, arg::out>;
/// out's dtype is the target
using cast = dps<"kernels.cast", arg::tensor, arg::out>;
using clip = dps<"kernels.clip", arg::tensor, arg::real /*lo*/, arg::real /*hi*/, arg::out>;
using where = dps<"kernels.where", arg::tensor /*cond*/, arg::tensor, arg::tensor, arg::out>;
/// An elementwise group: its description ("(add x0 (exp x1))"), then its operands and the output.
using fused = dps<"kernels.fused", arg::string, arg::operands>;

// ---- reductions and normalizations ---------------------------------------------------------

/// kernels.sum(x, axes, keepdims, out) (also mean, max, min, prod); empty axes: all of them.
template <fixed_string Name>
using reduction = dps<Name, arg::tensor, arg::shape /*axes*/, arg::boolean /*keepdims*/, arg::out>;
using sum = reduction<"kernels.sum">;
using mean = reduction<"kernels.mean">;
using max = reduction<"kernels.max">;
using min = reduction<"kernels.min">;
using prod = reduction<"kernels.prod">;
/// Null axis: the flattened tensor.
using argmax = dps<"kernels.argmax", arg::tensor, arg::integer_or_null /*axis*/, arg::boolean /*keepdims*/, arg::out>;
using argmin = dps<"kernels.argmin", arg::tensor, arg::integer_or_null /*axis*/, arg::boolean /*keepdims*/, arg::out>;
using softmax = dps<"kernels.softmax", arg::tensor, arg::integer /*axis*/, arg::out>;
using log_softmax = dps<"kernels.log_softmax", arg::tensor, arg::integer /*axis*/, arg::out>;
using layer_norm = dps<"kernels.layer_norm", arg::tensor, arg::tensor_or_null /*gamma*/, arg::tensor_or_null /*beta*/, arg::shape /*axes*/,
                       arg::real /*epsilon*/, arg::boolean /*center*/, arg::boolean /*scale*/, arg::out>;

// ---- linear algebra and convolution ---------------------------------------------------------

using matmul = dps<"kernels.matmul", arg::tensor, arg::tensor, arg::boolean /*transpose_a*/, arg::boolean /*transpose_b*/, arg::out>;
/// b packed by `prepack_weights` (kernels/packing.hpp), its layout as a shape value.
using matmul_prepacked = dps<"kernels.matmul_prepacked", arg::tensor, arg::tensor /*packed*/, arg::boolean /*transpose_a*/,
                             arg::shape /*layout*/, arg::out>;
/// A matmul with an elementwise epilogue: its description, then its operands and the output.
using matmul_fused = dps<"kernels.matmul_fused", arg::tensor, arg::tensor, arg::boolean /*transpose_a*/, arg::boolean /*transpose_b*/,
                         arg::string /*epilogue*/, arg::operands>;
using matmul_fused_prepacked = dps<"kernels.matmul_fused_prepacked", arg::tensor, arg::tensor /*packed*/, arg::boolean /*transpose_a*/,
                                   arg::shape /*layout*/, arg::string /*epilogue*/, arg::operands>;
/// softmax(post(where(mask, pre(q @ k^T), fill))) @ v (kernels/attention.hpp): pre and post fused
/// descriptions, "" for none; mask_mode 0 none (mask null), 1 keep where true, 2 where false.
using attention = dps<"kernels.attention", arg::tensor /*q*/, arg::tensor /*k*/, arg::tensor /*v*/, arg::boolean /*transpose_k*/,
                      arg::string /*pre*/, arg::string /*post*/, arg::integer /*mask_mode*/, arg::real /*fill*/,
                      arg::tensor_or_null /*mask*/, arg::operands>;

/// Strides and dilation of 1 or 2 entries, padding of 1, 2 or 4.
// [conv2d]
using conv2d = dps<"kernels.conv2d", arg::tensor /*x*/, arg::tensor /*w*/, arg::tensor_or_null /*bias*/, arg::shape /*strides*/,
                   arg::shape /*padding*/, arg::shape /*dilation*/, arg::integer /*groups*/, arg::out>;
// [conv2d]
using conv2d_fused = dps<"kernels.conv2d_fused", arg::tensor /*x*/, arg::tensor /*w*/, arg::tensor_or_null /*bias*/, arg::shape /*strides*/,
                         arg::shape /*padding*/, arg::shape /*dilation*/, arg::integer /*groups*/, arg::string /*epilogue*/, arg::operands>;
/// The weights packed by `prepack_weights` (one group), their layout as a shape value.
template <fixed_string Name>
using conv2d_packed = dps<Name, arg::tensor /*x*/, arg::tensor /*packed*/, arg::tensor_or_null /*bias*/, arg::shape /*layout*/,
                          arg::shape /*strides*/, arg::shape /*padding*/, arg::shape /*dilation*/, arg::out>;
template <fixed_string Name>
using conv2d_fused_packed = dps<Name, arg::tensor /*x*/, arg::tensor /*packed*/, arg::tensor_or_null /*bias*/, arg::shape /*layout*/,
                                arg::shape /*strides*/, arg::shape /*padding*/, arg::shape /*dilation*/, arg::string /*epilogue*/,
                                arg::operands>;
using conv2d_prepacked = conv2d_packed<"kernels.conv2d_prepacked">;
using conv2d_winograd = conv2d_packed<"kernels.conv2d_winograd">;
using conv2d_fused_prepacked = conv2d_fused_packed<"kernels.conv2d_fused_prepacked">;
using conv2d_fused_winograd = conv2d_fused_packed<"kernels.conv2d_fused_winograd">;
/// A 1 x 1 convolution on its weight transposed and packed as a matmul's (layout [C, O, nr, kc]).
using conv2d_pointwise = conv2d_packed<"kernels.conv2d_pointwise">;
using conv2d_fused_pointwise = conv2d_fused_packed<"kernels.conv2d_fused_pointwise">;
using conv2d_transpose = dps<"kernels.conv2d_transpose", arg::tensor /*x*/, arg::tensor /*w*/, arg::shape /*strides*/, arg::shape /*padding*/,
                             arg::shape /*output_padding*/, arg::shape /*dilation*/, arg::integer /*groups*/, arg::out>;
using max_pool2d = dps<"kernels.max_pool2d", arg::tensor, arg::shape /*pool_size*/, arg::shape /*strides*/, arg::shape /*padding*/,
                       arg::shape /*dilation*/, arg::boolean /*ceil_mode*/, arg::out>;
using avg_pool2d = dps<"kernels.avg_pool2d", arg::tensor, arg::shape /*pool_size*/, arg::shape /*strides*/, arg::shape /*padding*/,
                       arg::shape /*dilation*/, arg::boolean /*ceil_mode*/, arg::boolean /*count_include_pad*/, arg::out>;
using adaptive_avg_pool2d = dps<"kernels.adaptive_avg_pool2d", arg::tensor, arg::out>;
using global_avg_pool2d = dps<"kernels.global_avg_pool2d", arg::tensor, arg::out>;
/// Mode "constant", "edge" or "reflect".
using pad = dps<"kernels.pad", arg::tensor, arg::shape /*pad_width*/, arg::string /*mode*/, arg::real /*value*/, arg::out>;

// ---- data movement --------------------------------------------------------------------------

using copy = dps<"kernels.copy", arg::tensor, arg::out>;
using broadcast_to = dps<"kernels.broadcast_to", arg::tensor, arg::out>;
using reshape = dps<"kernels.reshape", arg::tensor, arg::out>;
/// A view of x with the given shape when its layout allows, else a copy; returns it.
using reshape_view = returning<"kernels.reshape_view", arg::tensor, arg::shape>;
/// concat((past, x), axis), written in place into past's capacity buffer when it can
/// (runtime/kv_cache.hpp); returns the result.
using kv_cache_append = returning<"kernels.kv_cache_append", arg::tensor /*past*/, arg::tensor /*x*/, arg::integer /*axis*/,
                                  arg::integer /*capacity*/>;
/// Empty axes: reversed.
using permute_dims = dps<"kernels.permute_dims", arg::tensor, arg::shape /*axes*/, arg::out>;
using concat = dps<"kernels.concat", arg::tensors, arg::integer /*axis*/, arg::out>;
using split = dps<"kernels.split", arg::tensor, arg::integer /*axis*/, arg::outs>;
/// Empty strides: all 1.
using strided_slice = dps<"kernels.strided_slice", arg::tensor, arg::shape /*axes*/, arg::shape /*begin*/, arg::shape /*end*/,
                          arg::shape /*strides*/, arg::out>;
/// Null axis: the flattened tensor.
using take = dps<"kernels.take", arg::tensor, arg::tensor /*indices*/, arg::integer_or_null /*axis*/, arg::out>;
/// Reduction "none", "add", "mul", "max" or "min".
using scatter_elements = dps<"kernels.scatter_elements", arg::tensor, arg::tensor /*indices*/, arg::tensor /*updates*/, arg::integer /*axis*/,
                             arg::string /*reduction*/, arg::out>;
/// The outputs: (values, indices).
using topk = dps<"kernels.topk", arg::tensor, arg::integer /*k*/, arg::integer /*axis*/, arg::boolean /*largest*/, arg::boolean /*sorted*/,
                 arg::outs>;
using gather_nd = dps<"kernels.gather_nd", arg::tensor, arg::tensor /*indices*/, arg::integer /*batch_dims*/, arg::out>;
using scatter_nd = dps<"kernels.scatter_nd", arg::tensor, arg::tensor /*indices*/, arg::tensor /*updates*/, arg::string /*reduction*/, arg::out>;
using gather_elements = dps<"kernels.gather_elements", arg::tensor, arg::tensor /*indices*/, arg::integer /*axis*/, arg::out>;
using cumsum = dps<"kernels.cumsum", arg::tensor, arg::integer_or_null /*axis*/, arg::boolean /*exclusive*/, arg::boolean /*reverse*/, arg::out>;
/// kernels/resize.hpp: method, coordinate transformation and nearest rounding by their ONNX names.
using resize = dps<"kernels.resize", arg::tensor, arg::reals_or_null /*scales*/, arg::reals_or_null /*roi*/, arg::string /*method*/,
                   arg::string /*coordinate_transformation_mode*/, arg::string /*rounding_method*/, arg::real /*cubic_alpha*/,
                   arg::boolean /*exclude_outside*/, arg::real /*extrapolation_value*/, arg::out>;

static_assert(is_fused_form_of<matmul, matmul_fused> && is_fused_form_of<matmul_prepacked, matmul_fused_prepacked>);
static_assert(is_fused_form_of<conv2d, conv2d_fused> && is_fused_form_of<conv2d_prepacked, conv2d_fused_prepacked> &&
              is_fused_form_of<conv2d_winograd, conv2d_fused_winograd> && is_fused_form_of<conv2d_pointwise, conv2d_fused_pointwise>);

}  // namespace kiln::kernels::abi
