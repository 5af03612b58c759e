// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/linalg.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/linalg.hpp>

namespace kiln::kernels::detail {

KILN_DECL matmul_plan plan_matmul(const tensor& a, const tensor& b, bool ta, bool tb) {
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

KILN_DECL void fold_batch_into_rows(matmul_plan& p, std::int64_t& c_rs, dims& c_bs, std::span<std::int64_t> extra_rs = {},
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

KILN_DECL void matmul_into(std::string_view op, const tensor& a, const tensor& b, const tensor& out, bool transpose_a, bool transpose_b,
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

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void matmul(const tensor& a, const tensor& b, const tensor& out, bool transpose_a, bool transpose_b) {
  detail::matmul_into("matmul", a, b, out, transpose_a, transpose_b, false);
}

KILN_DECL tensor matmul(const tensor& a, const tensor& b, bool transpose_a, bool transpose_b) {
  const detail::matmul_plan p = detail::plan_matmul(a, b, transpose_a, transpose_b);
  tensor out = new_output(p.out_shape, a.type());
  matmul(a, b, out, transpose_a, transpose_b);
  return out;
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL void matmul_fused_into(std::string_view op, const tensor& a, const tensor& b, const fused_expr& epilogue, std::span<const tensor> operands,
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

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void matmul_fused(const tensor& a, const tensor& b, const fused_expr& epilogue, std::span<const tensor> operands, const tensor& out,
                            bool transpose_a, bool transpose_b) {
  detail::matmul_fused_into("matmul_fused", a, b, epilogue, operands, out, transpose_a, transpose_b, false);
}

KILN_DECL void matmul_fused(const tensor& a, const tensor& b, const fused_expr& epilogue, std::initializer_list<tensor> operands, const tensor& out,
                            bool transpose_a, bool transpose_b) {
  matmul_fused(a, b, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out, transpose_a, transpose_b);
}

KILN_DECL packed_weight_layout packed_layout(std::string_view op, std::span<const std::int64_t> v) {
  if (v.size() != 4) fail(op, kiln::detail::concat("the packed layout must have 4 values (K, N, nr, kc), got ", v.size()));
  return {v[0], v[1], {v[2], v[3]}};
}

KILN_DECL packed_weight_layout native_weight_layout(dtype t, std::int64_t k, std::int64_t n) {
  return visit_dtype("prepack_weight", t, [&]<class T>(type_tag<T>) -> packed_weight_layout {
    if constexpr (std::is_floating_point_v<T>)
      return {k, n, native_packed_b_layout<T>(k)};
    else
      fail("prepack_weight", kiln::detail::concat("packs float32 and float64 weights, not ", name(t)));
  });
}

KILN_DECL tensor prepack_weight(const tensor& b, bool transpose_b) {
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

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL tensor packed_weight_view(std::string_view op, const tensor& packed, const packed_weight_layout& l) {
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

KILN_DECL bool packed_in_place(const tensor& packed, const packed_weight_layout& l) {
  // (An executable made before K was cut into equal blocks records 384 rows for a K below that:
  // the same placement.)
  const packed_b_layout mine = packed.type() == dtype::float32 ? native_packed_b_layout<float>(l.k) : native_packed_b_layout<double>(l.k);
  const bool native = same_placement(l.panels, mine, l.k);
  return native && reinterpret_cast<std::uintptr_t>(packed.data()) % 64 == 0;
}

KILN_DECL tensor unpack_weight(const tensor& packed, const packed_weight_layout& l) {
  tensor b = new_output({l.k, l.n}, packed.type());
  visit_dtype("unpack_weight", packed.type(), [&]<class T>(type_tag<T>) {
    if constexpr (std::is_floating_point_v<T>) unpack_b<T>(static_cast<const T*>(packed.data()), l.panels, {static_cast<T*>(b.data()), l.k, l.n, l.n, 1});
  });
  return b;
}

KILN_DECL tensor prepacked_operand(std::string_view op, const tensor& packed, const packed_weight_layout& l, const tensor& out) {
  tensor b = packed_weight_view(op, packed, l);
  if (out.defined() && overlaps(out, packed))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps an input; write into a separate tensor"));
  return packed_in_place(packed, l) ? b : tensor();
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void matmul_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const tensor& out,
                                bool transpose_a) {
  constexpr std::string_view op = "matmul_prepacked";
  const tensor b = detail::prepacked_operand(op, packed, layout, out);
  if (!b.defined()) return matmul(a, detail::unpack_weight(packed, layout), out, transpose_a, false);
  detail::matmul_into(op, a, b, out, transpose_a, false, true);
}

KILN_DECL void matmul_fused_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const fused_expr& epilogue,
                                      std::span<const tensor> operands, const tensor& out, bool transpose_a) {
  constexpr std::string_view op = "matmul_fused_prepacked";
  const tensor b = detail::prepacked_operand(op, packed, layout, out);
  if (!b.defined()) return matmul_fused(a, detail::unpack_weight(packed, layout), epilogue, operands, out, transpose_a, false);
  detail::matmul_fused_into(op, a, b, epilogue, operands, out, transpose_a, false, true);
}

KILN_DECL void matmul_fused_prepacked(const tensor& a, const tensor& packed, const packed_weight_layout& layout, const fused_expr& epilogue,
                                      std::initializer_list<tensor> operands, const tensor& out, bool transpose_a) {
  matmul_fused_prepacked(a, packed, layout, epilogue, std::span<const tensor>(operands.begin(), operands.size()), out, transpose_a);
}

}  // namespace kiln::kernels
