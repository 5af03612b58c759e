// SPDX-License-Identifier: Apache-2.0
/// \file
/// Elementwise kernels with numpy broadcasting: binary arithmetic, comparisons and logic, unary
/// math, `where`, `clip` and `cast`.
///
/// Every kernel comes in two forms: destination-passing, `add(a, b, out)`, which checks `out` and
/// allocates nothing (what compiled code calls), and allocating, `add(a, b)`, which returns a new
/// contiguous tensor. Operands of one kernel share one dtype (no implicit promotion: `cast`
/// first); they may have any strides, and `out` may be one of the inputs itself.
///
///     tensor y = kernels::add(x, kernels::exp(z));     // broadcasts x and exp(z)
///     kernels::multiply(a, b, out);                     // into an existing tensor
///
/// Vectorized operators run on xsimd batches through `map_run`: contiguous and broadcast operands
/// are loaded directly, other strides are gathered into a batch; the tail of a run goes through a
/// padded batch, so all elements get the same arithmetic. From `min_parallel_elements` on, the
/// kernels' threads share the elements out in contiguous ranges (`parallel_for_each_run`).
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/ops.hpp>
#include <kiln/kernels/parallel.hpp>

namespace kiln::kernels {

namespace detail {

/// Calls `f.template operator()<M>()` with the compile-time value M == mask (< 2^NI).
template <std::size_t NI, class F>
void with_mask(unsigned mask, F&& f) {
  [&]<unsigned... M>(std::integer_sequence<unsigned, M...>) {
    ((mask == M ? (f.template operator()<M>(), 0) : 0), ...);
  }(std::make_integer_sequence<unsigned, (1u << NI)>{});
}

/// Full batches of a run whose output is contiguous and whose input k is contiguous, or
/// broadcast when bit k of `Broadcast` is set. Returns how many elements it did.
template <class T, unsigned Broadcast, std::size_t NI, class Op>
std::int64_t map_batches(const Op& op, std::int64_t n, const std::array<char*, NI + 1>& ptr) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  T* out = reinterpret_cast<T*>(ptr[0]);
  std::array<const T*, NI> in;
  std::array<V, NI> splat;
  for (std::size_t k = 0; k < NI; ++k) {
    in[k] = reinterpret_cast<const T*>(ptr[k + 1]);
    splat[k] = V(Broadcast >> k & 1 ? *in[k] : T(0));
  }
  auto at = [&]<std::size_t... K>(std::index_sequence<K...>, std::int64_t i) {
    return op((Broadcast >> K & 1 ? splat[K] : V::load_unaligned(in[K] + i))...);
  };
  std::int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const V r0 = at(std::make_index_sequence<NI>{}, i);
    const V r1 = at(std::make_index_sequence<NI>{}, i + W);
    r0.store_unaligned(out + i);
    r1.store_unaligned(out + i + W);
  }
  for (; i + W <= n; i += W) at(std::make_index_sequence<NI>{}, i).store_unaligned(out + i);
  return i;
}

/// Applies a vectorized operator to `n` elements of `NI` inputs of type T, into `out` of type T.
/// `ptr`/`stride` (bytes) give operand k+1 for input k, operand 0 for the output.
template <class T, class Op, std::size_t NI>
void map_run(const Op& op, std::int64_t n, const std::array<char*, NI + 1>& ptr, const std::array<std::int64_t, NI + 1>& stride) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  constexpr std::int64_t item = sizeof(T);
  std::int64_t i = 0;
  // The common cases: output contiguous, each input contiguous or broadcast.
  bool simple = stride[0] == item;
  unsigned broadcast = 0;
  for (std::size_t k = 0; k < NI; ++k) {
    simple = simple && (stride[k + 1] == item || stride[k + 1] == 0);
    if (stride[k + 1] == 0) broadcast |= 1u << k;
  }
  if (simple) {
    with_mask<NI>(broadcast, [&]<unsigned M>() { i = map_batches<T, M, NI>(op, n, ptr); });
    if (i == n) return;
  }
  // Strided operands, and the tail: gather up to W elements per operand into a padded buffer.
  alignas(64) T buf[NI ? NI : 1][W];
  alignas(64) T res[W];
  const std::int64_t so = stride[0];
  for (; i < n; i += W) {
    const std::int64_t m = std::min(W, n - i);
    for (std::size_t k = 0; k < NI; ++k) {
      const char* p = ptr[k + 1] + i * stride[k + 1];
      for (std::int64_t j = 0; j < m; ++j) std::memcpy(&buf[k][j], p + j * stride[k + 1], sizeof(T));
      for (std::int64_t j = m; j < W; ++j) buf[k][j] = buf[k][0];  // valid values: no spurious NaN or traps
    }
    [&]<std::size_t... K>(std::index_sequence<K...>) { op(V::load_aligned(buf[K])...).store_aligned(res); }(std::make_index_sequence<NI>{});
    char* q = ptr[0] + i * so;
    for (std::int64_t j = 0; j < m; ++j) std::memcpy(q + j * so, &res[j], sizeof(T));
  }
}

/// The scalar loop for operators that are not vectorized for T (and for bool results): `f(in...)`
/// of the input element types `In...`, stored as `Out`.
template <class Out, class... In, class F>
void scalar_run(F&& f, std::int64_t n, const std::array<char*, sizeof...(In) + 1>& ptr,
                const std::array<std::int64_t, sizeof...(In) + 1>& stride) {
  auto at = [&]<class T>(std::size_t k, std::int64_t i) {
    T v;
    std::memcpy(&v, ptr[k] + i * stride[k], sizeof(T));
    return v;
  };
  for (std::int64_t i = 0; i < n; ++i) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      const Out r = Out(f(at.template operator()<In>(K + 1, i)...));
      std::memcpy(ptr[0] + i * stride[0], &r, sizeof(Out));
    }(std::index_sequence_for<In...>{});
  }
}

inline void require_same_dtype(std::string_view op, std::initializer_list<const tensor*> operands) {
  const tensor& first = **operands.begin();
  for (const tensor* t : operands) {
    if (!t->defined()) fail(op, "an operand is undefined");
    if (t->type() != first.type()) {
      std::string all;
      for (const tensor* u : operands) all.append(all.empty() ? "" : " and ").append(describe_operand(*u));
      fail(op, "operands " + all + " have different dtypes; cast one first");
    }
  }
}

template <class Op>
void require_accepts(std::string_view op, const tensor& t) {
  if (!Op::accepts(t.type())) fail(op, kiln::detail::concat("does not take ", name(t.type()), " tensors (operand ", describe_operand(t), ")"));
}

}  // namespace detail

// ---- generic drivers ------------------------------------------------------------------------------

/// `out = op(a, b)` elementwise with broadcasting, for an operator of `ops.hpp` whose result has
/// the operands' dtype.
template <class Op>
void binary(const Op& op, const tensor& a, const tensor& b, const tensor& out) {
  constexpr std::string_view name = Op::name;
  // The common case first, with the fewest checks: one dtype, one shape, all contiguous.
  if (a.defined() && b.defined() && out.defined() && a.type() == b.type() && out.type() == a.type() && Op::accepts(a.type()) &&
      a.shape() == b.shape() && out.shape() == a.shape() && a.is_contiguous() && b.is_contiguous() && out.is_contiguous() &&
      !overlaps_differently(out, a) && !overlaps_differently(out, b)) {
    visit_dtype(name, a.type(), [&]<class T>(type_tag<T>) {
      const std::array<std::int64_t, 3> s{sizeof(T), sizeof(T), sizeof(T)};
      parallel_ranges(out.numel(), 1024, min_parallel_elements, [&](std::int64_t begin, std::int64_t end) {
        const std::array<char*, 3> p{static_cast<char*>(out.data()) + begin * s[0], static_cast<char*>(a.data()) + begin * s[1],
                                     static_cast<char*>(b.data()) + begin * s[2]};
        if constexpr (Op::template vectorized<T>) detail::map_run<T, Op, 2>(op, end - begin, p, s);
        else detail::scalar_run<T, T, T>(op, end - begin, p, s);
      });
    });
    return;
  }
  detail::require_same_dtype(name, {&a, &b});
  detail::require_accepts<Op>(name, a);
  check_output(name, out, a.type(), broadcast_dims(name, {&a, &b}));
  check_no_overlap(name, out, {&a, &b});
  const loop_plan<3> plan({&out, &a, &b});
  visit_dtype(name, a.type(), [&]<class T>(type_tag<T>) {
    parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 3>& p, const std::array<std::int64_t, 3>& s) {
      if constexpr (Op::template vectorized<T>) detail::map_run<T, Op, 2>(op, n, p, s);
      else detail::scalar_run<T, T, T>(op, n, p, s);
    });
  });
}

/// `out = op(a, b)` for a comparison or logical operator: bool result.
template <class Op>
void compare(const Op& op, const tensor& a, const tensor& b, const tensor& out) {
  constexpr std::string_view name = Op::name;
  detail::require_same_dtype(name, {&a, &b});
  detail::require_accepts<Op>(name, a);
  check_output(name, out, dtype::bool_, broadcast_dims(name, {&a, &b}));
  check_no_overlap(name, out, {&a, &b});
  const loop_plan<3> plan({&out, &a, &b});
  visit_dtype(name, a.type(), [&]<class T>(type_tag<T>) {
    parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 3>& p, const std::array<std::int64_t, 3>& s) {
      detail::scalar_run<std::uint8_t, T, T>(op, n, p, s);
    });
  });
}

/// `out = op(x)` elementwise.
template <class Op>
void unary(const Op& op, const tensor& x, const tensor& out) {
  constexpr std::string_view name = Op::name;
  detail::require_same_dtype(name, {&x});
  detail::require_accepts<Op>(name, x);
  check_output(name, out, x.type(), x.shape());
  check_no_overlap(name, out, {&x});
  const loop_plan<2> plan({&out, &x});
  visit_dtype(name, x.type(), [&]<class T>(type_tag<T>) {
    parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 2>& p, const std::array<std::int64_t, 2>& s) {
      if constexpr (requires { Op::template vectorized<T>; }) {
        if constexpr (Op::template vectorized<T>) detail::map_run<T, Op, 1>(op, n, p, s);
        else detail::scalar_run<T, T>(op, n, p, s);
      } else {
        detail::scalar_run<T, T>(op, n, p, s);
      }
    });
  });
}

// ---- the operators ----------------------------------------------------------------------------------

// The operators, as X-macro lists for the code that repeats something for each (the declarations
// here, the definitions in impl/elementwise.ipp, the VM registration): X(name, driver, result
// dtype) for the binary ones, whose result is computed into `out` by `driver` (`binary`, or
// `compare` for bool results) and allocated with dtype `result dtype`; X(name) for the unary ones.
#define KILN_KERNELS_BINARY_OPERATORS(X)   \
  X(add, binary, a.type())                 \
  X(subtract, binary, a.type())            \
  X(multiply, binary, a.type())            \
  X(divide, binary, a.type())              \
  X(floor_divide, binary, a.type())        \
  X(fmod, binary, a.type())                \
  X(power, binary, a.type())               \
  X(maximum, binary, a.type())             \
  X(minimum, binary, a.type())             \
  X(equal, compare, dtype::bool_)          \
  X(not_equal, compare, dtype::bool_)      \
  X(less, compare, dtype::bool_)           \
  X(less_equal, compare, dtype::bool_)     \
  X(greater, compare, dtype::bool_)        \
  X(greater_equal, compare, dtype::bool_)  \
  X(logical_and, compare, dtype::bool_)    \
  X(logical_or, compare, dtype::bool_)
#define KILN_KERNELS_UNARY_OPERATORS(X)  \
  X(negative)                            \
  X(abs)                                 \
  X(relu)                                \
  X(exp)                                 \
  X(log)                                 \
  X(sqrt)                                \
  X(rsqrt)                               \
  X(tanh)                                \
  X(sigmoid)                             \
  X(erf)                                 \
  X(gelu)                                \
  X(gelu_tanh)                           \
  X(logical_not)                         \
  X(sin)                                 \
  X(cos)                                 \
  X(tan)                                 \
  X(asin)                                \
  X(acos)                                \
  X(atan)                                \
  X(sinh)                                \
  X(cosh)                                \
  X(asinh)                               \
  X(acosh)                               \
  X(atanh)                               \
  X(floor)                               \
  X(ceil)                                \
  X(round)

// Each operator in its two forms: into a given output, and allocating the output.
#define KILN_KERNELS_DECLARE_BINARY(op_name, driver, result_type)                                        \
  KILN_DECL void op_name(const tensor& a, const tensor& b, const tensor& out);                          \
  KILN_DECL tensor op_name(const tensor& a, const tensor& b);
KILN_KERNELS_BINARY_OPERATORS(KILN_KERNELS_DECLARE_BINARY)
#undef KILN_KERNELS_DECLARE_BINARY
#define KILN_KERNELS_DECLARE_UNARY(op_name)                                                             \
  KILN_DECL void op_name(const tensor& x, const tensor& out);                                           \
  KILN_DECL tensor op_name(const tensor& x);
KILN_KERNELS_UNARY_OPERATORS(KILN_KERNELS_DECLARE_UNARY)
#undef KILN_KERNELS_DECLARE_UNARY

/// min(max(x, lo), hi); either bound may be infinite.
KILN_DECL void clip(const tensor& x, double lo, double hi, const tensor& out);
KILN_DECL tensor clip(const tensor& x, double lo, double hi);

/// `out[i] = cond[i] ? x[i] : y[i]` with broadcasting of all three; `cond` is bool.
KILN_DECL void where(const tensor& cond, const tensor& x, const tensor& y, const tensor& out);
KILN_DECL tensor where(const tensor& cond, const tensor& x, const tensor& y);

/// `x` converted to `out`'s dtype (see `ops::convert` for the rules); shapes must match.
KILN_DECL void cast(const tensor& x, const tensor& out);
KILN_DECL tensor cast(const tensor& x, dtype to);

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/elementwise.ipp>
#endif
