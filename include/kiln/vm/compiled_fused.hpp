// SPDX-License-Identifier: Apache-2.0
/// \file
/// Fused elementwise groups in generated code. The bytecode calls `kernels.fused` with the group's
/// description as text, which the run-time `fused_expr` interpreter evaluates tile by tile; the
/// compiled mode writes the same description as a compile-time `fx::` expression, so the C++
/// compiler inlines the whole group into one loop over SIMD registers:
///
///     // lv2 = R.call_packed("kernels.fused", R.str("(relu (add x0 x1)) ; lv lv1"), x, b, alloc)
///     static constexpr auto lv2_fx = fx::relu(fx::arg<0>{} + fx::arg<1>{});
///     rt::fused<float>(lv2_fx, {fn, "lv2"}, x, b, alloc);
///
/// The checks and messages are those of `kernels.fused`. The results equal the interpreter's
/// where both are built for the same instruction set; a library built with another `-march`
/// (FMA contraction, other SIMD math) may differ in the last bits.
#pragma once

#include <kiln/kernels/calling_convention.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/vm/compiled.hpp>

#include <array>

namespace kiln::vm::compiled {

namespace fx = kiln::kernels::fx;

/// Runs the fused group `e` over float or double (`T`) tensors: `args` are the inputs, then the
/// output, as `kernels.fused` takes them after the description.
template <class T, fx::expr E, class... V>
value fused(const E& e, const site& at, const V&... args) {
  static_assert((std::is_same_v<V, value> && ...), "kiln::vm::compiled::fused: arguments are register values");
  constexpr std::size_t n = sizeof...(V) - 1;
  static_assert(sizeof...(V) >= 2, "kiln::vm::compiled::fused: the inputs and the output");
  try {
    const value* ptrs[] = {&args..., nullptr};
    std::array<tensor, n> inputs;
    tensor out;
    kernels::fused_arguments(call_args(ptrs, sizeof...(V)), inputs, out);
    kernels::run_fused_for<T>(e, inputs, out);
    return value();
  } catch (...) {
    detail::rethrow_at(at, std::string(kernels::abi::fused::name));
  }
}

/// `fused` in code generated with `cpp_codegen_options::instrumented`: reported to the VM's
/// instrument as a call of `kernels.fused` (the callee is null: the group is inlined, not a
/// function of the table; the arguments are the inputs and the output).
template <class T, fx::expr E, class... V>
value fused_reported(vm_context& vm, const E& e, const site& at, const V&... args) {
  const instrument_fn* instrument = vm.instrument();
  if (!instrument) return fused<T>(e, at, args...);
  const value* ptrs[] = {&args..., nullptr};
  const call_args a(ptrs, sizeof...(V));
  const value none;
  try {
    if ((*instrument)(none, kernels::abi::fused::name, true, value(), a) == instrument_action::skip_run) return value();
  } catch (...) {
    detail::rethrow_at(at, std::string(kernels::abi::fused::name));
  }
  value r = fused<T>(e, at, args...);
  try {
    (*instrument)(none, kernels::abi::fused::name, false, r, a);
  } catch (...) {
    detail::rethrow_at(at, std::string(kernels::abi::fused::name));
  }
  return r;
}

}  // namespace kiln::vm::compiled
