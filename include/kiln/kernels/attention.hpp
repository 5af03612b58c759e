// SPDX-License-Identifier: Apache-2.0
/// \file
/// Attention in one kernel: out = softmax(scores(q @ k^T)) @ v along the last axis, where the
/// scores are the product with an optional elementwise expression, boolean mask and second
/// expression applied to it — scale, causal mask, padding bias:
///
///     // GPT-2's attention: scale, causal mask (keep where true), attention-mask bias
///     const fused_expr scale = fused_expr::parse("(divide x0 8)"), bias = fused_expr::parse("(add x0 x1)");
///     kernels::attention_scores s{&scale, causal, true, -3.4028234663852886e+38, &bias};
///     kernels::attention(q, k, v, /*transpose_k=*/true, s, {mask_bias}, out);
///
/// Shapes: q [..., M, D], k [..., N, D] (`transpose_k`, as a key cache is stored) or [..., D, N],
/// v [..., N, Dv], out [..., M, Dv]; the leading axes broadcast as numpy's matmul does. The mask
/// and the operands broadcast to the scores' shape [..., M, N]. float32 and float64.
///
/// The work is cut into blocks of query rows of one matrix of the batch (one head), handed out to
/// the kernels' threads. A block's scores (rows x N) are made, masked, normalised and multiplied
/// by v in a buffer of the thread's while they are in cache: they never reach memory, and a
/// decode step (one query row) reads each key and value once, in place, with no packing (the
/// GEMM's small-M paths). Columns the mask removes from every row of a block (a causal mask's
/// upper triangle) are not multiplied: their scores are the fill whatever q and k hold, and
/// their weights, zero, skip the product with v. The result equals the unfused chain — matmul,
/// the expressions, `where`, softmax, matmul — up to the order of the sums, except that an
/// infinity or NaN in v at such a column does not reach the result (0 times infinity is NaN in
/// the unfused product).
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/fused.hpp>

#include <initializer_list>
#include <span>

namespace kiln::kernels {

/// How `attention` makes the scores softmax normalises from the product p = q @ k^T:
/// post(where(mask, pre(p), fill)), or where(mask, fill, pre(p)) when `mask_keeps` is false; a
/// null expression or an undefined mask is left out. The expressions read the operands as x1...
/// (x0 is the value they apply to); both expressions must outlive the call.
struct attention_scores {
  const fused_expr* pre = nullptr;
  tensor mask;             ///< bool, broadcasting to the scores' shape
  bool mask_keeps = true;  ///< the scores are kept where the mask is true (else where it is false)
  double fill = 0;         ///< the value of masked scores (rounded to the dtype; beyond its range, infinite)
  const fused_expr* post = nullptr;
};

KILN_DECL void attention(const tensor& q, const tensor& k, const tensor& v, bool transpose_k, const attention_scores& scores,
                         std::span<const tensor> operands, const tensor& out);
KILN_DECL tensor attention(const tensor& q, const tensor& k, const tensor& v, bool transpose_k = true, const attention_scores& scores = {},
                           std::span<const tensor> operands = {});

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/attention.ipp>
#endif
