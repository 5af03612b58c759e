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

/// `matmul`, with `b` a prepacked weight's [K, N] view when `prepacked` (float dtypes only).
inline void matmul_into(std::string_view op, const tensor& a, const tensor& b, const tensor& out, bool transpose_a, bool transpose_b,
                        bool prepacked) {
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
                            gemm_operands<T>(p, {ab + ao, p.m, p.k, p.a_rs, p.a_cs}, bb + bo, prepacked, {cb + co, p.m, p.n, c_rs, c_cs});
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

}  // namespace detail

/// out = a @ b (numpy matmul), with `a` and/or `b` used transposed.
inline void matmul(const tensor& a, const tensor& b, const tensor& out, bool transpose_a = false, bool transpose_b = false) {
  detail::matmul_into("matmul", a, b, out, transpose_a, transpose_b, false);
}
inline tensor matmul(const tensor& a, const tensor& b, bool transpose_a = false, bool transpose_b = false) {
  const detail::matmul_plan p = detail::plan_matmul(a, b, transpose_a, transpose_b);
  tensor out = new_output(p.out_shape, a.type());
  matmul(a, b, out, transpose_a, transpose_b);
  return out;
}

namespace detail {

/// `matmul_fused`, with `b` a prepacked weight's [K, N] view when `prepacked`.
inline void matmul_fused_into(std::string_view op, const tensor& a, const tensor& b, const fused_expr& epilogue, std::span<const tensor> operands,
                              const tensor& out, bool transpose_a, bool transpose_b, bool prepacked) {
  detail::matmul_plan p = detail::plan_matmul(a, b, transpose_a, transpose_b);
  check_output(op, out, a.type(), p.out_shape);
  if (overlaps(out, a) || overlaps(out, b))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an input; write into a separate tensor"));
  const std::vector<std::vector<std::int64_t>> strides = detail::check_epilogue(op, epilogue, operands, out);
  bool separate = a.ndim() == 1 || b.ndim() == 1;
  for (const tensor& t : operands) separate |= overlaps(out, t);
  if (separate) {  // product first, then the expression over it
    const tensor product = new_output(p.out_shape, a.type());
    matmul_into(op, a, b, product, transpose_a, transpose_b, prepacked);
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
                            gemm_operands<T>(p, {ab + ao, p.m, p.k, p.a_rs, p.a_cs}, bb + bo, prepacked,
                                             {cb + co, p.m, p.n, c_rs, out.strides()[orank - 1]}, here);
                            for (std::size_t i = nb; i-- > 0;) {  // the next batch index, last axis fastest
                              if (++idx[i] < p.batch[i]) break;
                              idx[i] = 0;
                            }
                          });
    }
  });
}

}  // namespace detail

/// out = epilogue(a @ b, operands...): `epilogue` is a fused expression whose x0 is the product
/// and x1... are `operands` (each broadcasting to the result's shape, as in numpy); it is applied
/// to each block of the output right after the GEMM computes it, while the block is in L1, so the
/// fused form reads and writes the output once. float32 and float64.
///
/// When the output is a vector (a 1-D operand) or overlaps an operand, the product is computed
/// first and the expression applied afterwards, with the same result.
inline void matmul_fused(const tensor& a, const tensor& b, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out,
                         bool transpose_a = false, bool transpose_b = false) {
  detail::matmul_fused_into("matmul_fused", a, b, epilogue, operands, out, transpose_a, transpose_b, false);
}
inline void matmul_fused(const tensor& a, const tensor& b, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out,
                         bool transpose_a = false, bool transpose_b = false) {
  matmul_fused(a, b, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out, transpose_a, transpose_b);
}

// ---- weights packed ahead of time ------------------------------------------------------------------

/// What a weight packed by `prepack_weight` holds: the K x N matrix B and the panel layout it is
/// stored in (`packed_b_layout` in `gemm.hpp`). The compiler records it beside the packed
/// constant, so that an executable built where vectors have another width still runs.
struct packed_weight_layout {
  std::int64_t k = 0, n = 0;
  packed_b_layout panels;
  friend bool operator==(const packed_weight_layout&, const packed_weight_layout&) = default;
};

/// A layout from its four numbers [K, N, nr, kc], as the compiler passes it to the kernels
/// (`kernels.matmul_prepacked`); checked where it is used.
inline packed_weight_layout packed_layout(std::string_view op, std::span<const std::int64_t> v) {
  if (v.size() != 4) fail(op, kiln::detail::concat("the packed layout must have 4 values (K, N, nr, kc), got ", v.size()));
  return {v[0], v[1], {v[2], v[3]}};
}

/// The layout `prepack_weight` writes in this build for a K x N weight of dtype `t` (float32 or
/// float64).
inline packed_weight_layout native_weight_layout(dtype t, std::int64_t k, std::int64_t n) {
  return visit_dtype("prepack_weight", t, [&]<class T>(type_tag<T>) -> packed_weight_layout {
    if constexpr (std::is_floating_point_v<T>)
      return {k, n, native_packed_b_layout<T>(k)};
    else
      fail("prepack_weight", kiln::detail::concat("packs float32 and float64 weights, not ", name(t)));
  });
}

/// `b` (2-D, float32 or float64; used transposed when `transpose_b`) packed for
/// `matmul_prepacked` in this build's layout (`native_weight_layout`): a 1-D tensor. Packing a
/// constant weight once, at compile time, saves the GEMM packing it on every call.
inline tensor prepack_weight(const tensor& b, bool transpose_b = false) {
  constexpr std::string_view op = "prepack_weight";
  if (!b.defined()) fail(op, "the weight is undefined");
  if (b.ndim() != 2) fail(op, kiln::detail::concat("the weight must be a matrix, got ", describe_operand(b)));
  const std::int64_t k = b.shape(transpose_b ? 1 : 0), n = b.shape(transpose_b ? 0 : 1);
  const packed_weight_layout l = native_weight_layout(b.type(), k, n);
  tensor out = new_output({packed_b_size(k, n, l.panels)}, b.type());
  visit_dtype(op, b.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      const std::int64_t rs = b.strides()[transpose_b ? 1 : 0], cs = b.strides()[transpose_b ? 0 : 1];
      prepack_b<T>({static_cast<const T*>(b.data()), k, n, rs, cs}, static_cast<T*>(out.data()));
    }
  });
  return out;
}

namespace detail {

/// Checks a packed weight against its layout and returns B's [K, N] view over its storage (valid
/// memory: K N <= the packed size), which `plan_matmul` checks the product's shapes with.
inline tensor packed_weight_view(std::string_view op, const tensor& packed, const packed_weight_layout& l) {
  if (!packed.defined()) fail(op, "the packed weight is undefined");
  if (l.k < 0 || l.n < 0 || l.panels.nr < 1 || l.panels.kc < 1 || l.panels.nr > 4096 || l.panels.kc > (std::int64_t(1) << 30))
    fail(op, kiln::detail::concat("bad packed layout: K ", l.k, ", N ", l.n, ", panels of ", l.panels.nr, " columns in blocks of ", l.panels.kc,
                                  " rows"));
  if (packed.type() != dtype::float32 && packed.type() != dtype::float64)
    fail(op, kiln::detail::concat("the packed weight must be float32 or float64, got ", describe_operand(packed)));
  std::int64_t padded = (l.n + l.panels.nr - 1) / l.panels.nr * l.panels.nr, size = 0;
  if (__builtin_mul_overflow(l.k, padded, &size) || packed.ndim() != 1 || packed.numel() != size || (size > 1 && packed.strides()[0] != 1))
    fail(op, kiln::detail::concat("the packed weight must be a contiguous vector of ", l.k, " x ", padded, " elements for a ", l.k, " x ", l.n,
                                  " weight in panels of ", l.panels.nr, " columns, got ", describe_operand(packed)));
  return tensor::from_storage(packed.data_storage(), packed.byte_offset(), packed.type(), {l.k, l.n});
}

/// Whether this build's GEMM reads `packed` in place: its layout, and 64-byte aligned.
inline bool packed_in_place(const tensor& packed, const packed_weight_layout& l) {
  // (An executable made before K was cut into equal blocks records 384 rows for a K below that:
  // the same placement.)
  const packed_b_layout mine = packed.type() == dtype::float32 ? native_packed_b_layout<float>(l.k) : native_packed_b_layout<double>(l.k);
  const bool native = same_placement(l.panels, mine, l.k);
  return native && reinterpret_cast<std::uintptr_t>(packed.data()) % 64 == 0;
}

/// The K x N weight a packed one holds, unpacked (for a layout this build does not read in place).
inline tensor unpack_weight(const tensor& packed, const packed_weight_layout& l) {
  tensor b = new_output({l.k, l.n}, packed.type());
  visit_dtype("unpack_weight", packed.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) unpack_b<T>(static_cast<const T*>(packed.data()), l.panels, {static_cast<T*>(b.data()), l.k, l.n, l.n, 1});
  });
  return b;
}

/// Checks a packed weight against its layout and against the output; B's [K, N] view when this
/// build reads the weight in place, else an undefined tensor (the weight is unpacked first).
inline tensor prepacked_operand(std::string_view op, const tensor& packed, const packed_weight_layout& l, const tensor& out) {
  tensor b = packed_weight_view(op, packed, l);
  if (out.defined() && overlaps(out, packed))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an input; write into a separate tensor"));
  return packed_in_place(packed, l) ? b : tensor();
}

}  // namespace detail

/// out = a @ B (numpy matmul, `a` used transposed when `transpose_a`) for the K x N weight B that
/// `packed` holds in `layout` (`prepack_weight`). In this build's layout the GEMM reads the
/// panels in place; in another (an executable compiled for another vector width) B is unpacked
/// first, with the same result.
inline void matmul_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const tensor& out,
                             bool transpose_a = false) {
  constexpr std::string_view op = "matmul_prepacked";
  const tensor b = detail::prepacked_operand(op, packed, layout, out);
  if (!b.defined()) return matmul(a, detail::unpack_weight(packed, layout), out, transpose_a, false);
  detail::matmul_into(op, a, b, out, transpose_a, false, true);
}

/// out = epilogue(a @ B, operands...) (as `matmul_fused`) for the weight B that `packed` holds in
/// `layout` (as `matmul_prepacked`).
inline void matmul_fused_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const fused_expr& epilogue,
                                   std::span<const tensor> operands, const tensor& out, bool transpose_a = false) {
  constexpr std::string_view op = "matmul_fused_prepacked";
  const tensor b = detail::prepacked_operand(op, packed, layout, out);
  if (!b.defined()) return matmul_fused(a, detail::unpack_weight(packed, layout), epilogue, operands, out, transpose_a, false);
  detail::matmul_fused_into(op, a, b, epilogue, operands, out, transpose_a, false, true);
}
inline void matmul_fused_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const fused_expr& epilogue,
                                   std::initializer_list<tensor> operands, const tensor& out, bool transpose_a = false) {
  matmul_fused_prepacked(a, packed, layout, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out, transpose_a);
}

}  // namespace kiln::kernels
