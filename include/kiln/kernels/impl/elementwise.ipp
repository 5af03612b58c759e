// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/elementwise.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/elementwise.hpp>

namespace kiln::kernels {

#define KILN_KERNELS_DEFINE_BINARY(op_name, driver, result_type)                                         \
  KILN_DECL void op_name(const tensor& a, const tensor& b, const tensor& out) { driver(ops::op_name{}, a, b, out); } \
  KILN_DECL tensor op_name(const tensor& a, const tensor& b) {                                         \
    detail::require_same_dtype(ops::op_name::name, {&a, &b});                                           \
    tensor out = new_output(broadcast_shapes(ops::op_name::name, {&a, &b}), result_type);              \
    op_name(a, b, out);                                                                                \
    return out;                                                                                        \
  }
KILN_KERNELS_BINARY_OPERATORS(KILN_KERNELS_DEFINE_BINARY)
#undef KILN_KERNELS_DEFINE_BINARY

#define KILN_KERNELS_DEFINE_UNARY(op_name)                                                              \
  KILN_DECL void op_name(const tensor& x, const tensor& out) { unary(ops::op_name{}, x, out); }         \
  KILN_DECL tensor op_name(const tensor& x) {                                                           \
    if (!x.defined()) fail(ops::op_name::name, "the operand is undefined");                             \
    tensor out = new_output(x.shape(), x.type());                                                       \
    op_name(x, out);                                                                                    \
    return out;                                                                                         \
  }
KILN_KERNELS_UNARY_OPERATORS(KILN_KERNELS_DEFINE_UNARY)
#undef KILN_KERNELS_DEFINE_UNARY

}  // namespace kiln::kernels

namespace kiln::kernels {

KILN_DECL void clip(const tensor& x, double lo, double hi, const tensor& out) {
  if (lo > hi) fail("clip", "the lower bound " + std::to_string(lo) + " is above the upper bound " + std::to_string(hi));
  unary(ops::clip{lo, hi}, x, out);
}

KILN_DECL tensor clip(const tensor& x, double lo, double hi) {
  if (!x.defined()) fail("clip", "the operand is undefined");
  tensor out = new_output(x.shape(), x.type());
  clip(x, lo, hi, out);
  return out;
}

KILN_DECL void where(const tensor& cond, const tensor& x, const tensor& y, const tensor& out) {
  constexpr std::string_view op = "where";
  if (!cond.defined()) fail(op, "the condition is undefined");
  if (cond.type() != dtype::bool_) fail(op, "the condition must be a bool tensor, got " + describe_operand(cond));
  detail::require_same_dtype(op, {&x, &y});
  check_output(op, out, x.type(), broadcast_dims(op, {&cond, &x, &y}));
  check_no_overlap(op, out, {&cond, &x, &y});
  const loop_plan<4> plan({&out, &cond, &x, &y});
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 4>& p, const std::array<std::int64_t, 4>& s) {
      detail::scalar_run<T, std::uint8_t, T, T>([](std::uint8_t c, T a, T b) { return c ? a : b; }, n, p, s);
    });
  });
}

KILN_DECL tensor where(const tensor& cond, const tensor& x, const tensor& y) {
  detail::require_same_dtype("where", {&x, &y});
  if (!cond.defined()) fail("where", "the condition is undefined");
  tensor out = new_output(broadcast_shapes("where", {&cond, &x, &y}), x.type());
  where(cond, x, y, out);
  return out;
}

KILN_DECL void cast(const tensor& x, const tensor& out) {
  constexpr std::string_view op = "cast";
  if (!x.defined() || !out.defined()) fail(op, "an operand is undefined");
  check_output(op, out, out.type(), x.shape());
  check_no_overlap(op, out, {&x});
  const bool from_bool = x.type() == dtype::bool_, to_bool = out.type() == dtype::bool_;
  const loop_plan<2> plan({&out, &x});
  // float16 is a storage type only: converted through float32, element by element (a double goes
  // to float first, so it may round twice).
  if (x.type() == dtype::float16 && out.type() == dtype::float16) {
    parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 2>& p, const std::array<std::int64_t, 2>& s) {
      detail::scalar_run<std::uint16_t, std::uint16_t>([](std::uint16_t h) { return h; }, n, p, s);
    });
    return;
  }
  if (x.type() == dtype::float16) {
    visit_dtype(op, out.type(), [&]<class To>(type_tag<To>) {
      parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 2>& p, const std::array<std::int64_t, 2>& s) {
        detail::scalar_run<To, std::uint16_t>([&](std::uint16_t h) { return ops::convert<To>(half_to_float(h), to_bool, false); }, n, p, s);
      });
    });
    return;
  }
  if (out.type() == dtype::float16) {
    visit_dtype(op, x.type(), [&]<class From>(type_tag<From>) {
      parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 2>& p, const std::array<std::int64_t, 2>& s) {
        detail::scalar_run<std::uint16_t, From>([](From v) { return float_to_half(static_cast<float>(v)); }, n, p, s);
      });
    });
    return;
  }
  visit_dtype(op, x.type(), [&]<class From>(type_tag<From>) {
    visit_dtype(op, out.type(), [&]<class To>(type_tag<To>) {
      parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 2>& p, const std::array<std::int64_t, 2>& s) {
        detail::scalar_run<To, From>([&](From v) { return ops::convert<To>(v, to_bool, from_bool); }, n, p, s);
      });
    });
  });
}

KILN_DECL tensor cast(const tensor& x, dtype to) {
  if (!x.defined()) fail("cast", "the operand is undefined");
  tensor out = new_output(x.shape(), to);
  cast(x, out);
  return out;
}

}  // namespace kiln::kernels
