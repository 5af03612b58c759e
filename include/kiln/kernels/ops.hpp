// SPDX-License-Identifier: Apache-2.0
/// \file
/// The elementwise operators as function objects, shared by the elementwise kernels
/// (`elementwise.hpp`) and the fused-expression driver (`fused.hpp`).
///
/// An operator says which dtypes it `accepts`, whether it is `vectorized` for an element type,
/// and applies to xsimd batches of those types (vectorized) or to scalars (the others). The
/// drivers run a vectorized operator on whole batches only, tails included (through a padded
/// buffer), so every element of a tensor gets exactly the same arithmetic.
///
/// Floating-point semantics follow numpy: `maximum`/`minimum` propagate NaN, `divide` by zero
/// gives infinities, `sqrt`/`log` of negatives give NaN. Integer arithmetic wraps (as the
/// hardware does, and without C++'s undefined signed overflow); integer `divide` truncates,
/// `floor_divide` floors, and both raise `kernel_error` on division by zero, as does a negative
/// integer `power`.
#pragma once

#include <kiln/kernels/common.hpp>

#include <cmath>
#include <limits>

namespace kiln::kernels::ops {

template <class T>
inline constexpr bool is_simd_type =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

/// The scalar element type of `V` (a batch or a scalar).
template <class V>
struct element {
  using type = V;
};
template <class T, class A>
struct element<xsimd::batch<T, A>> {
  using type = T;
};
template <class V>
using element_t = typename element<V>::type;

inline bool is_numeric(dtype t) { return t != dtype::bool_ && is_known(t) && t != dtype::float16; }
inline bool is_floating(dtype t) { return t == dtype::float32 || t == dtype::float64; }

namespace detail {
template <class T>
T wrap_add(T a, T b) { return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b)); }
template <class T>
T wrap_sub(T a, T b) { return T(std::make_unsigned_t<T>(a) - std::make_unsigned_t<T>(b)); }
template <class T>
T wrap_mul(T a, T b) { return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b)); }

template <class V>
V nan_select(const V& a, const V& b, const V& r) {
  if constexpr (std::is_floating_point_v<element_t<V>>) {
    if constexpr (std::is_floating_point_v<V>) return std::isnan(a) ? a : std::isnan(b) ? b : r;
    else return xsimd::select(xsimd::isnan(a), a, xsimd::select(xsimd::isnan(b), b, r));
  } else {
    return r;
  }
}

[[noreturn]] __attribute__((noinline, cold)) inline void division_by_zero(std::string_view op) {
  fail(op, "integer division by zero");
}
}  // namespace detail

// ---- what the operators share ---------------------------------------------------------------------

/// The traits most operators share: every numeric dtype is accepted, and every type xsimd has
/// batches for is vectorised. An operator derives from one of these bases and adds its `name`
/// and its call operator(s), scalar and batch.
struct numeric_operator {
  static bool accepts(dtype t) { return is_numeric(t); }
  template <class T>
  static constexpr bool vectorized = is_simd_type<T>;
};
/// Numeric dtypes, vectorised for floats only: the integer forms check for division by zero or
/// negative exponents element by element (xsimd has no integer division).
struct numeric_operator_vectorized_for_floats {
  static bool accepts(dtype t) { return is_numeric(t); }
  template <class T>
  static constexpr bool vectorized = std::is_floating_point_v<T>;
};

// ---- binary arithmetic ------------------------------------------------------------------------------

struct add : numeric_operator {
  static constexpr std::string_view name = "add";
  template <class V>
  V operator()(const V& a, const V& b) const {
    if constexpr (std::is_integral_v<V>) return detail::wrap_add(a, b);
    else return a + b;
  }
};
struct subtract : numeric_operator {
  static constexpr std::string_view name = "subtract";
  template <class V>
  V operator()(const V& a, const V& b) const {
    if constexpr (std::is_integral_v<V>) return detail::wrap_sub(a, b);
    else return a - b;
  }
};
struct multiply : numeric_operator {
  static constexpr std::string_view name = "multiply";
  template <class V>
  V operator()(const V& a, const V& b) const {
    using E = element_t<V>;
    if constexpr (std::is_integral_v<V>) {
      return detail::wrap_mul(a, b);
    } else if constexpr (std::is_integral_v<E>) {
      // Unsigned: where xsimd multiplies element by element in C++ (int32 on SSE2, int64 before
      // AVX-512), a signed product that overflows would be undefined behaviour.
      using U = xsimd::batch<std::make_unsigned_t<E>, typename V::arch_type>;
      return xsimd::bitwise_cast<V>(xsimd::bitwise_cast<U>(a) * xsimd::bitwise_cast<U>(b));
    } else {
      return a * b;
    }
  }
};
/// Floats: IEEE division. Integers: truncating, error on zero, and MIN / -1 wraps to MIN.
struct divide : numeric_operator_vectorized_for_floats {
  static constexpr std::string_view name = "divide";
  template <class V>
  V operator()(const V& a, const V& b) const {
    if constexpr (std::is_integral_v<V>) {
      if (b == 0) detail::division_by_zero(name);
      if (b == -1) return detail::wrap_sub(V(0), a);
      return V(a / b);
    } else {
      return a / b;
    }
  }
};
/// Floats: floor(a / b). Integers: the quotient rounded down, error on zero.
struct floor_divide : numeric_operator_vectorized_for_floats {
  static constexpr std::string_view name = "floor_divide";
  template <class V>
  V operator()(const V& a, const V& b) const {
    if constexpr (std::is_integral_v<V>) {
      if (b == 0) detail::division_by_zero(name);
      if (b == -1) return detail::wrap_sub(V(0), a);
      const V q = V(a / b);
      return (a % b != 0 && ((a < 0) != (b < 0))) ? V(q - 1) : q;
    } else if constexpr (std::is_floating_point_v<V>) {
      return std::floor(a / b);
    } else {
      return xsimd::floor(a / b);
    }
  }
};
/// The remainder of truncated division, with the dividend's sign (C's fmod and %, numpy's fmod,
/// ONNX's Mod with fmod = 1). Floats: exact (std::fmod), NaN for a zero divisor. Integers: error on
/// zero; MIN fmod -1 is 0.
/// Scalar for every dtype: xsimd's fmod is a - trunc(a / b) * b, which loses the exact remainder
/// when a / b rounds.
struct fmod {
  static constexpr std::string_view name = "fmod";
  static bool accepts(dtype t) { return is_numeric(t); }
  template <class T>
  static constexpr bool vectorized = false;
  template <class V>
  V operator()(const V& a, const V& b) const {
    if constexpr (std::is_integral_v<V>) {
      if (b == 0) detail::division_by_zero(name);
      if (b == -1) return V(0);
      return V(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};
/// Floats: pow. Integers: exact power by squaring (wrapping), error on a negative exponent.
struct power : numeric_operator_vectorized_for_floats {
  static constexpr std::string_view name = "power";
  template <class V>
  V operator()(const V& a, const V& b) const {
    if constexpr (std::is_integral_v<V>) {
      if constexpr (std::is_signed_v<V>)
        if (b < 0) fail(name, "negative integer power " + std::to_string(b) + " (cast to a float dtype first)");
      V result = 1, base = a;
      for (auto e = std::make_unsigned_t<V>(b); e; e >>= 1) {
        if (e & 1) result = detail::wrap_mul(result, base);
        base = detail::wrap_mul(base, base);
      }
      return result;
    } else if constexpr (std::is_floating_point_v<V>) {
      return std::pow(a, b);
    } else {
      return xsimd::pow(a, b);
    }
  }
};
/// Propagates NaN (numpy's maximum), unlike the hardware's max.
struct maximum : numeric_operator {
  static constexpr std::string_view name = "maximum";
  template <class V>
  V operator()(const V& a, const V& b) const {
    if constexpr (std::is_arithmetic_v<V>) return detail::nan_select(a, b, a < b ? b : a);
    else return detail::nan_select(a, b, xsimd::max(a, b));
  }
};
struct minimum : numeric_operator {
  static constexpr std::string_view name = "minimum";
  template <class V>
  V operator()(const V& a, const V& b) const {
    if constexpr (std::is_arithmetic_v<V>) return detail::nan_select(a, b, b < a ? b : a);
    else return detail::nan_select(a, b, xsimd::min(a, b));
  }
};

// ---- comparisons and logic (bool results) ---------------------------------------------------------

#define KILN_KERNELS_COMPARISON(op_name, expr)                                   \
  struct op_name {                                                               \
    static constexpr std::string_view name = #op_name;                           \
    static bool accepts(dtype t) { return is_known(t) && t != dtype::float16; }  \
    template <class T>                                                           \
    bool operator()(T a, T b) const {                                            \
      return expr;                                                               \
    }                                                                            \
  };
KILN_KERNELS_COMPARISON(equal, a == b)
KILN_KERNELS_COMPARISON(not_equal, a != b)
KILN_KERNELS_COMPARISON(less, a < b)
KILN_KERNELS_COMPARISON(less_equal, a <= b)
KILN_KERNELS_COMPARISON(greater, a > b)
KILN_KERNELS_COMPARISON(greater_equal, a >= b)
#undef KILN_KERNELS_COMPARISON

struct logical_and {
  static constexpr std::string_view name = "logical_and";
  static bool accepts(dtype t) { return t == dtype::bool_; }
  bool operator()(std::uint8_t a, std::uint8_t b) const { return a && b; }
};
struct logical_or {
  static constexpr std::string_view name = "logical_or";
  static bool accepts(dtype t) { return t == dtype::bool_; }
  bool operator()(std::uint8_t a, std::uint8_t b) const { return a || b; }
};

// ---- unary ------------------------------------------------------------------------------------------

struct negative : numeric_operator {
  static constexpr std::string_view name = "negative";
  template <class V>
  V operator()(const V& x) const {
    if constexpr (std::is_integral_v<V>) return detail::wrap_sub(V(0), x);
    else return -x;
  }
};
struct abs : numeric_operator {
  static constexpr std::string_view name = "abs";
  template <class V>
  V operator()(const V& x) const {
    if constexpr (std::is_integral_v<V>) {
      if constexpr (std::is_signed_v<V>) return x < 0 ? detail::wrap_sub(V(0), x) : x;
      else return x;
    } else if constexpr (std::is_floating_point_v<V>) {
      return std::fabs(x);
    } else {
      return xsimd::abs(x);
    }
  }
};
struct relu : numeric_operator {
  static constexpr std::string_view name = "relu";
  /// max(x, 0), NaN kept.
  template <class V>
  V operator()(const V& x) const {
    if constexpr (std::is_arithmetic_v<V>) return x < V(0) ? V(0) : x;
    else if constexpr (std::is_integral_v<element_t<V>>) return xsimd::max(x, V(0));
    else return xsimd::select(x < V(0), V(0), x);  // NaN stays NaN
  }
};

namespace safe {

// xsimd's float64 exp (and erf, tanh, which use it) converts its scaled argument to int64 in
// plain C++ on the way, which is undefined behaviour for infinities, NaN and magnitudes beyond
// 2^63 (UBSan reports it; float is clean). These wrappers give xsimd only arguments it handles —
// ranges where the result is already exact at the ends — and put the exact results back: exp(-inf)
// = 0, exp(+inf) = +inf, erf(+-inf) = +-1, tanh(+-inf) = +-1, NaN stays NaN. Float batches and
// scalars go straight through.

template <class T, class A>
xsimd::batch<T, A> exp(const xsimd::batch<T, A>& x) {
  using V = xsimd::batch<T, A>;
  if constexpr (!std::is_same_v<T, double>) {
    return xsimd::exp(x);
  } else {
    const auto low = x < V(-750.0), high = x > V(710.0), nan = xsimd::isnan(x);  // exp underflows / overflows there
    const V r = xsimd::exp(xsimd::select(low || high || nan, V(0.0), x));
    return xsimd::select(nan, x, xsimd::select(low, V(0.0), xsimd::select(high, V(std::numeric_limits<double>::infinity()), r)));
  }
}

/// f(x) for an odd f that is exactly +-1 in double beyond |x| > `saturate`.
template <class T, class A, class F>
xsimd::batch<T, A> saturating(const xsimd::batch<T, A>& x, double saturate, F f) {
  using V = xsimd::batch<T, A>;
  if constexpr (!std::is_same_v<T, double>) {
    return f(x);
  } else {
    const auto nan = xsimd::isnan(x);
    const V r = f(xsimd::select(nan, V(0.0), xsimd::clip(x, V(-saturate), V(saturate))));
    return xsimd::select(nan, x, r);
  }
}
template <class T, class A>
xsimd::batch<T, A> erf(const xsimd::batch<T, A>& x) {  // erf(6) = 1 - 2e-17: 1 in double
  return saturating(x, 6.0, [](const auto& y) { return xsimd::erf(y); });
}
template <class T, class A>
xsimd::batch<T, A> tanh(const xsimd::batch<T, A>& x) {  // tanh(20) = 1 - 8e-18: 1 in double
  return saturating(x, 20.0, [](const auto& y) { return xsimd::tanh(y); });
}

template <class T>
  requires std::is_arithmetic_v<T>
auto exp(T x) {  // as std::exp: double for integers (the integer instantiations are never called)
  return std::exp(x);
}
template <class T>
  requires std::is_arithmetic_v<T>
auto erf(T x) {  // as std::erf: double for integers (the integer instantiations are never called)
  return std::erf(x);
}
template <class T>
  requires std::is_arithmetic_v<T>
auto tanh(T x) {  // as std::tanh: double for integers (the integer instantiations are never called)
  return std::tanh(x);
}

}  // namespace safe

/// Unary operators on floating point only: `body` computes from `x` (a batch or, where the operator
/// is not `vectorized` for the element type, a scalar) with <cmath>'s and xsimd's functions in scope.
#define KILN_KERNELS_UNARY_OP(op_name, vectorized_if, body)                                            \
  struct op_name {                                                                                     \
    static constexpr std::string_view name = #op_name;                                                 \
    static bool accepts(dtype t) { return is_floating(t); }                                            \
    template <class T>                                                                                 \
    static constexpr bool vectorized = vectorized_if;                                                  \
    template <class V>                                                                                 \
    V operator()(const V& x) const {                                                                   \
      /* exp, erf, tanh: safe:: */                                                                     \
      using xsimd::log, xsimd::sqrt, xsimd::floor, xsimd::ceil, xsimd::nearbyint, xsimd::sin, xsimd::cos, \
          xsimd::tan, xsimd::asin, xsimd::acos, xsimd::atan, xsimd::sinh, xsimd::cosh, xsimd::asinh,    \
          xsimd::acosh, xsimd::atanh;                                                                  \
      using std::log, std::sqrt, std::floor, std::ceil, std::nearbyint, std::sin, std::cos, std::tan,  \
          std::asin, std::acos, std::atan, std::sinh, std::cosh, std::asinh, std::acosh, std::atanh;   \
      using E = element_t<V>;                                                                          \
      (void)sizeof(E);                                                                                 \
      return body;                                                                                     \
    }                                                                                                  \
  };
/// Vectorized for float and double.
#define KILN_KERNELS_FLOAT_UNARY(op_name, body) KILN_KERNELS_UNARY_OP(op_name, std::is_floating_point_v<T>, body)
KILN_KERNELS_FLOAT_UNARY(exp, safe::exp(x))
KILN_KERNELS_FLOAT_UNARY(log, log(x))
KILN_KERNELS_FLOAT_UNARY(sqrt, sqrt(x))
// Exact 1/sqrt (xsimd's rsqrt is a 12-bit estimate).
KILN_KERNELS_FLOAT_UNARY(rsqrt, V(E(1)) / sqrt(x))
KILN_KERNELS_FLOAT_UNARY(tanh, safe::tanh(x))
KILN_KERNELS_FLOAT_UNARY(sigmoid, V(E(1)) / (V(E(1)) + safe::exp(-x)))
KILN_KERNELS_FLOAT_UNARY(erf, safe::erf(x))
// gelu(x) = x/2 (1 + erf(x / sqrt 2))
KILN_KERNELS_FLOAT_UNARY(gelu, V(E(0.5)) * x * (V(E(1)) + safe::erf(x * V(E(0.70710678118654752440)))))
// The tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
KILN_KERNELS_FLOAT_UNARY(gelu_tanh,
                         V(E(0.5)) * x * (V(E(1)) + safe::tanh(V(E(0.79788456080286535588)) * (x + V(E(0.044715)) * x * x * x))))
// Rounding to an integral value, exact; round takes halves to even (ONNX's Round, numpy's round),
// as the default rounding mode does.
KILN_KERNELS_FLOAT_UNARY(floor, floor(x))
KILN_KERNELS_FLOAT_UNARY(ceil, ceil(x))
KILN_KERNELS_FLOAT_UNARY(round, nearbyint(x))
#undef KILN_KERNELS_FLOAT_UNARY

/// Trigonometric and hyperbolic functions, vectorized for float by xsimd. For double they go
/// element by element through <cmath>: xsimd's double range reduction converts to integers in plain
/// C++, which is undefined for the infinities and huge magnitudes the functions must accept.
#define KILN_KERNELS_MATH_UNARY(op_name) KILN_KERNELS_UNARY_OP(op_name, (std::is_same_v<T, float>), op_name(x))
KILN_KERNELS_MATH_UNARY(sin)
KILN_KERNELS_MATH_UNARY(cos)
KILN_KERNELS_MATH_UNARY(tan)
KILN_KERNELS_MATH_UNARY(asin)
KILN_KERNELS_MATH_UNARY(acos)
KILN_KERNELS_MATH_UNARY(atan)
KILN_KERNELS_MATH_UNARY(sinh)
KILN_KERNELS_MATH_UNARY(cosh)
KILN_KERNELS_MATH_UNARY(asinh)
KILN_KERNELS_MATH_UNARY(acosh)
KILN_KERNELS_MATH_UNARY(atanh)
#undef KILN_KERNELS_MATH_UNARY
#undef KILN_KERNELS_UNARY_OP


/// min(max(x, lo), hi) with NaN kept; `lo` and `hi` converted to the element type.
/// (Integer batches avoid xsimd::select: xsimd 8.1's integer select for AVX-512BW does not
/// compile with GCC without optimisation, where GCC's intrinsics are casting macros.)
struct clip : numeric_operator {
  static constexpr std::string_view name = "clip";
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  clip() = default;
  constexpr clip(double lo_, double hi_) : lo(lo_), hi(hi_) {}
  template <class V>
  V operator()(const V& x) const {
    using E = element_t<V>;
    const E l = bound<E>(lo), h = bound<E>(hi);
    if constexpr (std::is_arithmetic_v<V>) return x < l ? l : h < x ? h : x;
    else if constexpr (std::is_integral_v<E>) return xsimd::min(xsimd::max(x, V(l)), V(h));
    else return xsimd::select(x < V(l), V(l), xsimd::select(V(h) < x, V(h), x));  // NaN stays NaN
  }
  /// `v` in type E, saturating for integers.
  template <class E>
  static E bound(double v) {
    if constexpr (std::is_floating_point_v<E>) {
      return E(v);
    } else {
      if (std::isnan(v)) return 0;
      if (v <= double(std::numeric_limits<E>::min())) return std::numeric_limits<E>::min();
      if (v >= double(std::numeric_limits<E>::max())) return std::numeric_limits<E>::max();
      return E(v);
    }
  }
};

struct logical_not {
  static constexpr std::string_view name = "logical_not";
  static bool accepts(dtype t) { return t == dtype::bool_; }
  std::uint8_t operator()(std::uint8_t x) const { return x == 0; }
};

// ---- conversion ---------------------------------------------------------------------------------

/// `x` as `To`: float to integer truncates toward zero and saturates (NaN gives 0); anything to
/// bool is `x != 0`; bool to anything is 0 or 1.
template <class To, class From>
To convert(From x, bool to_bool, bool from_bool) {
  if (from_bool) return To(x != 0);
  if (to_bool) return To(x != From(0));
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(x)) return 0;
    if (x <= From(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (x >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return To(x);
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    return To(std::make_unsigned_t<To>(x));  // modular, as numpy's astype
  } else {
    return To(x);
  }
}

}  // namespace kiln::kernels::ops
