// SPDX-License-Identifier: Apache-2.0
/// \file
/// `matmul`: batched matrix product with numpy semantics.
#pragma once

#include <kiln/ir/op/infer.hpp>

namespace kiln::ir::detail {

inline type infer_matmul(const call_context& ctx) {
  auto& a = ctx.tensor(0);
  auto& b = ctx.tensor(1);
  dtype d = ctx.attr<dtype>("out_dtype");
  if (!is_known(d)) d = common_dtype(ctx, {0, 1});
  if (a.ndim == 0 || b.ndim == 0) ctx.fail_arg(a.ndim == 0 ? 0 : 1, "must have rank at least 1, but is a scalar");
  if (a.ndim < 0 || b.ndim < 0) return tensor_type_of_rank(d, -1);
  const int out_ndim = std::max(a.ndim, b.ndim) - (a.ndim == 1) - (b.ndim == 1);
  if (!a.shape || !b.shape) return tensor_type_of_rank(d, out_ndim);
  const std::vector<prim_expr>& as = *a.shape;
  const std::vector<prim_expr>& bs = *b.shape;
  const prim_expr& k_a = as.back();
  const prim_expr& k_b = b.ndim == 1 ? bs[0] : bs[bs.size() - 2];
  if (prove_not_equal(k_a, k_b))
    ctx.fail("reduction dimensions differ: argument " + ctx.arg_label(0) + " has shape " + dims_to_string(as) +
             " and argument " + ctx.arg_label(1) + " has shape " + dims_to_string(bs) + " (" + to_string(k_a) +
             " vs " + to_string(k_b) + ")");
  // batch dimensions broadcast
  const std::size_t batch_a = as.size() >= 2 ? as.size() - 2 : 0, batch_b = bs.size() >= 2 ? bs.size() - 2 : 0;
  const std::size_t nb = std::max(batch_a, batch_b);
  std::vector<prim_expr> out;
  bool known = true;
  for (std::size_t k = nb; k >= 1; --k) {
    const prim_expr* x = k <= batch_a ? &as[batch_a - k] : nullptr;
    const prim_expr* y = k <= batch_b ? &bs[batch_b - k] : nullptr;
    if (!x) out.push_back(*y);
    else if (!y || as_int(*y) == 1) out.push_back(*x);
    else if (as_int(*x) == 1 || prove_equal(*x, *y)) out.push_back(*y);
    else if (as_int(*x) && as_int(*y))
      ctx.fail("cannot broadcast batch dimensions " + to_string(*x) + " and " + to_string(*y) + " of shapes " +
               dims_to_string(as) + " and " + dims_to_string(bs));
    else known = false, out.push_back(*x);
  }
  if (a.ndim >= 2) out.push_back(as[as.size() - 2]);
  if (b.ndim >= 2) out.push_back(bs.back());
  if (!known) return tensor_type_of_rank(d, out_ndim);
  return tensor_type(std::move(out), d);
}

inline void register_linalg_ops(op_registry& r) {
  r.add({"matmul", {"x1", "x2"}, {{"out_dtype", attr_kind::data_type, dtype::void_}}, infer_matmul,
         op_pattern::out_elemwise_fusable, "batched matrix product with numpy semantics (1-D operands, broadcast batches)"});
}

}  // namespace kiln::ir::detail
