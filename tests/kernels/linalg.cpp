// SPDX-License-Identifier: Apache-2.0
// matmul and the packed GEMM against a double-precision reference.
//
// Tolerance: |got - want| <= 1e-6 * (K + 1) * 4 for float32 (inputs in [-1, 1]: each of the K
// products rounds, and the packed kernel sums in another order), 1e-13 * (K + 1) for float64;
// integer results are exact. The GEMM's blocking follows the caches (kernels/cpu_caches.hpp): the
// last tests check the blocking for given caches and products under the smallest one.
#include <kiln/kernels/cpu_caches.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/transform.hpp>

#include "../common/message_of.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln_test;

namespace {

/// The numpy matmul of two matrices (rank 2, any strides), in double.
template <class T>
std::vector<T> reference_matmul(const tensor& a, const tensor& b, bool ta, bool tb) {
  const std::int64_t m = ta ? a.shape(1) : a.shape(0), k = ta ? a.shape(0) : a.shape(1), n = tb ? b.shape(0) : b.shape(1);
  std::vector<T> out;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t q = 0; q < k; ++q)
        s += double(ta ? broadcast_at<T>(a, {q, i}) : broadcast_at<T>(a, {i, q})) * double(tb ? broadcast_at<T>(b, {j, q}) : broadcast_at<T>(b, {q, j}));
      out.push_back(T(s));
    }
  return out;
}

void check_matmul_fused_batched(const tensor& x, const tensor& w, std::int64_t rows);

template <class T>
void check_matmul(std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb, unsigned seed) {
  CAPTURE(m);
  CAPTURE(k);
  CAPTURE(n);
  CAPTURE(ta);
  CAPTURE(tb);
  const tensor a = random_tensor<T>(ta ? shape_vector{k, m} : shape_vector{m, k}, -1, 1, seed);
  const tensor b = random_tensor<T>(tb ? shape_vector{n, k} : shape_vector{k, n}, -1, 1, seed + 1);
  const double tol = (std::is_same_v<T, float> ? 4e-6 : 1e-13) * double(k + 1);
  check_all_close(matmul(a, b, ta, tb).to_vector<T>(), reference_matmul<T>(a, b, ta, tb), 0, tol);
}

}  // namespace

TEST_CASE("matmul of every tail shape, both transposes, float and double") {
  const std::int64_t sizes[] = {1, 2, 5, 7, 12, 13, 16, 17, 31, 33, 47, 65};
  unsigned seed = 1;
  for (std::int64_t m : sizes)
    for (std::int64_t n : {std::int64_t(1), std::int64_t(15), std::int64_t(32), std::int64_t(33), std::int64_t(70)})
      for (std::int64_t k : {std::int64_t(1), std::int64_t(9), std::int64_t(64)}) check_matmul<float>(m, k, n, false, false, seed++);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_matmul<float>(37, 29, 41, ta, tb, seed++);
      check_matmul<double>(23, 19, 17, ta, tb, seed++);
    }
}

TEST_CASE("matmul across the cache blocks: K beyond one panel, M beyond one block, N beyond one panel") {
  check_matmul<float>(5, 600, 7, false, false, 100);    // three K blocks: accumulation into C
  check_matmul<float>(250, 20, 9, false, false, 101);   // M over several A blocks
  check_matmul<float>(3, 5, 2100, false, true, 102);    // N over one NC block (float, AVX-512: 2048)
  check_matmul<double>(130, 300, 70, true, false, 103);
  check_matmul<float>(200, 400, 40, false, false, 104);  // a row-major A read in place in every block (N small)
  check_matmul<float>(30, 50, 200, false, false, 105);   // ... and packed (N large)
  // A last panel of at most MR / 3 rows takes two column panels at a time, then one for what is left.
  check_matmul<float>(64, 784, 130, false, false, 106);  // MR = 12 (AVX-512): 4 rows left, three K blocks
  check_matmul<float>(196, 40, 100, false, false, 107);  // in the second A block (MC = 192)
  check_matmul<double>(63, 385, 96, false, true, 108);
  check_matmul<float>(4 * 12 + 2, 33, 64 * 2 + 31, true, false, 109);
}

TEST_CASE("matmul with at most four rows reads B in place: row-major and transposed B, any tail, accumulation") {
  unsigned seed = 500;
  for (std::int64_t m : {1, 2, 3, 4, 5})
    for (std::int64_t k : {1, 7, 16, 33, 300})
      for (std::int64_t n : {1, 3, 4, 5, 17, 300, 777})
        for (bool tb : {false, true}) check_matmul<float>(m, k, n, false, tb, seed++);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_matmul<double>(3, 45, 29, ta, tb, seed++);
  // gemm's accumulate: C += A * B on both small-M forms, and on a strided C.
  for (bool tb : {false, true}) {
    CAPTURE(tb);
    const tensor a = random_tensor<float>({2, 70}, -1, 1, seed++);
    const tensor b = random_tensor<float>(tb ? shape_vector{90, 70} : shape_vector{70, 90}, -1, 1, seed++);
    const tensor c0 = random_tensor<float>({2, 90}, -1, 1, seed++);
    std::vector<float> want = reference_matmul<float>(a, b, false, tb);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += c0.to_vector<float>()[i];
    tensor c = c0.clone();
    const matrix_view<const float> av{static_cast<const float*>(a.data()), 2, 70, 70, 1};
    const matrix_view<const float> bv{static_cast<const float*>(b.data()), 70, 90, tb ? 1 : 90, tb ? 70 : 1};
    gemm<float>(av, bv, {static_cast<float*>(c.data()), 2, 90, 90, 1}, true);
    check_all_close(c.to_vector<float>(), want, 0, 4e-6 * 71);
    tensor ct = c0.permute({1, 0}).contiguous();  // C with a column stride of 2
    gemm<float>(av, bv, {static_cast<float*>(ct.data()), 2, 90, 1, 2}, true);
    check_all_close(ct.permute({1, 0}).contiguous().to_vector<float>(), want, 0, 4e-6 * 71);
  }
}

TEST_CASE("a matrix times a vector (N = 1) reads A in place, by rows or by columns, with a strided B and C, accumulating") {
  // gemm takes the transposition's small-M product when A's rows or columns are contiguous
  // (gemm_detail::matrix_vector; a B whose elements are apart copied first), otherwise the
  // blocked loops. Blocks of 256 rows of C. A prepacked B gives the same sums (tested below).
  unsigned seed = 7000;
  for (const std::int64_t m : {5, 13, 255, 257, 600})
    for (const std::int64_t k : {1, 7, 48, 1152})
      for (const bool ta : {false, true}) check_matmul<float>(m, k, 1, ta, false, seed++);
  check_matmul<double>(300, 45, 1, false, false, seed++);
  check_matmul<double>(300, 45, 1, true, false, seed++);
  for (const int form : {0, 1, 2}) {  // A by rows, A by columns, A with neither stride 1
    CAPTURE(form);
    const std::int64_t m = 300, k = 70;
    const tensor a = random_tensor<float>({m, 2 * k}, -1, 1, seed++);  // A is the even columns (form 2), or its first k
    const tensor wide_b = random_tensor<float>({k, 3}, -1, 1, seed++);  // B is column 1: rows 3 apart
    const tensor c0 = random_tensor<float>({m, 2}, -1, 1, seed++);      // C is column 0: rows 2 apart
    const float* ap = static_cast<const float*>(a.data());
    const matrix_view<const float> av = form == 0 ? matrix_view<const float>{ap, m, k, 2 * k, 1}
                                        : form == 1 ? matrix_view<const float>{ap, m, k, 1, m} : matrix_view<const float>{ap, m, k, 2 * k, 2};
    const matrix_view<const float> bv{static_cast<const float*>(wide_b.data()) + 1, k, 1, 3, 1};
    std::vector<float> want(static_cast<std::size_t>(m));
    for (std::int64_t i = 0; i < m; ++i) {
      double s = c0.to_vector<float>()[std::size_t(2 * i)];
      for (std::int64_t q = 0; q < k; ++q) s += double(av(i, q)) * double(bv(q, 0));
      want[std::size_t(i)] = float(s);
    }
    tensor c = c0.clone();
    gemm<float>(av, bv, {static_cast<float*>(c.data()), m, 1, 2, 1}, true);
    std::vector<float> got;
    for (std::int64_t i = 0; i < m; ++i) got.push_back(c.to_vector<float>()[std::size_t(2 * i)]);
    check_all_close(got, want, 0, 4e-6 * double(k + 2));
    for (std::int64_t i = 0; i < m; ++i) CHECK(c.to_vector<float>()[std::size_t(2 * i + 1)] == c0.to_vector<float>()[std::size_t(2 * i + 1)]);
  }
}

TEST_CASE("gemm reads a B with contiguous rows in place for few panels of rows or many of columns: the packed product, bit for bit") {
  // Up to gemm_detail::in_place_b_panels panels of MR rows, or any rows for a B of at least
  // gemm_detail::in_place_b_min_panels panels of columns, and where a panel of B fits the L1
  // cache (gemm_detail::read_b_in_place: K = 1 and 16 here; 500 is packed), B's whole NR-column
  // panels are read from its rows and only a partial last panel is packed. The same product through a B that
  // must be packed (the same values, columns 1 apart in memory no longer) gives the same sums in
  // the same order. B is the last columns of a wider matrix, so that its last row ends where the
  // allocation does: a whole-vector read past the row would be caught by AddressSanitizer.
  constexpr std::int64_t MR = gemm_detail::shape<float>::MR, NR = gemm_detail::shape<float>::NR;
  unsigned seed = 4000;
  for (const std::int64_t m : {gemm_detail::small_m_rows + 1, MR + 4, 2 * MR, 5 * MR + 1, gemm_detail::in_place_b_panels * MR, gemm_detail::in_place_b_panels * MR + 1,
                             3 * gemm_detail::in_place_b_panels * MR + 7})
    for (const std::int64_t n : {NR / 2, NR, 2 * NR + 5, 4 * NR, 70 * NR + 3})
      for (const std::int64_t k : {std::int64_t(1), std::int64_t(16), std::int64_t(500)}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        const tensor a = random_tensor<float>({m, k}, -1, 1, seed++);
        const tensor wide = random_tensor<float>({k, n + 3}, -1, 1, seed++);
        const tensor b = wide.slice(1, 3, n + 3);
        const tensor bt = b.permute({1, 0}).contiguous().permute({1, 0});  // column-major: packed
        const matrix_view<const float> av{static_cast<const float*>(a.data()), m, k, k, 1};
        const matrix_view<const float> bv{static_cast<const float*>(b.data()), k, n, n + 3, 1};
        const matrix_view<const float> btv{static_cast<const float*>(bt.data()), k, n, 1, k};
        tensor c = tensor::empty({m, n}, dtype::float32), want = tensor::empty({m, n}, dtype::float32);
        gemm<float>(av, bv, {static_cast<float*>(c.data()), m, n, n, 1});
        gemm<float>(av, btv, {static_cast<float*>(want.data()), m, n, n, 1});
        CHECK(c.to_vector<float>() == want.to_vector<float>());
        if (m * n * k < 2'000'000) check_all_close(c.to_vector<float>(), reference_matmul<float>(a, b, false, false), 0, 4e-6 * double(k + 1));
        // Accumulating into a C with a column stride.
        const tensor c0 = random_tensor<float>({n, m}, -1, 1, seed++);
        tensor ct = c0.clone(), wantt = c0.clone();
        gemm<float>(av, bv, {static_cast<float*>(ct.data()), m, n, 1, m}, true);
        gemm<float>(av, btv, {static_cast<float*>(wantt.data()), m, n, 1, m}, true);
        CHECK(ct.to_vector<float>() == wantt.to_vector<float>());
      }
}

TEST_CASE("batch axes that step by whole matrices over a shared B are folded into rows, with the same result") {
  // [B, M, K] @ [K, N]: one product of B*M rows when A and the output are contiguous, one per
  // matrix otherwise; both must give the reference.
  auto check = [](const tensor& a, const tensor& b) {
    const tensor c = matmul(a, b);
    const std::int64_t batches = a.shape(0);
    for (std::int64_t i = 0; i < batches; ++i) {
      const tensor ai = a.slice(0, i, i + 1).contiguous().view({a.shape(1), a.shape(2)});
      check_all_close(c.slice(0, i, i + 1).contiguous().to_vector<float>(), reference_matmul<float>(ai, b, false, false), 0, 4e-6 * 257);
    }
  };
  check(random_tensor<float>({128, 1, 256}, -1, 1, 1), random_tensor<float>({256, 96}, -1, 1, 2));  // sequence-first, one row each
  check(random_tensor<float>({4, 3, 5}, -1, 1, 3), random_tensor<float>({5, 7}, -1, 1, 4));
  check(random_tensor<float>({3, 4, 5}, -1, 1, 5).permute({1, 0, 2}), random_tensor<float>({5, 7}, -1, 1, 6));  // batch stride 5: not foldable
  const tensor rows = random_tensor<float>({3, 1, 5}, -1, 1, 7);  // each matrix one row, broadcast: row stride 0
  check(tensor::from_storage(rows.data_storage(), 0, dtype::float32, {3, 4, 5}, {5, 0, 1}), random_tensor<float>({5, 7}, -1, 1, 8));
  const tensor b3 = random_tensor<float>({2, 6, 5}, -1, 1, 9);
  const tensor c3 = matmul(random_tensor<float>({2, 3, 6}, -1, 1, 10), b3);  // B differs per batch: not folded
  CHECK(c3.shape() == shape_vector{2, 3, 5});
  // A strided output whose batch stride is not rows x row stride.
  const tensor a = random_tensor<float>({4, 3, 5}, -1, 1, 11), b = random_tensor<float>({5, 7}, -1, 1, 12);
  tensor big = tensor::zeros({4, 4, 7}, dtype::float32);
  const tensor out = big.slice(1, 0, 3);
  matmul(a, b, out);
  check_all_close(out.contiguous().to_vector<float>(), matmul(a, b).to_vector<float>(), 0, 4e-6 * 6);  // folded or not: summation order may differ
  // The fused form: operands per element, per row, per column, and per matrix of the batch.
  for (std::int64_t rows : {1, 3}) {
    CAPTURE(rows);
    const tensor x = random_tensor<float>({6, rows, 20}, -1, 1, 13), w = random_tensor<float>({20, 9}, -1, 1, 14);
    check_matmul_fused_batched(x, w, rows);
  }
}

TEST_CASE("batched matmul broadcasts batches, 1-D operands are vectors, strided views and outputs") {
  const tensor a = random_tensor<float>({2, 1, 4, 6}, -1, 1, 1), b = random_tensor<float>({3, 6, 5}, -1, 1, 2);
  const tensor c = matmul(a, b);
  CHECK(c.shape() == shape_vector{2, 3, 4, 5});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      const tensor ai = a.slice(0, i, i + 1).view({4, 6}).contiguous(), bj = b.slice(0, j, j + 1).view({6, 5}).contiguous();
      check_all_close(c.slice(0, i, i + 1).slice(1, j, j + 1).contiguous().to_vector<float>(), reference_matmul<float>(ai, bj, false, false), 0, 3e-5);
    }
  const tensor v = random_tensor<float>({6}, -1, 1, 3), m = random_tensor<float>({6, 5}, -1, 1, 4), w = random_tensor<float>({5, 6}, -1, 1, 5);
  CHECK(matmul(v, m).shape() == shape_vector{5});
  check_all_close(matmul(v, m).to_vector<float>(), reference_matmul<float>(v.view({1, 6}), m, false, false), 0, 3e-5);
  CHECK(matmul(w, v).shape() == shape_vector{5});
  check_all_close(matmul(w, v).to_vector<float>(), reference_matmul<float>(w, v.view({6, 1}), false, false), 0, 3e-5);
  CHECK(matmul(v, v).ndim() == 0);
  check_all_close(matmul(v, v).to_vector<float>(), reference_matmul<float>(v.view({1, 6}), v.view({6, 1}), false, false), 0, 3e-5);
  // Strided views (a transposed slice) and a strided output.
  const tensor base = random_tensor<float>({40, 30}, -1, 1, 6);
  const tensor sa = base.slice(0, 2, 38, 2), sb = base.permute({1, 0}).slice(1, 0, 18);  // 18 x 30, 30 x 18
  tensor out_base = tensor::zeros({18, 40}, dtype::float32);
  const tensor so = out_base.slice(1, 0, 36, 2);
  matmul(sa, sb, so);
  check_all_close(so.to_vector<float>(), reference_matmul<float>(sa, sb, false, false), 0, 1.3e-4);
  // Integers: exact, wrapping.
  const tensor ia = random_tensor<std::int32_t>({3, 4}, -9, 9, 7), ib = random_tensor<std::int32_t>({4, 2}, -9, 9, 8);
  CHECK(matmul(ia, ib).to_vector<std::int32_t>() == reference_matmul<std::int32_t>(ia, ib, false, false));
  // Empty dimensions: K = 0 gives zeros.
  CHECK(matmul(tensor::zeros({3, 0}, dtype::float32), tensor::zeros({0, 2}, dtype::float32)).to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(matmul(tensor::zeros({0, 4}, dtype::float32), tensor::zeros({4, 2}, dtype::float32)).numel() == 0);
}

TEST_CASE("bad matmul operands are clear errors") {
  const tensor a = tensor::zeros({2, 3}, dtype::float32), b = tensor::zeros({4, 5}, dtype::float32);
  CHECK(message_of<kernel_error>([&] { matmul(a, b); }) ==
        "kiln::kernels::matmul: the inner dimensions differ: float32[2, 3] x float32[4, 5] (3 and 4)");
  CHECK(message_of<kernel_error>([&] { matmul(a, b, true, true); }) ==
        "kiln::kernels::matmul: the inner dimensions differ: float32[2, 3] (transposed) x float32[4, 5] (transposed) (2 and 5)");
  CHECK(message_of<kernel_error>([&] { matmul(tensor::zeros({2, 2, 3}, dtype::float32), tensor::zeros({3, 3, 4}, dtype::float32)); }) ==
        "kiln::kernels::matmul: the batch dimensions of float32[2, 2, 3] and float32[3, 3, 4] do not broadcast (2 and 3)");
  CHECK(message_of<kernel_error>([&] { matmul(a, tensor::zeros({3, 2}, dtype::float64)); }) ==
        "kiln::kernels::matmul: operands float32[2, 3] and float64[3, 2] have different dtypes; cast one first");
  CHECK(message_of<kernel_error>([&] { matmul(a, tensor::zeros({3, 2}, dtype::float32), tensor::zeros({2, 3}, dtype::float32)); }) ==
        "kiln::kernels::matmul: the output must be float32[2, 2], got float32[2, 3]");
  CHECK(message_of<kernel_error>([&] { matmul(tensor::zeros({}, dtype::float32), a); }).find("rank at least 1") != std::string::npos);
  tensor sq = tensor::zeros({4, 4}, dtype::float32);
  CHECK(message_of<kernel_error>([&] { matmul(sq, sq, sq); }) ==
        "kiln::kernels::matmul: the output float32[4, 4] overlaps an input; write into a separate tensor");
}

// ---- matmul_fused: the epilogue gives exactly what the separate kernels give ------------------------

namespace {

/// matmul_fused(a, b, e, operands) and, separately, e over matmul(a, b): equal bit for bit (the
/// same product, the same operators per element).
template <class T>
void check_matmul_fused(const tensor& a, const tensor& b, const char* text, std::vector<tensor> operands, bool ta = false, bool tb = false,
                        const tensor* into = nullptr) {
  INFO("expression: ", std::string(text));
  const fused_expr e = fused_expr::parse(text);
  std::vector<tensor> inputs{matmul(a, b, ta, tb)};
  inputs.insert(inputs.end(), operands.begin(), operands.end());
  const tensor want = e.run(inputs);
  const tensor out = into ? *into : tensor::empty(want.shape(), want.type());
  matmul_fused(a, b, e, operands, out, ta, tb);
  CHECK(out.to_vector<T>() == want.to_vector<T>());
}

/// As check_matmul_fused, within rounding: an operand that keeps the batch from folding into rows
/// makes the fused product run per matrix while the separate one runs folded, in another order.
void check_matmul_fused_batched(const tensor& x, const tensor& w, std::int64_t rows) {
  const std::int64_t b = x.shape(0), n = w.shape(1);
  unsigned seed = 900;
  auto check = [&](const char* text, std::vector<tensor> operands) {
    const fused_expr e = fused_expr::parse(text);
    std::vector<tensor> inputs{matmul(x, w)};
    inputs.insert(inputs.end(), operands.begin(), operands.end());
    const tensor want = e.run(inputs);
    const tensor out = tensor::empty(want.shape(), want.type());
    matmul_fused(x, w, e, operands, out);
    check_all_close(out.to_vector<float>(), want.to_vector<float>(), 0, 4e-6 * 21 * 2);
  };
  check("(add x0 x1)", {random_tensor<float>({n}, -1, 1, seed++)});
  check("(add (relu (add x0 x1)) x2)", {random_tensor<float>({n}, -1, 1, seed++), random_tensor<float>({b, rows, n}, -1, 1, seed++)});
  check("(multiply x0 x1)", {random_tensor<float>({b, rows, 1}, -1, 1, seed++)});
  check("(multiply x0 x1)", {random_tensor<float>({b, 1, n}, -1, 1, seed++)});
  check("(add x0 x1)", {random_tensor<float>({b, 1, 1}, -1, 1, seed++)});
}

}  // namespace

TEST_CASE("matmul_fused applies bias, activation and residual per block, equal to the separate kernels") {
  unsigned seed = 300;
  // The last three: few rows of K over many columns (C written in strips of A's row panels, the
  // epilogue per strip), with a short last panel of rows, and more columns than one block.
  const std::int64_t sizes[][3] = {{1, 1, 1},    {7, 5, 13},     {6, 16, 16},    {13, 500, 33}, {200, 64, 40},
                                   {5, 3, 1100}, {97, 385, 70}, {26, 16, 1500}, {13, 32, 700}, {40, 8, 2100},
                                   {300, 48, 1}, {37, 1152, 1}};
  for (const auto& s : sizes) {
    const std::int64_t m = s[0], k = s[1], n = s[2];
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    const tensor a = random_tensor<float>({m, k}, -1, 1, seed++), b = random_tensor<float>({k, n}, -1, 1, seed++);
    const tensor bias = random_tensor<float>({n}, -1, 1, seed++), res = random_tensor<float>({m, n}, -1, 1, seed++);
    const tensor per_row = random_tensor<float>({m, 1}, -1, 1, seed++);
    check_matmul_fused<float>(a, b, "(add x0 x1)", {bias});
    check_matmul_fused<float>(a, b, "(gelu (add x0 x1))", {bias});
    check_matmul_fused<float>(a, b, "(add (relu (add x0 x1)) x2)", {bias, res});
    check_matmul_fused<float>(a, b, "(clip (multiply x0 x1) -0.5 0.5)", {per_row});
    check_matmul_fused<float>(a, b, "(sigmoid x0)", {});
    check_matmul_fused<float>(a, b, "(tanh (add x0 x1))", {res});
    // one-pass forms: SiLU, hard-swish and gelu_tanh of a bias per column; a bias per row and a residual
    check_matmul_fused<float>(a, b, "(multiply (add x0 x1) (sigmoid (add x0 x1)))", {bias});
    check_matmul_fused<float>(a, b, "(multiply (add x0 x1) (clip (add (multiply (add x0 x1) 0.1666666716337204) 0.5) 0 1))", {bias});
    check_matmul_fused<float>(a, b, "(gelu_tanh (add x1 x0))", {bias});
    check_matmul_fused<float>(a, b, "(add x2 (add x0 x1))", {per_row, res});
    // transposed operands
    const tensor at = a.permute({1, 0}).contiguous(), bt = b.permute({1, 0}).contiguous();
    check_matmul_fused<float>(at, bt, "(relu (add x0 x1))", {bias}, true, true);
  }
  // float64; batches broadcast against the operands; a strided output
  const tensor a = random_tensor<double>({3, 1, 9, 20}, -1, 1, 1), b = random_tensor<double>({4, 20, 11}, -1, 1, 2);
  check_matmul_fused<double>(a, b, "(add (multiply x0 x1) x2)", {random_tensor<double>({4, 1, 11}, -1, 1, 3), random_tensor<double>({3, 4, 9, 11}, -1, 1, 4)});
  check_matmul_fused<double>(a, b, "(multiply (add x0 x1) (sigmoid (add x0 x1)))", {random_tensor<double>({4, 1, 11}, -1, 1, 3)});
  const tensor big = tensor::zeros({3, 4, 9, 22}, dtype::float64), strided = big.slice(3, 0, 22, 2);
  check_matmul_fused<double>(a, b, "(add x0 x1)", {random_tensor<double>({11}, -1, 1, 5)}, false, false, &strided);
  // a residual that is read through a transposed view
  const tensor x = random_tensor<float>({17, 8}, -1, 1, 6), w = random_tensor<float>({8, 19}, -1, 1, 7);
  check_matmul_fused<float>(x, w, "(add x0 x1)", {random_tensor<float>({19, 17}, -1, 1, 8).permute({1, 0})});
  // vectors (the product first, then the expression), and K = 0
  check_matmul_fused<float>(random_tensor<float>({8}, -1, 1, 9), w, "(relu (add x0 x1))", {random_tensor<float>({19}, -1, 1, 10)});
  check_matmul_fused<float>(tensor::zeros({4, 0}, dtype::float32), tensor::zeros({0, 5}, dtype::float32), "(add x0 x1)",
                            {random_tensor<float>({5}, -1, 1, 11)});
}

TEST_CASE("matmul_fused: an operand that is the output is read before it is overwritten") {
  // out = x @ w + out (an in-place residual): the product is computed first, then added.
  const tensor x = random_tensor<float>({40, 400}, -1, 1, 21), w = random_tensor<float>({400, 24}, -1, 1, 22);
  const tensor res = random_tensor<float>({40, 24}, -1, 1, 23);
  const fused_expr e = fused_expr::parse("(add x0 x1)");
  const std::vector<float> want = e.run({matmul(x, w), res}).to_vector<float>();
  const tensor out = res.contiguous();
  matmul_fused(x, w, e, {out}, out);
  CHECK(out.to_vector<float>() == want);
}

TEST_CASE("matmul_fused: bad epilogues and operands are clear errors") {
  const tensor a = random_tensor<float>({4, 3}, -1, 1, 1), b = random_tensor<float>({3, 5}, -1, 1, 2);
  const tensor out = tensor::empty({4, 5}, dtype::float32);
  const fused_expr add = fused_expr::parse("(add x0 x1)");
  CHECK(message_of([&] { matmul_fused(a, b, add, {}, out); }) ==
        "kiln::kernels::matmul_fused: the epilogue (add x0 x1) reads 2 inputs (x0 is the kernel's result), 1 given");
  CHECK(message_of([&] { matmul_fused(a, b, add, {random_tensor<float>({4}, -1, 1, 3)}, out); }) ==
        "kiln::kernels::matmul_fused: epilogue operand x1 float32[4] does not broadcast to the result's shape float32[4, 5]");
  CHECK(message_of([&] { matmul_fused(a, b, add, {random_tensor<double>({5}, -1, 1, 3)}, out); }) ==
        "kiln::kernels::matmul_fused: epilogue operand x1 is float64[5] but the result is float32");
  CHECK(message_of([&] { matmul_fused(a, b, add, {random_tensor<float>({2, 4, 5}, -1, 1, 3)}, out); }) ==
        "kiln::kernels::matmul_fused: epilogue operand x1 float32[2, 4, 5] does not broadcast to the result's shape float32[4, 5]");
  const tensor ia = tensor::zeros({2, 2}, dtype::int32);
  CHECK(message_of([&] { matmul_fused(ia, ia, fused_expr::parse("(relu x0)"), {}, tensor::empty({2, 2}, dtype::int32)); }) ==
        "kiln::kernels::matmul_fused: a fused epilogue needs a float32 or float64 result, got int32[2, 2]");
}

// ---- weights packed ahead of time ------------------------------------------------------------------

namespace {

/// matmul_prepacked(a, prepack_weight(b, tb)) against matmul(a, b): bit for bit with more than
/// four rows (the same panels, the same blocked loops), within rounding otherwise.
template <class T>
void check_prepacked(const tensor& a, const tensor& b, bool ta, bool tb) {
  const tensor want = matmul(a, b, ta, tb);
  const tensor packed = prepack_weight(b, tb);
  const std::int64_t k = tb ? b.shape(1) : b.shape(0), n = tb ? b.shape(0) : b.shape(1);
  const packed_weight_layout layout = native_weight_layout(b.type(), k, n);
  CHECK(packed.numel() == packed_b_size(k, n, layout.panels));
  const tensor got = tensor::empty(want.shape(), want.type());
  matmul_prepacked(a, packed, layout, got, ta);
  const std::int64_t rows = n > 0 ? want.numel() / n : 0;  // of A, batches included
  if (rows > gemm_detail::small_m_rows)
    CHECK(got.to_vector<T>() == want.to_vector<T>());
  else
    check_all_close(got.to_vector<T>(), want.to_vector<T>(), 0, (std::is_same_v<T, float> ? 4e-6 : 1e-13) * double(k + 1));
}

template <class T>
void check_prepacked(std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb, unsigned seed) {
  CAPTURE(m);
  CAPTURE(k);
  CAPTURE(n);
  CAPTURE(ta);
  CAPTURE(tb);
  const tensor a = random_tensor<T>(ta ? shape_vector{k, m} : shape_vector{m, k}, -1, 1, seed);
  const tensor b = random_tensor<T>(tb ? shape_vector{n, k} : shape_vector{k, n}, -1, 1, seed + 1);
  check_prepacked<T>(a, b, ta, tb);
}

/// `b` (K x N) packed by hand, element by element, in layout `l`.
tensor pack_by_hand(const tensor& b, packed_b_layout l) {
  const std::int64_t k = b.shape(0), n = b.shape(1);
  std::vector<float> data(std::size_t(packed_b_size(k, n, l)), 0.0f);
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n; ++j) data[std::size_t(packed_b_index(k, n, l, p, j))] = broadcast_at<float>(b, {p, j});
  return tensor::from_values<float>({std::int64_t(data.size())}, data);
}

}  // namespace

TEST_CASE("a prepacked weight gives matmul's product: every tail shape, the cache blocks, both transposes, float and double") {
  unsigned seed = 2000;
  for (std::int64_t m : {1, 2, 3, 4, 5, 12, 13, 31})
    for (std::int64_t n : {1, 15, 16, 32, 33, 64, 70, 300})
      for (std::int64_t k : {1, 9, 64, 385}) check_prepacked<float>(m, k, n, false, false, seed += 2);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_prepacked<float>(37, 29, 41, ta, tb, seed += 2);
      check_prepacked<float>(3, 29, 41, ta, tb, seed += 2);
      check_prepacked<double>(23, 19, 17, ta, tb, seed += 2);
      check_prepacked<double>(2, 400, 17, ta, tb, seed += 2);
    }
  check_prepacked<float>(5, 900, 7, false, false, seed += 2);     // three K blocks
  check_prepacked<float>(250, 20, 9, false, true, seed += 2);     // M over several A blocks
  check_prepacked<float>(30, 50, 2100, false, false, seed += 2);  // N over one NC block
  check_prepacked<float>(1, 1000, 2100, false, false, seed += 2); // a matrix-vector product over several K blocks
  check_prepacked<float>(6, 0, 5, false, false, seed += 2);       // K = 0: zeros
  check_prepacked<float>(0, 5, 5, false, false, seed += 2);
}

TEST_CASE("matmul: a last panel of at most MR / 3 rows read in place, 1 to 4 rows, any K block, with and without a prepacked B") {
  // Where no columns are left over for the one-panel kernels (N a multiple of 2 NR: 64 floats
  // on AVX-512, 16 on AVX2), a row-major A's short last panel is read in place; rows past the
  // matrix's last are its last row again, computed and not stored.
  unsigned seed = 3000;
  for (std::int64_t m : {1, 2, 3, 4, 13, 14, 15, 16, 49, 52, 64})
    for (std::int64_t n : {64, 128})
      for (std::int64_t k : {7, 784}) {
        check_matmul<float>(m, k, n, false, false, seed++);
        check_prepacked<float>(m, k, n, false, false, seed++);
      }
  check_matmul<double>(50, 300, 64, false, false, seed++);
  check_prepacked<double>(26, 400, 32, false, false, seed++);
}

TEST_CASE("a prepacked weight in batched, vector and strided products, and in matmul_fused_prepacked") {
  unsigned seed = 3000;
  const tensor w = random_tensor<float>({40, 70}, -1, 1, seed++);
  check_prepacked<float>(random_tensor<float>({3, 5, 40}, -1, 1, seed++), w, false, false);  // folded into 15 rows
  check_prepacked<float>(random_tensor<float>({2, 3, 1, 40}, -1, 1, seed++), w, false, false);
  check_prepacked<float>(random_tensor<float>({3, 40, 5}, -1, 1, seed++), w, true, false);   // per matrix
  check_prepacked<float>(random_tensor<float>({40}, -1, 1, seed++), w, false, false);        // a vector
  check_prepacked<float>(random_tensor<float>({60, 40}, -1, 1, seed++).slice(0, 0, 60, 3), w, false, false);  // strided rows
  // A strided output.
  const tensor a = random_tensor<float>({9, 40}, -1, 1, seed++);
  const tensor big = tensor::zeros({9, 140}, dtype::float32), strided = big.slice(1, 0, 140, 2);
  matmul_prepacked(a, prepack_weight(w), native_weight_layout(dtype::float32, 40, 70), strided);
  CHECK(strided.contiguous().to_vector<float>() == matmul(a, w).to_vector<float>());

  // Fused: the epilogue of matmul_fused, over the prepacked product.
  for (std::int64_t m : {1, 3, 9, 130}) {
    CAPTURE(m);
    const tensor x = random_tensor<float>({m, 40}, -1, 1, seed++);
    const tensor bias = random_tensor<float>({70}, -1, 1, seed++), res = random_tensor<float>({m, 70}, -1, 1, seed++);
    const fused_expr e = fused_expr::parse("(add (gelu (add x0 x1)) x2)");
    const tensor want = tensor::empty({m, 70}, dtype::float32), got = tensor::empty({m, 70}, dtype::float32);
    matmul_fused(x, w, e, {bias, res}, want);
    matmul_fused_prepacked(x, prepack_weight(w), native_weight_layout(dtype::float32, 40, 70), e, {bias, res}, got);
    if (m > gemm_detail::small_m_rows)
      CHECK(got.to_vector<float>() == want.to_vector<float>());
    else
      check_all_close(got.to_vector<float>(), want.to_vector<float>(), 0, 4e-6 * 41);
  }
  // A weight stored transposed (ONNX Gemm's transB), fused, float64.
  const tensor wt = random_tensor<double>({70, 40}, -1, 1, seed++), xd = random_tensor<double>({20, 40}, -1, 1, seed++);
  const tensor bias = random_tensor<double>({70}, -1, 1, seed++);
  const fused_expr relu = fused_expr::parse("(relu (add x0 x1))");
  const tensor want = tensor::empty({20, 70}, dtype::float64), got = tensor::empty({20, 70}, dtype::float64);
  matmul_fused(xd, wt, relu, {bias}, want, false, true);
  matmul_fused_prepacked(xd, prepack_weight(wt, true), native_weight_layout(dtype::float64, 40, 70), relu, {bias}, got);
  CHECK(got.to_vector<double>() == want.to_vector<double>());
}

TEST_CASE("a weight packed in another layout, or misaligned, is unpacked first, with the same product") {
  const tensor a = random_tensor<float>({20, 37}, -1, 1, 1), b = random_tensor<float>({37, 45}, -1, 1, 2);
  const tensor want = matmul(a, b);
  // The layout index agrees with what prepack_weight writes, and unpack_b inverts it.
  const packed_weight_layout native = native_weight_layout(dtype::float32, 37, 45);
  CHECK(pack_by_hand(b, native.panels).to_vector<float>() == prepack_weight(b).to_vector<float>());
  for (packed_b_layout foreign : {packed_b_layout{8, 5}, packed_b_layout{1, 1}, packed_b_layout{64, 1000}, packed_b_layout{3, 37}}) {
    CAPTURE(foreign.nr);
    CAPTURE(foreign.kc);
    const tensor packed = pack_by_hand(b, foreign);
    tensor back = tensor::empty({37, 45}, dtype::float32);
    unpack_b<float>(static_cast<const float*>(packed.data()), foreign, {static_cast<float*>(back.data()), 37, 45, 45, 1});
    CHECK(back.to_vector<float>() == b.to_vector<float>());
    // repack_b gives what packing in the other layout gives, padding included, both ways.
    for (packed_b_layout to : {native.panels, packed_b_layout{6, 7}}) {
      CAPTURE(to.nr);
      std::vector<float> repacked(std::size_t(packed_b_size(37, 45, to)), -1.f), again(std::size_t(packed_b_size(37, 45, foreign)), -1.f);
      repack_b(static_cast<const float*>(packed.data()), foreign, 37, 45, to, repacked.data());
      CHECK(repacked == pack_by_hand(b, to).to_vector<float>());
      repack_b(repacked.data(), to, 37, 45, foreign, again.data());
      CHECK(again == packed.to_vector<float>());
    }
    const tensor got = tensor::empty({20, 45}, dtype::float32);
    matmul_prepacked(a, packed, {37, 45, foreign}, got);
    CHECK(got.to_vector<float>() == want.to_vector<float>());
  }
  // The native layout one element past a 64-byte boundary.
  const tensor packed = prepack_weight(b);
  tensor shifted_storage = tensor::empty({packed.numel() + 1}, dtype::float32);
  const tensor shifted = shifted_storage.slice(0, 1, packed.numel() + 1);
  copy(packed, shifted);
  const tensor got = tensor::empty({20, 45}, dtype::float32);
  matmul_prepacked(a, shifted, native, got);
  CHECK(got.to_vector<float>() == want.to_vector<float>());
}

TEST_CASE("bad prepacked weights and layouts are clear errors") {
  const tensor w = random_tensor<float>({6, 10}, -1, 1, 1), a = random_tensor<float>({4, 6}, -1, 1, 2);
  const tensor packed = prepack_weight(w);
  const packed_weight_layout l = native_weight_layout(dtype::float32, 6, 10);
  const tensor out = tensor::empty({4, 10}, dtype::float32);
  const std::string nr = std::to_string(l.panels.nr);
  const std::string padded = std::to_string((40 + l.panels.nr - 1) / l.panels.nr * l.panels.nr);
  CHECK(message_of<kernel_error>([&] { matmul_prepacked(a, packed, {6, 40, l.panels}, out); }) ==
        "kiln::kernels::matmul_prepacked: the packed weight must be a contiguous vector of 6 x " + padded + " elements for a 6 x 40 weight in panels of " +
            nr + " columns, got float32[" + std::to_string(packed.numel()) + "]");
  CHECK(message_of<kernel_error>([&] { matmul_prepacked(a, packed, {6, 10, {0, 384}}, out); }) ==
        "kiln::kernels::matmul_prepacked: bad packed layout: K 6, N 10, panels of 0 columns in blocks of 384 rows");
  CHECK(message_of<kernel_error>([&] { matmul_prepacked(a, packed, {-6, 10, l.panels}, out); }).find("bad packed layout: K -6") != std::string::npos);
  CHECK(message_of<kernel_error>([&] { matmul_prepacked(random_tensor<float>({4, 5}, -1, 1, 3), packed, l, out); }) ==
        "kiln::kernels::matmul: the inner dimensions differ: float32[4, 5] x float32[6, 10] (5 and 6)");
  CHECK(message_of<kernel_error>([&] { matmul_prepacked(tensor::zeros({4, 6}, dtype::float64), packed, l, out); }) ==
        "kiln::kernels::matmul: operands float64[4, 6] and float32[6, 10] have different dtypes; cast one first");
  CHECK(message_of<kernel_error>([&] { matmul_prepacked(a, tensor::zeros({packed.numel()}, dtype::int32), l, out); }) ==
        "kiln::kernels::matmul_prepacked: the packed weight must be float32 or float64, got int32[" + std::to_string(packed.numel()) + "]");
  CHECK(message_of<kernel_error>([&] { matmul_prepacked(a, packed.view({2, -1}), l, out); }).find("must be a contiguous vector") != std::string::npos);
  const tensor inside = packed.slice(0, 0, 40).view({4, 10});
  CHECK(message_of<kernel_error>([&] { matmul_prepacked(a, packed, l, inside); }) ==
        "kiln::kernels::matmul_prepacked: the output float32[4, 10] overlaps an input; write into a separate tensor");
  CHECK(message_of<kernel_error>([&] { matmul_fused_prepacked(a, packed, {6, 10, {l.panels.nr, 0}}, fused_expr::parse("(relu x0)"), {}, out); })
            .find("kiln::kernels::matmul_fused_prepacked: bad packed layout") == 0);
  CHECK(message_of<kernel_error>([&] { prepack_weight(tensor::zeros({2, 3, 4}, dtype::float32)); }) ==
        "kiln::kernels::prepack_weight: the weight must be a matrix, got float32[2, 3, 4]");
  CHECK(message_of<kernel_error>([&] { prepack_weight(tensor::zeros({2, 3}, dtype::int32)); }) ==
        "kiln::kernels::prepack_weight: packs float32 and float64 weights, not int32");
  CHECK(message_of<kernel_error>([&] { packed_layout("matmul_prepacked", std::vector<std::int64_t>{1, 2, 3}); }) ==
        "kiln::kernels::matmul_prepacked: the packed layout must have 4 values (K, N, nr, kc), got 3");
}

namespace {

/// Blocks for caches `c` while it lives, then for the caches read again.
struct caches_scope {
  explicit caches_scope(const cache_info& c) { set_cpu_caches(c); }
  ~caches_scope() { set_cpu_caches({}); }
  caches_scope(const caches_scope&) = delete;
  caches_scope& operator=(const caches_scope&) = delete;
};

}  // namespace

TEST_CASE("gemm blocking: MC from the L2, NC from a core's share of the L3, B in place within the L1") {
  using S = gemm_detail::shape<float>;
  constexpr std::int64_t MR = S::MR, NR = S::NR;
  // A 1 MB L2 with the L3's sharing unknown (Zen 4 and 5 under a hypervisor that reports AMD's
  // older leaves): 16 panels of A's rows, 64 of B's columns, B in place up to the 48 KB L1.
  constexpr gemm_detail::blocking zen = gemm_detail::blocking_for<float>({48 << 10, 1 << 20, 32 << 20, 0, ""});
  static_assert(zen == gemm_detail::blocking{16 * MR, 64 * NR, 48 << 10});
  // The L3's sharing known: 32 MB for 16 CPUs is 4 MB a core, more than 64 panels need.
  CHECK(gemm_detail::blocking_for<float>({48 << 10, 1 << 20, 32 << 20, 16, ""}) == zen);
  // A 2 MB L2 and 30 MB of L3 for 128 CPUs: 32 panels of rows, a block of B of the 480 KB a
  // core gets (320 columns of 384 floats, at any vector width).
  CHECK(gemm_detail::blocking_for<float>({48 << 10, 2 << 20, 30 << 20, 128, ""}) == gemm_detail::blocking{32 * MR, 320, 48 << 10});
  // Small and large caches hit the bounds: 4 to 48 panels of rows, 8 to 64 of columns, B in
  // place within 16 to 64 KB.
  CHECK(gemm_detail::blocking_for<float>({8 << 10, 64 << 10, 1 << 20, 64, ""}) == gemm_detail::blocking{4 * MR, 8 * NR, 16 << 10});
  CHECK(gemm_detail::blocking_for<float>({256 << 10, 16 << 20, 1 << 30, 1, ""}) == gemm_detail::blocking{48 * MR, 64 * NR, 64 << 10});
  // Doubles: the same panels of rows, columns half as many for the same bytes of L3.
  using D = gemm_detail::shape<double>;
  CHECK(gemm_detail::blocking_for<double>({48 << 10, 1 << 20, 0, 0, ""}) == gemm_detail::blocking{16 * D::MR, 64 * D::NR, 48 << 10});
  // What this machine runs with is the blocking for what was read.
  CHECK(gemm_detail::current_blocking<float>() == gemm_detail::blocking_for<float>(cpu_caches()));
}

TEST_CASE("gemm under the smallest blocking: many blocks of rows, columns and K, B packed or in place, against the reference") {
  // 8 KB of L1 (B in place up to 16 KB: K <= 128 at AVX-512), 64 KB of L2 (4 panels of rows), a
  // 64 KB L3 for 2 CPUs (8 panels of columns): the products below cross every kind of block edge.
  caches_scope scope({8 << 10, 64 << 10, 64 << 10, 2, ""});
  const gemm_detail::blocking b = gemm_detail::current_blocking<float>();
  constexpr std::int64_t MR = gemm_detail::shape<float>::MR, NR = gemm_detail::shape<float>::NR;
  REQUIRE(b == gemm_detail::blocking{4 * MR, 8 * NR, 16 << 10});
  unsigned seed = 7100;
  struct dims {
    std::int64_t m, k, n;
  };
  for (const dims d : {dims{b.mc * 2 + MR + 5, 100, b.nc * 2 + NR + 3}, dims{b.mc + 1, 900, b.nc + 1}, dims{3 * MR, 128, 3 * b.nc},
                       dims{b.mc * 3, 129, 5 * NR}}) {
    CAPTURE(d.m);
    CAPTURE(d.k);
    CAPTURE(d.n);
    const tensor a = random_tensor<float>({d.m, d.k}, -1, 1, seed++), bt = random_tensor<float>({d.k, d.n}, -1, 1, seed++);
    tensor c = tensor::empty({d.m, d.n}, dtype::float32);
    gemm<float>({static_cast<const float*>(a.data()), d.m, d.k, d.k, 1}, {static_cast<const float*>(bt.data()), d.k, d.n, d.n, 1},
                {static_cast<float*>(c.data()), d.m, d.n, d.n, 1});
    const auto expected = reference_matmul<float>(a, bt, false, false);
    check_all_close(c.to_vector<float>(), expected, 0, 4e-6 * double(d.k + 1));
    // With the weights packed ahead of time: the same layout whatever the caches.
    const tensor packed = prepack_weight(bt);
    tensor cp = tensor::empty({d.m, d.n}, dtype::float32);
    matmul_prepacked(a, packed, native_weight_layout(dtype::float32, d.k, d.n), cp);
    check_all_close(cp.to_vector<float>(), expected, 0, 4e-6 * double(d.k + 1));
  }
}
