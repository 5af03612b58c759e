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

#include <kiln/support/config.hpp>

#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/ops.hpp>
#include <kiln/kernels/packing.hpp>

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

KILN_DECL matmul_plan plan_matmul(const tensor& a, const tensor& b, bool ta, bool tb);

}  // namespace detail

namespace detail {

/// The product of one matrix of the batch: B strided (read in place or packed per call), or
/// prepacked (`prepacked`: B's data is the packed weight, which has no batch axes).
template <class T, class Epilogue = no_epilogue>
void gemm_operands(const matmul_plan& p, matrix_view<const T> a, const T* b, bool prepacked, matrix_view<T> c, const Epilogue& epilogue = {}) {
  if (prepacked)
    gemm_prepacked<T>(a, b, c, false, epilogue);
  else
    gemm<T>(a, {b, p.k, p.n, p.b_rs, p.b_cs}, c, false, epilogue);
}

}  // namespace detail

/// out = a @ b (numpy matmul), with `a` and/or `b` used transposed.
KILN_DECL void matmul(const tensor& a, const tensor& b, const tensor& out, bool transpose_a = false, bool transpose_b = false);
KILN_DECL tensor matmul(const tensor& a, const tensor& b, bool transpose_a = false, bool transpose_b = false);

/// out = epilogue(a @ b, operands...): `epilogue` is a fused expression whose x0 is the product
/// and x1... are `operands` (each broadcasting to the result's shape, as in numpy); it is applied
/// to each block of the output right after the GEMM computes it, while the block is in L1, so the
/// fused form reads and writes the output once. float32 and float64.
///
/// When the output is a vector (a 1-D operand) or overlaps an operand, the product is computed
/// first and the expression applied afterwards, with the same result.
KILN_DECL void matmul_fused(const tensor& a, const tensor& b, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out,
                            bool transpose_a = false, bool transpose_b = false);
KILN_DECL void matmul_fused(const tensor& a, const tensor& b, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out,
                            bool transpose_a = false, bool transpose_b = false);

// ---- weights packed ahead of time ------------------------------------------------------------------


/// out = a @ B (numpy matmul, `a` used transposed when `transpose_a`) for the K x N weight B that
/// `packed` holds in `layout` (`prepack_weight`). In this build's layout the GEMM reads the
/// panels in place; in another (an executable compiled for another vector width) B is unpacked
/// first, with the same result.
KILN_DECL void matmul_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const tensor& out,
                                bool transpose_a = false);

/// out = epilogue(a @ B, operands...) (as `matmul_fused`) for the weight B that `packed` holds in
/// `layout` (as `matmul_prepacked`).
KILN_DECL void matmul_fused_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const fused_expr& epilogue,
                                      std::span<const tensor> operands, const tensor& out, bool transpose_a = false);
KILN_DECL void matmul_fused_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const fused_expr& epilogue,
                                      std::initializer_list<tensor> operands, const tensor& out, bool transpose_a = false);

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/linalg.ipp>
#endif
