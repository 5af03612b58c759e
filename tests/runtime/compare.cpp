// SPDX-License-Identifier: Apache-2.0
// compare_close: numpy's allclose rule, what it reports, and tensors it cannot compare.
#include <kiln/runtime/compare.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace kiln;
using kiln::runtime::compare_close;
using kiln::runtime::tensor;

TEST_CASE("compare_close applies |got - want| <= atol + rtol |want| to every element and reports the first outside") {
  const tensor want = tensor::from_values<float>({2, 3}, {1.f, -2.f, 100.f, 0.f, 5.f, 7.f});
  CHECK(compare_close(want, want, 0, 0).ok());
  // 100 * 1e-3 = 0.1 allowed at element 2; element 3 (want 0) allows atol only.
  const tensor got = tensor::from_values<float>({2, 3}, {1.f, -2.f, 100.05f, 2e-7f, 5.f, 7.5f});
  const runtime::closeness c = compare_close(got, want, 1e-3, 1e-6);
  CHECK_FALSE(c.ok());
  CHECK(c.elements == 6);
  CHECK(c.outside == 1);
  CHECK(c.first_outside == 5);
  CHECK(c.first_got == 7.5);
  CHECK(c.max_abs_diff == doctest::Approx(0.5));
  CHECK(c.describe() == "1 of 6 elements outside rtol 0.001, atol 1e-06 (the first: element 5 is 7.5, expected 7; largest difference 0.5)");
  CHECK(compare_close(got, want, 0.1, 1e-6).ok());
  CHECK(compare_close(got, want, 0.1, 1e-6).describe().empty());
}

TEST_CASE("compare_close: NaN matches NaN, equal infinities match, and NaN against a number does not") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const tensor want = tensor::from_values<float>({3}, {nan, inf, -inf});
  CHECK(compare_close(tensor::from_values<float>({3}, {nan, inf, -inf}), want, 0, 0).ok());
  const runtime::closeness c = compare_close(tensor::from_values<float>({3}, {1.f, inf, inf}), want, 1, 1);
  CHECK(c.outside == 2);
  CHECK(c.first_outside == 0);
}

TEST_CASE("compare_close reads any strides and every dtype, a dtype or shape mismatch says so") {
  const tensor m = tensor::from_values<std::int32_t>({2, 2}, {1, 2, 3, 4});
  CHECK(compare_close(m.permute({1, 0}), tensor::from_values<std::int32_t>({2, 2}, {1, 3, 2, 4}), 0, 0).ok());
  CHECK(compare_close(m, tensor::from_values<std::int32_t>({2, 2}, {1, 2, 3, 5}), 0, 0).first_outside == 3);
  CHECK(compare_close(tensor::from_values<double>({1}, {0.5}), tensor::from_values<double>({1}, {0.5}), 0, 0).ok());
  CHECK(compare_close(m, tensor::from_values<float>({2, 2}, {1, 2, 3, 4}), 0, 0).describe() == "dtype int32, expected float32");
  CHECK(compare_close(m, tensor::from_values<std::int32_t>({4}, {1, 2, 3, 4}), 0, 0).describe() == "shape [2, 2], expected [4]");
  CHECK_FALSE(compare_close(m, tensor::from_values<std::int32_t>({4}, {1, 2, 3, 4}), 1, 1).ok());
}
