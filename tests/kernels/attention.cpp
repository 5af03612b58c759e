// SPDX-License-Identifier: Apache-2.0
// kernels::attention against the chain of kernels it replaces: matmul (with the pre expression),
// where, the post expression, softmax, matmul. The two sum the products in other orders (a block
// of rows against the whole matrix), so they agree to rounding: 1e-5 for float32 (scores of
// magnitude ~1, probabilities summing to 1), 1e-12 for float64.
#include <kiln/kernels/attention.hpp>
#include <kiln/kernels/elementwise.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/reduce.hpp>
#include <kiln/kernels/transform.hpp>

#include "../common/message_of.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln_test;

namespace {

/// A causal mask of M query rows after `past` positions: row i sees positions [0, past + i].
tensor causal_mask(std::int64_t m, std::int64_t n) {
  tensor t = tensor::empty({m, n}, dtype::bool_);
  auto* p = static_cast<std::uint8_t*>(t.data());
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) p[i * n + j] = j <= n - m + i;
  return t;
}

/// The unfused chain.
tensor unfused(const tensor& q, const tensor& k, const tensor& v, bool tk, const attention_scores& s, const std::vector<tensor>& operands) {
  tensor scores = matmul(q, k, false, tk);
  auto apply = [&](const fused_expr* e) {
    if (!e) return;
    std::vector<tensor> in{scores};
    in.insert(in.end(), operands.begin(), operands.end());
    scores = e->run(in);
  };
  apply(s.pre);
  if (s.mask.defined()) {
    tensor fill = tensor::empty({}, scores.type());
    if (scores.type() == dtype::float32) *fill.data<float>() = float(s.fill);
    else *fill.data<double>() = s.fill;
    scores = s.mask_keeps ? where(s.mask, scores, fill) : where(s.mask, fill, scores);
  }
  apply(s.post);
  return matmul(softmax(scores, -1), v);
}

template <class T>
void check(shape_vector lead, std::int64_t m, std::int64_t n, std::int64_t d, std::int64_t dv, bool tk, bool masked, bool biased, unsigned seed) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(d);
  CAPTURE(tk);
  CAPTURE(masked);
  CAPTURE(biased);
  auto with = [&](shape_vector tail) {
    shape_vector s = lead;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  const tensor q = random_tensor<T>(with({m, d}), -1, 1, seed);
  const tensor k = random_tensor<T>(tk ? with({n, d}) : with({d, n}), -1, 1, seed + 1);
  const tensor v = random_tensor<T>(with({n, dv}), -1, 1, seed + 2);
  const fused_expr scale = fused_expr::parse("(multiply x0 0.125)"), bias = fused_expr::parse("(add x0 x1)");
  attention_scores s{&scale, masked ? causal_mask(m, n) : tensor(), true, -3.4028234663852886e+38, biased ? &bias : nullptr};
  std::vector<tensor> operands;
  if (biased) {
    shape_vector bs(lead.size(), 1);
    bs.push_back(1), bs.push_back(n);
    operands.push_back(random_tensor<T>(bs, -2, 0, seed + 3));
  }
  const tensor got = attention(q, k, v, tk, s, operands), want = unfused(q, k, v, tk, s, operands);
  REQUIRE(got.shape() == want.shape());
  check_all_close(got.to_vector<T>(), want.to_vector<T>(), 0, std::is_same_v<T, float> ? 1e-5 : 1e-12);
}

}  // namespace

TEST_CASE("attention equals matmul, scale, mask, bias, softmax, matmul: one query row and many") {
  unsigned seed = 1;
  for (std::int64_t m : {1, 2, 4, 5, 13, 64, 130})
    for (std::int64_t n : {1, 7, 64, 300})
      for (bool tk : {true, false}) {
        if (n < m) continue;  // a causal mask needs m <= n
        check<float>({2, 3}, m, n, 16, 16, tk, true, true, seed++);
      }
  check<float>({1, 12}, 1, 1030, 64, 64, true, true, true, seed++);  // a decode step at context 1,030
  check<float>({12}, 200, 200, 64, 64, true, true, false, seed++);   // a prefill
  check<float>({2}, 3, 50, 8, 24, true, false, true, seed++);         // v wider than the keys
  check<float>({}, 6, 6, 8, 8, false, false, false, seed++);          // no batch, no mask, no bias
  check<double>({2, 2}, 1, 77, 32, 32, true, true, true, seed++);
  check<double>({2, 2}, 33, 77, 32, 32, true, true, true, seed++);
}

TEST_CASE("attention reads strided keys and values in place, and broadcasts leading axes") {
  // A cache of capacity 64 holding 20 positions, as kv_cache_append leaves it; one head of k and v shared by 3 query heads.
  const tensor kbuf = random_tensor<float>({1, 1, 64, 16}, -1, 1, 11), vbuf = random_tensor<float>({1, 1, 64, 16}, -1, 1, 12);
  const tensor k = strided_slice_view(kbuf, std::vector<std::int64_t>{2}, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{20});
  const tensor v = strided_slice_view(vbuf, std::vector<std::int64_t>{2}, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{20});
  const tensor q = random_tensor<float>({1, 3, 2, 16}, -1, 1, 13);
  const attention_scores s{nullptr, causal_mask(2, 20), false, 0, nullptr};  // keep where false: the mask's complement
  const tensor got = attention(q, k, v, true, s), want = unfused(q, k, v, true, s, {});
  CHECK(got.shape() == shape_vector{1, 3, 2, 16});
  check_all_close(got.to_vector<float>(), want.to_vector<float>(), 0, 1e-5);
}

TEST_CASE("attention over an empty cache gives zeros, and a row masked whole gives NaN as softmax does") {
  const tensor q = random_tensor<float>({2, 1, 8}, -1, 1, 1), k = tensor::empty({2, 0, 8}, dtype::float32), v = tensor::empty({2, 0, 8}, dtype::float32);
  const tensor z = attention(q, k, v);
  for (float x : z.to_vector<float>()) CHECK(x == 0);
  const tensor k2 = random_tensor<float>({2, 3, 8}, -1, 1, 2), v2 = random_tensor<float>({2, 3, 8}, -1, 1, 3);
  tensor none = tensor::empty({1, 3}, dtype::bool_);
  std::fill_n(static_cast<std::uint8_t*>(none.data()), 3, 0);
  const float inf = std::numeric_limits<float>::infinity();
  const tensor nan = attention(q, k2, v2, true, {nullptr, none, true, -inf, nullptr});
  for (float x : nan.to_vector<float>()) CHECK(std::isnan(x));
}

TEST_CASE("attention skips the columns a mask removes from a whole block of rows, and only those") {
  // Prefill-shaped: 600 query rows over 600 positions, a causal mask, several blocks of rows (at
  // most 96 each): the upper triangle is skipped.
  constexpr std::int64_t n = 600;
  const tensor q = random_tensor<float>({2, n, 16}, -1, 1, 21), k = random_tensor<float>({2, n, 16}, -1, 1, 22);
  tensor v = random_tensor<float>({2, n, 16}, -1, 1, 23);
  const attention_scores causal{nullptr, causal_mask(n, n), true, -3.4028234663852886e+38, nullptr};
  const tensor want = unfused(q, k, v, true, causal, {});
  // An infinity in v at the last position does not reach the rows of blocks that do not see it:
  // their weights there are zero and the product skips it (the unfused product gives NaN).
  v.data<float>()[(n - 1) * 16] = std::numeric_limits<float>::infinity();
  const std::vector<float> g = attention(q, k, v, true, causal).to_vector<float>(), w = want.to_vector<float>();
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < n - 96; ++i)
      for (std::int64_t j = 0; j < 16; ++j) {
        const std::size_t at = std::size_t((b * n + i) * 16 + j);
        REQUIRE(std::abs(g[at] - w[at]) <= 1e-5f);
      }
  // A row that keeps nothing, among rows that keep a prefix, spreads its weight over every
  // column (a finite fill): the skipped columns are used again.
  tensor mask = causal_mask(n, n);
  std::fill_n(static_cast<std::uint8_t*>(mask.data()) + 40 * n, n, 0);
  const attention_scores one_row_empty{nullptr, mask, true, -1e4, nullptr};
  const tensor v2 = random_tensor<float>({2, n, 16}, -1, 1, 24);
  check_all_close(attention(q, k, v2, true, one_row_empty).to_vector<float>(), unfused(q, k, v2, true, one_row_empty, {}).to_vector<float>(), 0,
                  1e-5);
  // A scattered mask kept where false, with a bias after it.
  tensor scattered = tensor::empty({n, n}, dtype::bool_);
  for (std::int64_t i = 0; i < n * n; ++i) static_cast<std::uint8_t*>(scattered.data())[i] = (i * 7919 % 13) < 9 || i % n > 300;
  const fused_expr bias = fused_expr::parse("(add x0 x1)");
  const attention_scores sc{nullptr, scattered, false, -3.4028234663852886e+38, &bias};
  const std::vector<tensor> ops{random_tensor<float>({1, n}, -2, 0, 25)};
  check_all_close(attention(q, k, v2, true, sc, ops).to_vector<float>(), unfused(q, k, v2, true, sc, ops).to_vector<float>(), 0, 1e-5);
}

TEST_CASE("attention rejects what it cannot compute, naming it") {
  const tensor q = random_tensor<float>({2, 4, 8}, -1, 1, 1), k = random_tensor<float>({2, 6, 8}, -1, 1, 2), v = random_tensor<float>({2, 6, 5}, -1, 1, 3);
  CHECK(message_of([&] { attention(q, random_tensor<float>({2, 6, 7}, -1, 1, 4), v); }) ==
        "kiln::kernels::attention: q float32[2, 4, 8] and k float32[2, 6, 7] (transposed) differ in the inner dimension (8 and 7)");
  CHECK(message_of([&] { attention(q, k, random_tensor<float>({2, 5, 5}, -1, 1, 4)); }) ==
        "kiln::kernels::attention: v float32[2, 5, 5] has 5 rows but k has 6 positions");
  CHECK(message_of([&] { attention(q, k, random_tensor<double>({2, 6, 5}, -1, 1, 4)); }) ==
        "kiln::kernels::attention: q, k and v must have one dtype, got float32[2, 4, 8], float32[2, 6, 8] and float64[2, 6, 5]");
  CHECK(message_of([&] { attention(q, random_tensor<float>({3, 6, 8}, -1, 1, 4), random_tensor<float>({3, 6, 5}, -1, 1, 5)); }) ==
        "kiln::kernels::attention: the leading axes of q float32[2, 4, 8], k float32[3, 6, 8] and v float32[3, 6, 5] do not broadcast");
  CHECK(message_of([&] { attention(q, k, v, true, {nullptr, random_tensor<float>({4, 6}, 0, 1, 1), true, 0, nullptr}); }) ==
        "kiln::kernels::attention: the mask must be a bool tensor, got float32[4, 6]");
  CHECK(message_of([&] { attention(q, k, v, true, {nullptr, tensor::empty({4, 5}, dtype::bool_), true, 0, nullptr}); }) ==
        "kiln::kernels::attention: the mask bool[4, 5] does not broadcast to the scores' shape [2, 4, 6]");
  const fused_expr bias = fused_expr::parse("(add x0 x1)");
  CHECK(message_of([&] { attention(q, k, v, true, {nullptr, tensor(), true, 0, &bias}); }) ==
        "kiln::kernels::attention: the post expression (add x0 x1) reads 2 inputs (x0 is the scores), 1 given");
  const tensor wrong = random_tensor<float>({3, 6}, 0, 1, 1);
  CHECK(message_of([&] { attention(q, k, v, true, {nullptr, tensor(), true, 0, &bias}, {&wrong, 1}); }) ==
        "kiln::kernels::attention: score operand x1 float32[3, 6] does not broadcast to the scores' shape [2, 4, 6]");
  const tensor out = strided_slice_view(v, std::vector<std::int64_t>{1}, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{4});  // rows of v
  CHECK(message_of([&] { attention(q, k, v, true, {}, {}, out); }) ==
        "kiln::kernels::attention: the output float32[2, 4, 5] overlaps an input; write into a separate tensor");
}
