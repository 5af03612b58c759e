// SPDX-License-Identifier: Apache-2.0
/// \file
/// The kernels as VM native functions, so that bytecode can call them by name: the bridge between
/// the VM and the kernel library, which knows nothing of the VM.
///
/// Each kernel is registered under the name and with the arguments its signature in
/// `kernels/calling_convention.hpp` states — the same signature the compiler emits its calls
/// through, so the two cannot disagree. Most are destination-passing, as compiled code calls them
/// (the design's `call_dps_packed`): the inputs, then any attributes, then the output tensor,
/// which the program allocates first (`vm.builtin.alloc_tensor`); the call returns null.
///
///     kernels.add(a, b, out)              kernels.exp(x, out)          kernels.where(c, x, y, out)
///     kernels.softmax(x, axis, out)       kernels.fused("(add x0 (exp x1))", x0, x1, out)
///     kernels.conv2d(x, w, bias, strides, padding, dilation, groups, out)   (bias a tensor or null)
///     kernels.reshape_view(x, shape) -> tensor   (a view when the layout allows; returns it)
///
/// `kernels.fused` and the other fused kernels parse each distinct description once and keep it.
/// `vm::kernel_registry()` is the VM's global registry with every kernel added, what
/// `kiln::compile`d executables are run with by default.
///
/// Registering instantiates every kernel for every dtype, the heaviest code kiln has to compile.
/// Header-only by default; a program with many translation units reaching it can compile it once
/// instead (`support/config.hpp`: define `KILN_SEPARATE_COMPILATION`, include `<kiln/src.hpp>` in
/// one source file).
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/calling_convention.hpp>
#include <kiln/vm/native.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kiln::vm {

namespace detail {

namespace arg = kernels::abi::arg;

/// The C++ parameter type a native takes an argument of kind `Kind` as.
template <class Kind>
consteval auto parameter_type() {
  if constexpr (std::is_same_v<Kind, arg::tensor> || std::is_same_v<Kind, arg::out>) return std::type_identity<tensor>{};
  else if constexpr (std::is_same_v<Kind, arg::shape>) return std::type_identity<shape_vector>{};
  else if constexpr (std::is_same_v<Kind, arg::integer>) return std::type_identity<std::int64_t>{};
  else if constexpr (std::is_same_v<Kind, arg::boolean>) return std::type_identity<bool>{};
  else if constexpr (std::is_same_v<Kind, arg::real>) return std::type_identity<double>{};
  else if constexpr (std::is_same_v<Kind, arg::string>) return std::type_identity<std::string>{};
  else if constexpr (std::is_same_v<Kind, arg::operands>) return std::type_identity<call_args>{};
  else return std::type_identity<value>{};  // a kind that may be null or is a tuple: the value, for the kernel's wrapper to read
}
/// Whether a native's parameter of type `P` receives an argument of kind `Kind`.
template <class Kind, class P>
inline constexpr bool binds = std::is_same_v<P, typename decltype(parameter_type<Kind>())::type>;

template <class K, class F>
consteval bool check_native() {
  using params = typename signature<F>::params;
  static_assert(std::tuple_size_v<params> == K::arity,
                "a kernel registered with more or fewer parameters than its signature in kernels/calling_convention.hpp lists");
  if constexpr (std::tuple_size_v<params> == K::arity) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [] {
            static_assert(binds<std::tuple_element_t<I, typename K::args>, param_t<std::tuple_element_t<I, params>>>,
                          "a kernel's parameter does not take the kind of argument its signature in kernels/calling_convention.hpp "
                          "gives at this position (tensor and out: tensor; shape: shape_vector; integer: std::int64_t; "
                          "boolean: bool; real: double; string: std::string; operands: call_args; the kinds that may be "
                          "null or a tuple: value)");
          }(),
          ...);
    }(std::make_index_sequence<K::arity>{});
  }
  using result = typename signature<F>::result;
  static_assert(K::returns == kernels::abi::result::returns_value ? std::is_same_v<param_t<result>, tensor> : std::is_void_v<result>,
                "a destination-passing kernel returns nothing; a kernel that returns its result returns a tensor");
  return true;
}

}  // namespace detail

/// Registers `f` in `r` as kernel `K` (a signature of `kernels/calling_convention.hpp`, or one of a
/// program's own), under `K`'s name. Fails to compile unless `f` takes, in order, a parameter for
/// each argument kind `K` lists: tensor and out a `tensor`; shape a `shape_vector`; integer a
/// `std::int64_t`; boolean a `bool`; real a `double`; string a `std::string`; operands the
/// `call_args` left; a kind that may be null or is a tuple the `value` itself. A
/// destination-passing kernel returns nothing, one that returns its result a `tensor`.
template <kernels::abi::kernel_signature K, class F>
void add_kernel(function_registry& r, F&& f) {
  static_assert(detail::check_native<K, std::remove_cvref_t<F>>());
  r.add(std::string(K::name), std::forward<F>(f));
}
/// `add_kernel` for one of the kernels of family `K` (`abi::unary`, `abi::binary`), named `name`.
template <kernels::abi::kernel_signature K, class F>
void add_kernel(function_registry& r, std::string name, F&& f) {
  static_assert(detail::check_native<K, std::remove_cvref_t<F>>());
  r.add(std::move(name), std::forward<F>(f));
}

/// Registers every kernel in `r` under its name ("kernels.<name>").
KILN_DECL void register_kernels(function_registry& r);

/// The VM's process-wide registry (`vm::global_registry()`: the built-ins and whatever the program
/// added) with every kernel registered in it, once. A VM made with the default registry after this
/// call can run compiled programs.
KILN_DECL function_registry& kernel_registry();

}  // namespace kiln::vm

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/vm/impl/kernel_registry.ipp>
#include <kiln/vm/impl/kernels.ipp>
#endif
