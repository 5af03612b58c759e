// SPDX-License-Identifier: Apache-2.0
/// \file
/// Fused elementwise kernels, the compile-time form (`fused.hpp` has the whole picture): expression
/// templates over `fx::arg<I>`, evaluated per SIMD batch with everything inlined, so that no
/// intermediate ever leaves the registers:
///
///     constexpr auto e = fx::exp(fx::arg<0>{} * fx::arg<1>{}) + fx::arg<2>{};
///     kernels::run_fused(e, {a, b, c}, out);           // or run_fused(e, {a, b, c}) -> tensor
///     using chain = decltype(e);                       // the type alone is the kernel:
///     kernels::run_fused(chain{}, {a, b, c}, out);     //   default-constructible when it has no constants
///
/// Also the checks both forms make (`detail::check_fused`) and `fused_arguments`, which reads
/// `kernels.fused`'s arguments.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/elementwise.hpp>
#include <kiln/support/strings.hpp>

#include <array>
#include <initializer_list>
#include <span>
#include <utility>

namespace kiln::kernels {

namespace fx {

/// Input tensor I of the expression.
template <std::size_t I>
struct arg {
  static constexpr std::size_t inputs = I + 1;
  template <class... V>
  auto eval(const V&... in) const {
    return std::get<I>(std::forward_as_tuple(in...));
  }
};

/// A number, converted to the element type.
struct constant {
  static constexpr std::size_t inputs = 0;
  double value;
  template <class V0, class... V>
  V0 eval(const V0&, const V&...) const {
    return V0(ops::element_t<V0>(value));
  }
};

/// Operator `Op` applied to the children's values.
template <class Op, class... Children>
struct node {
  static constexpr std::size_t inputs = std::max({std::size_t(0), Children::inputs...});
  [[no_unique_address]] Op op;
  std::tuple<Children...> children;
  template <class... V>
  auto eval(const V&... in) const {
    return std::apply([&](const auto&... c) { return op(c.eval(in...)...); }, children);
  }
};

template <class T>
inline constexpr bool is_expr = false;
template <std::size_t I>
inline constexpr bool is_expr<arg<I>> = true;
template <>
inline constexpr bool is_expr<constant> = true;
template <class Op, class... C>
inline constexpr bool is_expr<node<Op, C...>> = true;

template <class T>
concept expr = is_expr<std::remove_cvref_t<T>>;

/// An expression, or a number as a `constant`.
template <class T>
constexpr auto lift(const T& x) {
  if constexpr (expr<T>) return x;
  else return constant{double(x)};
}

template <class Op, class... A>
constexpr auto make(Op op, const A&... a) {
  return node<Op, decltype(lift(a))...>{op, {lift(a)...}};
}

template <class A, class B>
concept operands = (expr<A> || expr<B>) && (expr<A> || std::is_arithmetic_v<A>) && (expr<B> || std::is_arithmetic_v<B>);

template <class A, class B>
  requires operands<A, B>
constexpr auto operator+(const A& a, const B& b) { return make(ops::add{}, a, b); }
template <class A, class B>
  requires operands<A, B>
constexpr auto operator-(const A& a, const B& b) { return make(ops::subtract{}, a, b); }
template <class A, class B>
  requires operands<A, B>
constexpr auto operator*(const A& a, const B& b) { return make(ops::multiply{}, a, b); }
template <class A, class B>
  requires operands<A, B>
constexpr auto operator/(const A& a, const B& b) { return make(ops::divide{}, a, b); }
template <expr A>
constexpr auto operator-(const A& a) { return make(ops::negative{}, a); }

#define KILN_FX_BINARY(name)                      \
  template <class A, class B>                     \
    requires operands<A, B>                       \
  constexpr auto name(const A& a, const B& b) {   \
    return make(ops::name{}, a, b);               \
  }
KILN_FX_BINARY(power)
KILN_FX_BINARY(maximum)
KILN_FX_BINARY(minimum)
#undef KILN_FX_BINARY
#define KILN_FX_UNARY(name)                                               \
  template <expr A>                                                       \
  constexpr auto name(const A& a) {                                       \
    return make(ops::name{}, a);                                          \
  }
KILN_FX_UNARY(negative)
KILN_FX_UNARY(abs)
KILN_FX_UNARY(relu)
KILN_FX_UNARY(exp)
KILN_FX_UNARY(log)
KILN_FX_UNARY(sqrt)
KILN_FX_UNARY(rsqrt)
KILN_FX_UNARY(tanh)
KILN_FX_UNARY(sigmoid)
KILN_FX_UNARY(erf)
KILN_FX_UNARY(gelu)
KILN_FX_UNARY(gelu_tanh)
#undef KILN_FX_UNARY
template <expr A>
constexpr auto clip(const A& a, double lo, double hi) {
  return make(ops::clip{lo, hi}, a);
}

/// The expression as an operator for `map_run`: inputs in, value out.
template <class E>
struct as_op {
  E e;
  template <class T>
  static constexpr bool vectorized = std::is_floating_point_v<T>;
  template <class... V>
  auto operator()(const V&... in) const {
    return e.eval(in...);
  }
};

}  // namespace fx

namespace detail {

constexpr std::size_t max_fused_inputs = 8;

/// Calls `f.template operator()<N>()` with N == n, for 1 <= n <= max_fused_inputs.
template <class F>
void with_count(std::size_t n, F&& f) {
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    ((n == K + 1 ? (f.template operator()<K + 1>(), 0) : 0), ...);
  }(std::make_index_sequence<max_fused_inputs>{});
}

/// The checks every fused kernel makes; returns the broadcast shape.
KILN_DECL dims check_fused(std::string_view op, std::span<const tensor> inputs, std::size_t needed, const tensor* out);

}  // namespace detail

/// Evaluates the compile-time expression `e` over `inputs` into `out` in one pass.
template <fx::expr E>
void run_fused(const E& e, std::span<const tensor> inputs, const tensor& out) {
  constexpr std::string_view op = "fused";
  detail::check_fused(op, inputs, E::inputs, &out);
  const fx::as_op<E> f{e};
  detail::with_count(inputs.size(), [&]<std::size_t N>() {
    if constexpr (N >= E::inputs) {  // fewer inputs were rejected by check_fused
      std::array<const tensor*, N + 1> operands;
      operands[0] = &out;
      for (std::size_t i = 0; i < N; ++i) operands[i + 1] = &inputs[i];
      const loop_plan<N + 1> plan(operands);
      visit_dtype(op, out.type(), [&]<class T>(type_tag<T>) {
        if constexpr (std::is_floating_point_v<T>)
          plan.for_each_run([&](std::int64_t len, const std::array<char*, N + 1>& p, const std::array<std::int64_t, N + 1>& s) {
            detail::map_run<T, fx::as_op<E>, N>(f, len, p, s);
          });
      });
    }
  });
}
/// The same with the element type `T` and the number of inputs `N` fixed at compile time, so that
/// one loop is instantiated rather than one per input count and dtype (what generated code
/// calls); tensors of another dtype are an error.
template <class T, fx::expr E, std::size_t N>
  requires(std::is_floating_point_v<T> && N >= 1 && N <= detail::max_fused_inputs)
void run_fused_for(const E& e, const std::array<tensor, N>& inputs, const tensor& out) {
  constexpr std::string_view op = "fused";
  static_assert(N >= E::inputs, "kiln::kernels::run_fused_for: the expression reads more inputs than are given");
  detail::check_fused(op, inputs, E::inputs, &out);
  if (out.type() != runtime::dtype_of<T>)
    fail(op, kiln::detail::concat("this kernel was made for ", name(runtime::dtype_of<T>), " operands, got ", describe_operand(out)));
  std::array<const tensor*, N + 1> operands;
  operands[0] = &out;
  for (std::size_t i = 0; i < N; ++i) operands[i + 1] = &inputs[i];
  const loop_plan<N + 1> plan(operands);
  const fx::as_op<E> f{e};
  plan.for_each_run([&](std::int64_t len, const std::array<char*, N + 1>& p, const std::array<std::int64_t, N + 1>& s) {
    detail::map_run<T, fx::as_op<E>, N>(f, len, p, s);
  });
}

/// `kernels.fused`'s register arguments after the description (the inputs, then the output), as
/// tensors: `inputs` (one fewer than `args`) and `out`. `Args` is `vm::call_args` (this header
/// does not depend on the VM): indexing gives values with `is_tensor()`, `as_tensor()` and a
/// `kind()` that `name` spells. The checks and messages of the registered kernel and of generated
/// code (`vm::compiled::fused`).
template <class Args>
void fused_arguments(const Args& args, std::span<tensor> inputs, tensor& out) {
  if (args.size() < 2 || inputs.size() + 1 != args.size())
    fail("fused", kiln::detail::concat("needs the inputs and the output after the description, got ", args.size(), " tensors"));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!args[i].is_tensor()) fail("fused", kiln::detail::concat("argument ", i + 1, " must be a tensor, got ", name(args[i].kind())));
    inputs[i] = args[i].as_tensor();
  }
  if (!args[inputs.size()].is_tensor()) fail("fused", kiln::detail::concat("the output must be a tensor, got ", name(args[inputs.size()].kind())));
  out = args[inputs.size()].as_tensor();
}

template <fx::expr E>
void run_fused(const E& e, std::initializer_list<tensor> inputs, const tensor& out) {
  run_fused(e, std::span<const tensor>(inputs.begin(), inputs.size()), out);
}
/// The same into a new contiguous tensor.
template <fx::expr E>
tensor run_fused(const E& e, std::span<const tensor> inputs) {
  const dims shape = detail::check_fused("fused", inputs, E::inputs, nullptr);
  tensor out = new_output(shape_vector(shape.begin(), shape.end()), inputs[0].type());
  run_fused(e, inputs, out);
  return out;
}
template <fx::expr E>
tensor run_fused(const E& e, std::initializer_list<tensor> inputs) {
  return run_fused(e, std::span<const tensor>(inputs.begin(), inputs.size()));
}

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/fx.ipp>
#endif
