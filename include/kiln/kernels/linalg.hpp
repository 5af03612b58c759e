// SPDX-License-Identifier: Apache-2.0
/// \file
/// `matmul` with numpy semantics (the IR's `matmul`): batched, with the batch dimensions
/// broadcast; a 1-D first operand is a row vector and a 1-D second operand a column vector, their
/// unit dimension dropped from the result. Either operand may be used transposed (its last two
/// axes swapped), without a copy.
///
///     tensor c = kernels::matmul(a, b);                    // [..., M, K] x [..., K, N]
///     kernels::matmul(q, k, scores, false, /*transpose_b=*/true);   // q k^T
///
/// `matmul_fused` applies a fused elementwise expression to the product as the GEMM produces it
/// (the compiler's epilogue fusion: matmul + bias + activation + residual in one pass):
///
///     kernels::matmul_fused(x, w, fused_expr::parse("(gelu (add x0 x1))"), {bias}, out);
///
/// float32 and float64 go through the packed GEMM (`gemm.hpp`); integer dtypes through a plain
/// loop with wrapping arithmetic.
#pragma once

#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/ops.hpp>

#include <span>

namespace kiln::kernels {

namespace detail {

/// The operands of a matmul as matrices over a broadcast batch.
struct matmul_plan {
  dims batch;                      ///< broadcast batch shape
  dims a_batch_stride, b_batch_stride, c_batch_stride;  ///< per batch axis, in elements (0 where broadcast)
  std::int64_t m, n, k;
  std::int64_t a_rs, a_cs, b_rs, b_cs;  ///< the matrices' strides after transposition
  shape_vector out_shape;
};

inline matmul_plan plan_matmul(const tensor& a, const tensor& b, bool ta, bool tb) {
  constexpr std::string_view op = "matmul";
  if (!a.defined() || !b.defined()) fail(op, "an operand is undefined");
  if (a.ndim() == 0 || b.ndim() == 0)
    fail(op, kiln::detail::concat("operands must have rank at least 1, got ", describe_operand(a), " and ", describe_operand(b)));
  if (a.type() != b.type())
    fail(op, kiln::detail::concat("operands ", describe_operand(a), " and ", describe_operand(b), " have different dtypes; cast one first"));
  if (!ops::is_numeric(a.type())) fail(op, kiln::detail::concat("does not take ", name(a.type()), " tensors"));
  matmul_plan p;
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  // The matrix dimensions and strides of each operand.
  const std::size_t ar = a.ndim(), br = b.ndim();
  std::int64_t am, ak, a_rs, a_cs, bk, bn, b_rs, b_cs;
  if (a_vec) {
    am = 1, ak = a.shape(0), a_rs = 0, a_cs = a.strides()[0];
  } else {
    am = a.shape(ar - 2), ak = a.shape(ar - 1), a_rs = a.strides()[ar - 2], a_cs = a.strides()[ar - 1];
    if (ta) std::swap(am, ak), std::swap(a_rs, a_cs);
  }
  if (b_vec) {
    bk = b.shape(0), bn = 1, b_rs = b.strides()[0], b_cs = 0;
  } else {
    bk = b.shape(br - 2), bn = b.shape(br - 1), b_rs = b.strides()[br - 2], b_cs = b.strides()[br - 1];
    if (tb) std::swap(bk, bn), std::swap(b_rs, b_cs);
  }
  if (ak != bk)
    fail(op, kiln::detail::concat("the inner dimensions differ: ", describe_operand(a), ta ? " (transposed)" : "", " x ", describe_operand(b),
                                  tb ? " (transposed)" : "", " (", ak, " and ", bk, ")"));
  p.m = am, p.n = bn, p.k = ak, p.a_rs = a_rs, p.a_cs = a_cs, p.b_rs = b_rs, p.b_cs = b_cs;
  // Batch dimensions: numpy broadcasting of everything before the last two axes.
  const std::size_t a_nb = a_vec ? 0 : ar - 2, b_nb = b_vec ? 0 : br - 2, nb = std::max(a_nb, b_nb);
  p.batch.assign(nb, 1);
  p.a_batch_stride.assign(nb, 0);
  p.b_batch_stride.assign(nb, 0);
  for (std::size_t i = 0; i < nb; ++i) {
    const std::int64_t da = i + a_nb >= nb ? a.shape(i + a_nb - nb) : 1, db = i + b_nb >= nb ? b.shape(i + b_nb - nb) : 1;
    if (da != db && da != 1 && db != 1)
      fail(op, kiln::detail::concat("the batch dimensions of ", describe_operand(a), " and ", describe_operand(b), " do not broadcast (",
                                    da, " and ", db, ")"));
    p.batch[i] = da == 1 ? db : da;
    if (da != 1) p.a_batch_stride[i] = a.strides()[i + a_nb - nb];
    if (db != 1) p.b_batch_stride[i] = b.strides()[i + b_nb - nb];
  }
  p.out_shape.assign(p.batch.begin(), p.batch.end());
  if (!a_vec) p.out_shape.push_back(p.m);
  if (!b_vec) p.out_shape.push_back(p.n);
  return p;
}

/// Folds the innermost batch axes into the rows of A and C where both describe the same
/// elements: B is the same matrix along the axis (stride 0), and A, C and every `extra` operand
/// (row stride, batch strides: the epilogue's) step along it by whole matrices — or have one row.
/// A [128, 1, 256] @ [256, 768] (a sequence-first activation times a weight) is then one
/// 128 x 256 x 768 product rather than 128 products of one row, each packing the weight again.
inline void fold_batch_into_rows(matmul_plan& p, std::int64_t& c_rs, dims& c_bs, std::span<std::int64_t> extra_rs = {},
                                 std::span<dims> extra_bs = {}) {
  while (!p.batch.empty()) {
    const std::size_t i = p.batch.size() - 1;
    if (const std::int64_t n = p.batch[i]; n != 1) {
      if (p.b_batch_stride[i] != 0) return;
      bool fits = p.m == 1 || (p.a_batch_stride[i] == p.m * p.a_rs && c_bs[i] == p.m * c_rs);
      for (std::size_t k = 0; k < extra_rs.size(); ++k) fits = fits && (p.m == 1 || extra_bs[k][i] == p.m * extra_rs[k]);
      if (!fits) return;
      if (p.m == 1) {  // one row: its stride is free, so make it the batch stride
        p.a_rs = p.a_batch_stride[i], c_rs = c_bs[i];
        for (std::size_t k = 0; k < extra_rs.size(); ++k) extra_rs[k] = extra_bs[k][i];
      }
      p.m *= n;
    }
    p.batch.pop_back(), p.a_batch_stride.pop_back(), p.b_batch_stride.pop_back(), c_bs.pop_back();
    for (dims& bs : extra_bs) bs.pop_back();
  }
}

}  // namespace detail

/// out = a @ b (numpy matmul), with `a` and/or `b` used transposed.
inline void matmul(const tensor& a, const tensor& b, const tensor& out, bool transpose_a = false, bool transpose_b = false) {
  constexpr std::string_view op = "matmul";
  detail::matmul_plan p = detail::plan_matmul(a, b, transpose_a, transpose_b);
  check_output(op, out, a.type(), p.out_shape);
  if (overlaps(out, a) || overlaps(out, b))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an input; write into a separate tensor"));
  // The output's matrix strides (a dropped unit dimension has stride 0 and size 1).
  const std::size_t orank = out.ndim();
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  std::int64_t c_rs = a_vec ? 0 : out.strides()[orank - (b_vec ? 1 : 2)];
  const std::int64_t c_cs = b_vec ? 0 : out.strides()[orank - 1];
  if (p.m == 0 || p.n == 0) return;
  dims c_bs(out.strides().begin(), out.strides().begin() + std::ptrdiff_t(p.batch.size()));
  detail::fold_batch_into_rows(p, c_rs, c_bs);
  const std::size_t nb = p.batch.size();
  visit_dtype(op, a.type(), [&]<class T>(type_tag<T>) {
    const T* ab = static_cast<const T*>(a.data());
    const T* bb = static_cast<const T*>(b.data());
    T* cb = static_cast<T*>(out.data());
    for_each_offsets<3>(std::span<const std::int64_t>(p.batch.data(), nb),
                        {p.a_batch_stride.data(), p.b_batch_stride.data(), c_bs.data()},
                        [&](const std::array<std::int64_t, 3>& off) {
                          const auto [ao, bo, co] = off;
                          if constexpr (std::is_floating_point_v<T>) {
                            gemm<T>({ab + ao, p.m, p.k, p.a_rs, p.a_cs}, {bb + bo, p.k, p.n, p.b_rs, p.b_cs}, {cb + co, p.m, p.n, c_rs, c_cs});
                          } else {
                            for (std::int64_t i = 0; i < p.m; ++i)
                              for (std::int64_t j = 0; j < p.n; ++j) {
                                T s = 0;
                                for (std::int64_t q = 0; q < p.k; ++q)
                                  s = ops::add{}(s, ops::multiply{}(ab[ao + i * p.a_rs + q * p.a_cs], bb[bo + q * p.b_rs + j * p.b_cs]));
                                cb[co + i * c_rs + j * c_cs] = s;
                              }
                          }
                        });
  });
}
inline tensor matmul(const tensor& a, const tensor& b, bool transpose_a = false, bool transpose_b = false) {
  const detail::matmul_plan p = detail::plan_matmul(a, b, transpose_a, transpose_b);
  tensor out = new_output(p.out_shape, a.type());
  matmul(a, b, out, transpose_a, transpose_b);
  return out;
}

/// out = epilogue(a @ b, operands...): `epilogue` is a fused expression whose x0 is the product
/// and x1... are `operands` (each broadcasting to the result's shape, as in numpy); it is applied
/// to each block of the output right after the GEMM computes it, while the block is in L1, so the
/// fused form reads and writes the output once. float32 and float64.
///
/// When the output is a vector (a 1-D operand) or overlaps an operand, the product is computed
/// first and the expression applied afterwards, with the same result.
inline void matmul_fused(const tensor& a, const tensor& b, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out,
                         bool transpose_a = false, bool transpose_b = false) {
  constexpr std::string_view op = "matmul_fused";
  detail::matmul_plan p = detail::plan_matmul(a, b, transpose_a, transpose_b);
  check_output(op, out, a.type(), p.out_shape);
  if (overlaps(out, a) || overlaps(out, b))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an input; write into a separate tensor"));
  const std::vector<std::vector<std::int64_t>> strides = detail::check_epilogue(op, epilogue, operands, out);
  bool separate = a.ndim() == 1 || b.ndim() == 1;
  for (const tensor& t : operands) separate |= overlaps(out, t);
  if (separate) {  // product first, then the expression over it
    const tensor product = new_output(p.out_shape, a.type());
    matmul(a, b, product, transpose_a, transpose_b);
    std::vector<tensor> inputs{product};
    inputs.insert(inputs.end(), operands.begin(), operands.end());
    epilogue.run(inputs, out);
    return;
  }
  if (p.m == 0 || p.n == 0) return;
  const std::size_t orank = out.ndim();
  // Row strides and batch strides of the output and of each epilogue operand, batch axes folded
  // into rows where they can be.
  std::int64_t c_rs = out.strides()[orank - 2];
  dims c_bs(out.strides().begin(), out.strides().begin() + std::ptrdiff_t(p.batch.size()));
  std::vector<std::int64_t> op_rs;
  std::vector<dims> op_bs;
  for (const auto& st : strides) op_rs.push_back(st[orank - 2]), op_bs.emplace_back(st.begin(), st.begin() + std::ptrdiff_t(p.batch.size()));
  detail::fold_batch_into_rows(p, c_rs, c_bs, op_rs, op_bs);
  const std::size_t nb = p.batch.size();
  visit_dtype(op, a.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<epilogue_operand<T>> ops;
      for (std::size_t k = 0; k < operands.size(); ++k)
        ops.push_back({static_cast<const T*>(operands[k].data()), op_rs[k], strides[k][orank - 1]});
      fused_epilogue<T> epi(epilogue, ops);
      const T* ab = static_cast<const T*>(a.data());
      const T* bb = static_cast<const T*>(b.data());
      T* cb = static_cast<T*>(out.data());
      dims idx(nb, 0);
      for_each_offsets<3>(std::span<const std::int64_t>(p.batch.data(), nb), {p.a_batch_stride.data(), p.b_batch_stride.data(), c_bs.data()},
                          [&](const std::array<std::int64_t, 3>& off) {
                            fused_epilogue<T> here = epi;  // the operands of this matrix of the batch
                            for (std::size_t k = 0; k < operands.size(); ++k) {
                              std::int64_t d = 0;
                              for (std::size_t i = 0; i < nb; ++i) d += idx[i] * op_bs[k][i];
                              here.shift(k, d);
                            }
                            const auto [ao, bo, co] = off;
                            gemm<T>({ab + ao, p.m, p.k, p.a_rs, p.a_cs}, {bb + bo, p.k, p.n, p.b_rs, p.b_cs},
                                    {cb + co, p.m, p.n, c_rs, out.strides()[orank - 1]}, false, here);
                            for (std::size_t i = nb; i-- > 0;) {  // the next batch index, last axis fastest
                              if (++idx[i] < p.batch[i]) break;
                              idx[i] = 0;
                            }
                          });
    }
  });
}
inline void matmul_fused(const tensor& a, const tensor& b, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out,
                         bool transpose_a = false, bool transpose_b = false) {
  matmul_fused(a, b, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out, transpose_a, transpose_b);
}

}  // namespace kiln::kernels
