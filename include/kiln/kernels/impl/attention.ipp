// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/attention.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/attention.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/reduce.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace kiln::kernels::detail {

/// `fill` as a T: beyond T's range, the infinity of its sign (a float32 kernel given
/// -3.4028234663852886e+38 keeps it; given -1e300, -inf).
template <class T>
T fill_value(double fill) {
  if (std::isnan(fill)) return std::numeric_limits<T>::quiet_NaN();
  if (fill > double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::infinity();
  if (fill < double(std::numeric_limits<T>::lowest())) return -std::numeric_limits<T>::infinity();
  return T(fill);
}

/// One past the last column of a mask row of `n` (stride `cs`) that keeps its score (a nonzero
/// byte when `keeps`, a zero one otherwise), or `floor` when none at or beyond it does.
inline std::int64_t last_kept(const std::uint8_t* row, std::int64_t n, std::int64_t cs, bool keeps, std::int64_t floor) {
  std::int64_t j = n;
  if (cs == 1) {
    // Eight bytes at a time: a word with a nonzero byte, or with a zero byte.
    constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (j - 8 >= floor) {
      std::uint64_t w;
      std::memcpy(&w, row + j - 8, 8);
      if (keeps ? w != 0 : ((w - ones) & ~w & highs) != 0) break;
      j -= 8;
    }
  }
  for (; j > floor; --j)
    if ((row[(j - 1) * cs] != 0) == keeps) return j;
  return floor;
}

/// Scores [0, n) of a row where its mask row (stride `cs`) does not keep them become `fill`.
template <class T>
void apply_mask(T* row, const std::uint8_t* mask, std::int64_t n, std::int64_t cs, bool keeps, T fill) {
  if (cs == 1) {
    const std::uint8_t k = keeps ? 1 : 0;
    for (std::int64_t j = 0; j < n; ++j) row[j] = std::uint8_t(mask[j] != 0) == k ? row[j] : fill;
  } else {
    for (std::int64_t j = 0; j < n; ++j)
      if ((mask[j * cs] != 0) != keeps) row[j] = fill;
  }
}

KILN_DECL void attention_into(const tensor& q, const tensor& k, const tensor& v, bool transpose_k, const attention_scores& sc,
                              std::span<const tensor> operands, const tensor& out) {
  constexpr std::string_view op = "attention";
  for (const auto& [t, what] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}}) {
    if (!t->defined()) fail(op, kiln::detail::concat(what, " is undefined"));
    if (t->ndim() < 2) fail(op, kiln::detail::concat(what, " must have rank at least 2, got ", describe_operand(*t)));
  }
  if (!ops::is_floating(q.type())) fail(op, "needs float32 or float64 tensors, got q " + describe_operand(q));
  if (k.type() != q.type() || v.type() != q.type())
    fail(op, kiln::detail::concat("q, k and v must have one dtype, got ", describe_operand(q), ", ", describe_operand(k), " and ", describe_operand(v)));
  const std::size_t qr = q.ndim(), kr = k.ndim(), vr = v.ndim();
  const std::int64_t M = q.shape(qr - 2), D = q.shape(qr - 1);
  // k as the D x N matrix B of the product q @ B.
  const std::int64_t kd = transpose_k ? k.shape(kr - 1) : k.shape(kr - 2), N = transpose_k ? k.shape(kr - 2) : k.shape(kr - 1);
  const std::int64_t b_rs = transpose_k ? k.strides()[kr - 1] : k.strides()[kr - 2], b_cs = transpose_k ? k.strides()[kr - 2] : k.strides()[kr - 1];
  if (kd != D)
    fail(op, kiln::detail::concat("q ", describe_operand(q), " and k ", describe_operand(k), transpose_k ? " (transposed)" : "",
                                  " differ in the inner dimension (", D, " and ", kd, ")"));
  if (v.shape(vr - 2) != N)
    fail(op, kiln::detail::concat("v ", describe_operand(v), " has ", v.shape(vr - 2), " rows but k has ", N, " positions"));
  const std::int64_t Dv = v.shape(vr - 1);
  // The leading axes, broadcast as matmul's batch axes.
  const std::size_t nb = std::max({qr, kr, vr}) - 2;
  shape_vector lead(nb, 1);
  std::array<std::vector<std::int64_t>, 3> lead_strides;
  const std::array<const tensor*, 3> qkv{&q, &k, &v};
  for (std::size_t w = 0; w < 3; ++w) {
    const tensor& t = *qkv[w];
    lead_strides[w].assign(nb, 0);
    const std::size_t tb = t.ndim() - 2;
    for (std::size_t i = 0; i < tb; ++i) {
      const std::size_t o = nb - tb + i;
      const std::int64_t d = t.shape(i);
      if (d == 1) continue;
      if (lead[o] != 1 && lead[o] != d)
        fail(op, kiln::detail::concat("the leading axes of q ", describe_operand(q), ", k ", describe_operand(k), " and v ", describe_operand(v),
                                      " do not broadcast"));
      lead[o] = d;
      lead_strides[w][o] = t.strides()[i];
    }
  }
  shape_vector out_shape = lead, scores_shape = lead;
  out_shape.push_back(M), out_shape.push_back(Dv);
  scores_shape.push_back(M), scores_shape.push_back(N);
  check_output(op, out, q.type(), out_shape);
  // The mask and the operands, read at the scores' coordinates.
  std::vector<std::int64_t> mask_strides;
  if (sc.mask.defined()) {
    if (sc.mask.type() != dtype::bool_) fail(op, "the mask must be a bool tensor, got " + describe_operand(sc.mask));
    std::optional<std::vector<std::int64_t>> s = broadcast_strides(sc.mask, scores_shape);
    if (!s)
      fail(op, kiln::detail::concat("the mask ", describe_operand(sc.mask), " does not broadcast to the scores' shape ", runtime::shape_to_string(scores_shape)));
    mask_strides = std::move(*s);
  }
  if (operands.size() + 1 > max_fused_inputs)
    fail(op, kiln::detail::concat("the score expressions take at most ", max_fused_inputs - 1, " operands, ", operands.size(), " given"));
  for (const auto& [e, which] : {std::pair{sc.pre, "pre"}, std::pair{sc.post, "post"}})
    if (e && e->num_inputs() > operands.size() + 1)
      fail(op, kiln::detail::concat("the ", which, " expression ", e->to_string(), " reads ", e->num_inputs(), " inputs (x0 is the scores), ",
                                    operands.size() + 1, " given"));
  std::vector<std::vector<std::int64_t>> op_strides;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const tensor& t = operands[i];
    const std::string which = kiln::detail::concat("score operand x", i + 1);
    if (!t.defined()) fail(op, which + " is undefined");
    if (t.type() != q.type()) fail(op, kiln::detail::concat(which, " is ", describe_operand(t), " but q is ", name(q.type())));
    std::optional<std::vector<std::int64_t>> s = broadcast_strides(t, scores_shape);
    if (!s)
      fail(op, kiln::detail::concat(which, " ", describe_operand(t), " does not broadcast to the scores' shape ", runtime::shape_to_string(scores_shape)));
    op_strides.push_back(std::move(*s));
  }
  if (overlaps(out, q) || overlaps(out, k) || overlaps(out, v) || (sc.mask.defined() && overlaps(out, sc.mask)))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an input; write into a separate tensor"));
  for (const tensor& t : operands)
    if (overlaps(out, t)) fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an operand; write into a separate tensor"));

  std::int64_t batches = 1;
  for (const std::int64_t d : lead) batches *= d;
  if (batches == 0 || M == 0 || Dv == 0) return;
  const std::size_t orank = out.ndim(), srank = scores_shape.size();
  visit_dtype(op, q.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      // Rows per block: one block for a few query rows (decode: the GEMM's in-place small-M
      // paths); else whole micro-panels of rows, about 128 KB of scores.
      const std::int64_t mr = gemm_detail::shape<T>::MR;
      std::int64_t rows = M <= gemm_detail::small_m_rows ? M : std::clamp<std::int64_t>((std::int64_t(128 << 10) / std::int64_t(sizeof(T))) / std::max<std::int64_t>(N, 1) / mr * mr, mr, 8 * mr);
      rows = std::min(rows, M);
      const std::int64_t blocks = (M + rows - 1) / rows;
      const std::int64_t ld = (N + 15) / 16 * 16 + 16;  // rows of the scores apart by an odd number of lines (no 4K aliasing)
      const T* qd = static_cast<const T*>(q.data());
      const T* kd_ = static_cast<const T*>(k.data());
      const T* vd = static_cast<const T*>(v.data());
      T* od = static_cast<T*>(out.data());
      const auto* md = sc.mask.defined() ? static_cast<const std::uint8_t*>(sc.mask.data()) : nullptr;
      const T fill = fill_value<T>(sc.fill);
      const std::int64_t q_rs = q.strides()[qr - 2], q_cs = q.strides()[qr - 1];
      const std::int64_t v_rs = v.strides()[vr - 2], v_cs = v.strides()[vr - 1];
      const std::int64_t o_rs = out.strides()[orank - 2], o_cs = out.strides()[orank - 1];
      // One task per matrix of the batch (a head) when there are as many as threads and the
      // matrix has several blocks: its keys are packed once for all of them. Else one task per block.
      const bool per_matrix = blocks > 1 && batches >= std::int64_t(num_threads());
      const std::int64_t packed_keys_size = packed_b_size(D, N, native_packed_b_layout<T>(D));
      const std::int64_t padded_n = D > 0 ? packed_keys_size / D : 0;  // N in whole panels
      const std::int64_t m_rs = md ? mask_strides[srank - 2] : 0, m_cs = md ? mask_strides[srank - 1] : 0;
      const bool keeps = sc.mask_keeps;
      parallel_for(per_matrix ? batches : batches * blocks, [&](std::int64_t task) {
        const std::int64_t b = per_matrix ? task : task / blocks;
        // This matrix's offsets: its index along the leading axes, last fastest.
        std::int64_t qo = 0, ko = 0, vo = 0, oo = 0, mo = 0;
        std::array<const T*, max_fused_inputs> op_data{};
        for (std::size_t k2 = 0; k2 < operands.size(); ++k2) op_data[k2] = static_cast<const T*>(operands[k2].data());
        for (std::int64_t rest = b, i = std::int64_t(nb) - 1; i >= 0; --i) {
          const auto a = std::size_t(i);
          const std::int64_t idx = rest % lead[a];
          rest /= lead[a];
          qo += idx * lead_strides[0][a], ko += idx * lead_strides[1][a], vo += idx * lead_strides[2][a];
          oo += idx * out.strides()[a];
          if (md) mo += idx * mask_strides[a];
          for (std::size_t k2 = 0; k2 < operands.size(); ++k2) op_data[k2] += idx * op_strides[k2][a];
        }
        thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> buffer, packed_keys;
        grow(buffer, rows * ld);
        T* s = buffer.data();
        if (per_matrix) {
          grow(packed_keys, packed_keys_size);
          prepack_b<T>({kd_ + ko, D, N, b_rs, b_cs}, packed_keys.data());
        }
        std::array<epilogue_operand<T>, max_fused_inputs> ops{};
        for (std::size_t k2 = 0; k2 < operands.size(); ++k2) ops[k2] = {op_data[k2], op_strides[k2][srank - 2], op_strides[k2][srank - 1]};
        const std::span<const epilogue_operand<T>> ops_here(ops.data(), operands.size());
        const auto block = [&](std::int64_t i0) {
          const std::int64_t m = std::min(rows, M - i0);
          // Columns [kept, N) are masked in every row of the block (a causal mask's upper
          // triangle): their scores are the fill whatever the product, so the product stops there.
          std::int64_t kept = N;
          if (md) {
            kept = 0;
            for (std::int64_t i = 0; i < m; ++i) kept = std::max(kept, last_kept(md + mo + (i0 + i) * m_rs, N, m_cs, keeps, kept));
          }
          // Scores = q[i0 .. i0+m) @ k^T (a parallel_for inside a task runs on this thread).
          const matrix_view<const T> qs{qd + qo + i0 * q_rs, m, D, q_rs, q_cs};
          if (per_matrix) gemm_detail::gemm_blocked<T>(qs, kept, gemm_detail::prepacked<T>{packed_keys.data(), padded_n}, {s, m, kept, ld, 1}, false, no_epilogue{});
          else gemm<T>(qs, {kd_ + ko, D, kept, b_rs, b_cs}, {s, m, kept, ld, 1});
          if (sc.pre) fused_epilogue<T>(*sc.pre, ops_here)(s, ld, 1, i0, 0, m, kept);
          if (md)
            for (std::int64_t i = 0; i < m; ++i) {
              T* row = s + i * ld;
              apply_mask(row, md + mo + (i0 + i) * m_rs, kept, m_cs, keeps, fill);
              std::fill(row + kept, row + N, fill);
            }
          if (sc.post) fused_epilogue<T>(*sc.post, ops_here)(s, ld, 1, i0, 0, m, N);
          if (N > 0)
            for (std::int64_t i = 0; i < m; ++i) softmax_row<T, false>(s + i * ld, s + i * ld, N, nullptr, nullptr);
          // The masked columns' weights are zero unless a row has nothing else (then they share
          // it): when all are zero, the product with v stops at `kept` too.
          std::int64_t used = N;
          if (kept < N) {
            std::int64_t nonzero = 0;
            for (std::int64_t i = 0; i < m; ++i) {
              const T* row = s + i * ld;
              for (std::int64_t j = kept; j < N; ++j) nonzero += row[j] != T(0);
            }
            if (nonzero == 0) used = kept;
          }
          gemm<T>({s, m, used, ld, 1}, {vd + vo, used, Dv, v_rs, v_cs}, {od + oo + i0 * o_rs, m, Dv, o_rs, o_cs});
        };
        if (per_matrix)
          for (std::int64_t blk = 0; blk < blocks; ++blk) block(blk * rows);
        else
          block(task % blocks * rows);
      });
    }
  });
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void attention(const tensor& q, const tensor& k, const tensor& v, bool transpose_k, const attention_scores& scores,
                         std::span<const tensor> operands, const tensor& out) {
  detail::attention_into(q, k, v, transpose_k, scores, operands, out);
}

KILN_DECL tensor attention(const tensor& q, const tensor& k, const tensor& v, bool transpose_k, const attention_scores& scores,
                           std::span<const tensor> operands) {
  if (!q.defined() || !k.defined() || !v.defined() || q.ndim() < 2 || v.ndim() < 2)
    fail("attention", "q, k and v must be tensors of rank at least 2");
  // The result's shape: the leading axes broadcast (checked again, with the rest, by the call).
  const std::size_t nb = std::max({q.ndim(), k.ndim(), v.ndim()}) - 2;
  shape_vector shape(nb, 1);
  for (const tensor* t : {&q, &k, &v})
    for (std::size_t i = 0; i + 2 < t->ndim(); ++i) {
      std::int64_t& d = shape[nb - (t->ndim() - 2) + i];
      if (t->shape(i) != 1) d = t->shape(i);
    }
  shape.push_back(q.shape(q.ndim() - 2));
  shape.push_back(v.shape(v.ndim() - 1));
  tensor out = new_output(std::move(shape), q.type());
  attention(q, k, v, transpose_k, scores, operands, out);
  return out;
}

}  // namespace kiln::kernels
