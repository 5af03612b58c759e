// SPDX-License-Identifier: Apache-2.0
// Reductions, softmax and layer_norm against scalar references.
//
// Tolerances: max, min, argmax, argmin and integer sums are exact. Floating-point sum, mean and
// prod associate differently from the sequential reference (vector lanes): relative 1e-5 for
// float32 (sums of up to ~10^4 terms of mixed sign, plus an absolute 1e-5), 1e-12 for float64.
// softmax and log_softmax: 1e-6 relative (float32) and 1e-6 absolute; layer_norm 1e-5.
#include <kiln/kernels/reduce.hpp>

#include "../common/message_of.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

#include <limits>

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln_test;

namespace {

/// The reference: reduce `x` over the axes in `red` with `f` from `init`, row-major.
template <class T, class F>
std::vector<T> reference_reduce(const tensor& x, const std::vector<bool>& red, T init, F f) {
  shape_vector kept;
  for (std::size_t i = 0; i < x.ndim(); ++i)
    if (!red[i]) kept.push_back(x.shape(i));
  std::int64_t nk = 1;
  for (auto d : kept) nk *= d;
  std::vector<T> out(std::size_t(nk), init);
  for_each_index(x.shape(), [&](const shape_vector& idx) {
    std::int64_t k = 0;
    for (std::size_t i = 0; i < x.ndim(); ++i)
      if (!red[i]) k = k * x.shape(i) + idx[i];
    out[std::size_t(k)] = f(out[std::size_t(k)], broadcast_at<T>(x, idx));
  });
  return out;
}

std::vector<std::vector<std::int64_t>> all_axis_sets(std::size_t ndim) {
  std::vector<std::vector<std::int64_t>> sets;
  for (unsigned mask = 1; mask < (1u << ndim); ++mask) {
    std::vector<std::int64_t> s;
    for (std::size_t i = 0; i < ndim; ++i)
      if (mask >> i & 1) s.push_back(std::int64_t(i));
    sets.push_back(s);
  }
  return sets;
}

template <class T>
void check_reductions(const tensor& x, double rel) {
  for (const auto& axes : all_axis_sets(x.ndim())) {
    CAPTURE(runtime::shape_to_string(axes));
    std::vector<bool> red(x.ndim(), false);
    for (auto a : axes) red[std::size_t(a)] = true;
    const std::span<const std::int64_t> ax(axes);
    check_all_close(sum(x, ax).to_vector<T>(), reference_reduce<T>(x, red, T(0), [](T a, T b) { return T(a + b); }), rel, rel);
    check_all_close(max(x, ax).to_vector<T>(), reference_reduce<T>(x, red, std::numeric_limits<T>::lowest(), [](T a, T b) { return a < b ? b : a; }));
    check_all_close(min(x, ax).to_vector<T>(), reference_reduce<T>(x, red, std::numeric_limits<T>::max(), [](T a, T b) { return b < a ? b : a; }));
    const tensor kd = sum(x, ax, true);
    CHECK(kd.ndim() == x.ndim());
    for (auto a : axes) CHECK(kd.shape(std::size_t(a)) == 1);
    if constexpr (std::is_floating_point_v<T>) {
      std::int64_t count = 1;
      for (auto a : axes) count *= x.shape(std::size_t(a));
      auto want = reference_reduce<T>(x, red, T(0), [](T a, T b) { return T(a + b); });
      for (T& v : want) v /= T(count);
      check_all_close(mean(x, ax).to_vector<T>(), want, rel, rel);
    }
  }
}

}  // namespace

TEST_CASE("sum, mean, max and min over every set of axes, contiguous and strided, float and int") {
  check_reductions<float>(random_tensor<float>({3, 17, 5}, -1, 1, 1), 1e-5);
  check_reductions<float>(random_tensor<float>({2, 3, 4, 33}, -1, 1, 2), 1e-5);
  check_reductions<double>(random_tensor<double>({7, 1, 40}, -1, 1, 3), 1e-12);
  check_reductions<std::int32_t>(random_tensor<std::int32_t>({4, 9, 6}, -100, 100, 4), 0);
  check_reductions<std::int64_t>(random_tensor<std::int64_t>({5, 31}, -100, 100, 5), 0);
  const tensor base = random_tensor<float>({6, 50, 4}, -1, 1, 6);
  check_reductions<float>(base.permute({2, 0, 1}), 1e-5);
  check_reductions<float>(base.slice(1, 3, 47, 4), 1e-5);
  // All axes (the default) gives a scalar; keepdims gives all ones.
  const tensor x = random_tensor<float>({10, 1000}, -1, 1, 7);
  CHECK(sum(x).ndim() == 0);
  check_all_close(sum(x).to_vector<float>(), reference_reduce<float>(x, {true, true}, 0.f, [](float a, float b) { return a + b; }), 1e-5, 1e-4);
  CHECK(sum(x, {}, true).shape() == shape_vector{1, 1});
  check_all_close(prod(tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6}), {-1}).to_vector<float>(), {6.f, 120.f});
  // Negative axes, and into a strided output.
  check_all_close(sum(x, {-1}).to_vector<float>(), sum(x, {1}).to_vector<float>());
  tensor out_base = tensor::zeros({20}, dtype::float32);
  sum(x, std::array<std::int64_t, 1>{1}, false, out_base.slice(0, 0, 20, 2));
  check_all_close(out_base.slice(0, 0, 20, 2).to_vector<float>(), sum(x, {1}).to_vector<float>());
}

TEST_CASE("reductions with NaN, empty axes and size-1 axes") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const tensor x = tensor::from_values<float>({2, 4}, {1, nan, 3, 2, 5, 4, 7, 6});
  const auto mx = max(x, {1}).to_vector<float>(), mn = min(x, {1}).to_vector<float>();
  CHECK(std::isnan(mx[0]));
  CHECK(mx[1] == 7);
  CHECK(std::isnan(mn[0]));
  CHECK(argmax(x, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2});
  CHECK(argmin(x, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1});
  CHECK(argmax(x).to_vector<std::int64_t>() == std::vector<std::int64_t>{1});
  CHECK(argmax(tensor::from_values<std::int32_t>({2, 3}, {3, 9, 9, 9, 1, 9}), 0, true).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 0, 0});
  CHECK(argmax(tensor::from_values<std::int32_t>({2, 3}, {3, 9, 9, 9, 1, 9}), 0, true).shape() == shape_vector{1, 3});
  // Sum of an empty axis is 0, mean NaN; max has no identity.
  const tensor e = tensor::zeros({3, 0}, dtype::float32);
  CHECK(sum(e, {1}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(std::isnan(mean(e, {1}).to_vector<float>()[0]));
  CHECK(message_of<kernel_error>([&] { max(e, {1}); }) == "kiln::kernels::max: cannot reduce an empty axis of float32[3, 0] (it has no identity)");
  CHECK(message_of<kernel_error>([&] { argmax(e, 1); }) == "kiln::kernels::argmax: cannot take the argmax of an empty axis of float32[3, 0]");
  CHECK(sum(tensor::zeros({0, 3}, dtype::float32), {1}).numel() == 0);
  // Reducing only size-1 axes is a copy.
  const tensor one = random_tensor<float>({4, 1, 3}, -1, 1, 9);
  CHECK(sum(one, {1}).to_vector<float>() == one.to_vector<float>());
}

TEST_CASE("softmax and log_softmax: stable for large values, along any axis, -inf rows") {
  for (std::int64_t n : {std::int64_t(1), std::int64_t(5), std::int64_t(16), std::int64_t(37), std::int64_t(1000)}) {
    CAPTURE(n);
    const tensor x = random_tensor<float>({3, n}, -30, 30, unsigned(n));
    std::vector<float> want, want_log;
    for (std::int64_t r = 0; r < 3; ++r) {
      double m = -1e300, s = 0;
      for (std::int64_t j = 0; j < n; ++j) m = std::max(m, double(x.data<float>()[r * n + j]));
      for (std::int64_t j = 0; j < n; ++j) s += std::exp(double(x.data<float>()[r * n + j]) - m);
      for (std::int64_t j = 0; j < n; ++j) {
        want.push_back(float(std::exp(double(x.data<float>()[r * n + j]) - m) / s));
        want_log.push_back(float(double(x.data<float>()[r * n + j]) - m - std::log(s)));
      }
    }
    check_all_close(softmax(x).to_vector<float>(), want, 1e-5, 1e-7);
    check_all_close(log_softmax(x).to_vector<float>(), want_log, 1e-6, 1e-5);
    // Along axis 0 of the transpose: the same numbers.
    check_all_close(softmax(x.permute({1, 0}), 0).permute({1, 0}).to_vector<float>(), want, 1e-5, 1e-7);
  }
  // Values that would overflow exp without the max subtraction.
  const tensor big = tensor::from_values<float>({3}, {1000.f, 1001.f, 1002.f});
  check_all_close(softmax(big).to_vector<float>(), {0.09003057f, 0.24472847f, 0.66524096f}, 1e-6, 0);
  const float inf = std::numeric_limits<float>::infinity();
  const auto s = softmax(tensor::from_values<float>({2, 2}, {-inf, 0.f, -inf, -inf})).to_vector<float>();
  CHECK(s[0] == 0);
  CHECK(s[1] == 1);
  CHECK(std::isnan(s[2]));  // all -inf: 0/0, as numpy
  CHECK(std::isnan(softmax(tensor::from_values<float>({2}, {1.f, std::numeric_limits<float>::quiet_NaN()})).to_vector<float>()[0]));
  // A NaN in the vector body or in the tail of a longer row: every output NaN, in float and double.
  for (std::int64_t at : {std::int64_t(0), std::int64_t(5), std::int64_t(38)}) {
    CAPTURE(at);
    std::vector<float> v(39, 1.f);
    v[std::size_t(at)] = std::numeric_limits<float>::quiet_NaN();
    for (float r : softmax(tensor::from_values<float>({39}, v)).to_vector<float>()) CHECK(std::isnan(r));
    const std::vector<double> vd(v.begin(), v.end());
    for (double r : softmax(tensor::from_values<double>({39}, vd)).to_vector<double>()) CHECK(std::isnan(r));
  }
  // Masked entries (-inf, or -1e9 as attention masks write) give exactly 0; the rest are exact.
  {
    std::vector<float> v(40, -1e9f);
    v[3] = -inf;
    v[7] = 0.f;
    v[33] = 0.f;
    const auto m = softmax(tensor::from_values<float>({40}, v)).to_vector<float>();
    for (std::size_t j = 0; j < 40; ++j) CHECK(m[j] == (j == 7 || j == 33 ? 0.5f : 0.f));
  }
  // In place.
  tensor y = random_tensor<double>({4, 9}, -1, 1, 3);
  const auto want = softmax(y).to_vector<double>();
  softmax(y, -1, y);
  check_all_close(y.to_vector<double>(), want, 1e-15, 0);
}

TEST_CASE("softmax's exp of x - max(x): within 1 ulp of std::exp, zero far below, NaN kept") {
  using V = batch<float>;
  constexpr std::size_t W = V::size;
  double worst = 0;
  alignas(64) float in[W], out[W];
  for (int i = 0; i <= 200000; i += int(W)) {  // [-87, 0] in steps of 87/200000
    for (std::size_t k = 0; k < W; ++k) in[k] = -87.f * float(i + int(k)) / 200000.f;
    kernels::detail::exp_nonpositive<float>(V::load_aligned(in)).store_aligned(out);
    for (std::size_t k = 0; k < W; ++k) {
      const double want = std::exp(double(in[k]));
      worst = std::max(worst, std::abs(double(out[k]) - want) / want);
    }
  }
  CHECK(worst < 1.2e-7);  // 1 ulp: float's ulp is 6e-8 to 1.2e-7 relative
  const float special[] = {0.f, -0.f, -88.f, -100.f, -1e9f, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -1.f};
  for (std::size_t k = 0; k < W; ++k) in[k] = special[k % 8];
  kernels::detail::exp_nonpositive<float>(V::load_aligned(in)).store_aligned(out);
  for (std::size_t k = 0; k < W; ++k) {
    CAPTURE(in[k]);
    if (std::isnan(in[k]))
      CHECK(std::isnan(out[k]));
    else if (in[k] == 0.f)
      CHECK(out[k] == 1.f);
    else if (in[k] == -1.f)
      CHECK(std::abs(out[k] - 0.36787944f) <= 1e-7f);
    else
      CHECK(out[k] == 0.f);
  }
}

TEST_CASE("layer_norm over the trailing axes, with and without gamma and beta") {
  const tensor x = random_tensor<float>({4, 3, 40}, -3, 3, 11);
  const tensor g = random_tensor<float>({3, 40}, 0.5, 1.5, 12), b = random_tensor<float>({3, 40}, -1, 1, 13);
  for (bool two_axes : {false, true}) {
    const std::int64_t block = two_axes ? 120 : 40;
    std::vector<float> want;
    for (std::int64_t r = 0; r < 480 / block; ++r) {
      double m = 0, v = 0;
      for (std::int64_t j = 0; j < block; ++j) m += x.data<float>()[r * block + j];
      m /= double(block);
      for (std::int64_t j = 0; j < block; ++j) v += (x.data<float>()[r * block + j] - m) * (x.data<float>()[r * block + j] - m);
      v /= double(block);
      for (std::int64_t j = 0; j < block; ++j) {
        const std::int64_t p = two_axes ? j : (r % 3) * 40 + j;
        want.push_back(float((x.data<float>()[r * block + j] - m) / std::sqrt(v + 1e-5) * g.data<float>()[p] + b.data<float>()[p]));
      }
    }
    const tensor gg = two_axes ? g : g.slice(0, 0, 1).view({40}), bb = two_axes ? b : b.slice(0, 0, 1).view({40});
    if (two_axes) {
      check_all_close(layer_norm(x, gg, bb, {-2, -1}).to_vector<float>(), want, 1e-5, 1e-5);
    } else {
      // gamma and beta of one row: rebuild the reference with row 0's parameters.
      std::vector<float> w2;
      for (std::int64_t r = 0; r < 12; ++r) {
        double m = 0, v = 0;
        for (std::int64_t j = 0; j < 40; ++j) m += x.data<float>()[r * 40 + j];
        m /= 40;
        for (std::int64_t j = 0; j < 40; ++j) v += (x.data<float>()[r * 40 + j] - m) * (x.data<float>()[r * 40 + j] - m);
        v /= 40;
        for (std::int64_t j = 0; j < 40; ++j)
          w2.push_back(float((x.data<float>()[r * 40 + j] - m) / std::sqrt(v + 1e-5) * g.data<float>()[j] + b.data<float>()[j]));
      }
      check_all_close(layer_norm(x, gg, bb).to_vector<float>(), w2, 1e-5, 1e-5);
    }
  }
  // No gamma and beta: zero mean, unit variance.
  const auto plain = layer_norm(x, tensor(), tensor(), {-1}, 0.0, false, false).to_vector<float>();
  double m = 0;
  for (int j = 0; j < 40; ++j) m += plain[std::size_t(j)];
  CHECK(std::abs(m) < 1e-4);
  CHECK(message_of<kernel_error>([&] { layer_norm(x, g, b, {0, 2}); }) ==
        "kiln::kernels::layer_norm: the normalised axes must be the trailing ones; axis 1 of float32[4, 3, 40] is between them");
  CHECK(message_of<kernel_error>([&] { layer_norm(x, g, b, {-1}); }) == "kiln::kernels::layer_norm: gamma must be float32[40], got float32[3, 40]");
  CHECK(message_of<kernel_error>([&] { layer_norm(x, g, b, {-2, -1}, -1.0); }).find("epsilon must be at least 0") != std::string::npos);
}

TEST_CASE("layer_norm keeps its precision on long rows far from zero, and in rows of every length") {
  // Rows of 1 to 70,000 elements around 1000 with spread 1: a float sum of the row would lose
  // the mean's low digits; the chunked sum adds in double.
  for (const std::int64_t block : {1, 7, 16, 33, 255, 256, 1000, 70000}) {
    CAPTURE(block);
    const tensor noise = random_tensor<float>({3, block}, -1, 1, 21);
    tensor x = tensor::empty({3, block}, dtype::float32);
    for (std::int64_t i = 0; i < 3 * block; ++i) x.data<float>()[i] = 1000.f + noise.data<float>()[i];
    std::vector<float> want;
    for (std::int64_t r = 0; r < 3; ++r) {
      double m = 0, v = 0;
      for (std::int64_t j = 0; j < block; ++j) m += x.data<float>()[r * block + j];
      m /= double(block);
      for (std::int64_t j = 0; j < block; ++j) v += (x.data<float>()[r * block + j] - m) * (x.data<float>()[r * block + j] - m);
      v /= double(block);
      for (std::int64_t j = 0; j < block; ++j) want.push_back(float((x.data<float>()[r * block + j] - m) / std::sqrt(v + 1e-5)));
    }
    // The input itself is rounded to float near 1000 (steps of 6e-5 against a spread of 1).
    check_all_close(layer_norm(x, tensor(), tensor(), {-1}, 1e-5, false, false).to_vector<float>(), want, 2e-4, 2e-4);
  }
}

TEST_CASE("cumsum: along each axis, exclusive, reverse, flattened, integers wrap, errors") {
  const tensor x = tensor::from_values<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(cumsum(x, 1).to_vector<double>() == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(cumsum(x, 0).to_vector<double>() == std::vector<double>{1, 2, 3, 5, 7, 9});
  CHECK(cumsum(x, -1, true).to_vector<double>() == std::vector<double>{0, 1, 3, 0, 4, 9});
  CHECK(cumsum(x, 1, false, true).to_vector<double>() == std::vector<double>{6, 5, 3, 15, 11, 6});
  CHECK(cumsum(x, 1, true, true).to_vector<double>() == std::vector<double>{5, 3, 0, 11, 6, 0});
  const tensor flat = cumsum(x.permute({1, 0}));  // read in the transposed order
  CHECK(flat.shape() == shape_vector{6});
  CHECK(flat.to_vector<double>() == std::vector<double>{1, 5, 7, 12, 15, 21});
  const tensor big = tensor::from_values<std::int32_t>({2}, {std::numeric_limits<std::int32_t>::max(), 1});
  CHECK(cumsum(big, 0).to_vector<std::int32_t>() == std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::min()});
  const tensor wide = tensor::zeros({2, 6}, dtype::float64), strided = wide.slice(1, 0, 6, 2);
  cumsum(x, 1, false, false, strided);
  CHECK(strided.contiguous().to_vector<double>() == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(message_of([&] { (void)cumsum(tensor::zeros({2}, dtype::bool_), 0); }) == "kiln::kernels::cumsum: does not take bool tensors");
  CHECK(message_of([&] { (void)cumsum(x, 2); }) == "kiln::kernels::cumsum: axis 2 is out of range for a 2-d tensor");
  CHECK(message_of([&] { cumsum(x, 1, false, false, tensor::zeros({3, 2}, dtype::float64)); }) ==
        "kiln::kernels::cumsum: the output must be float64[2, 3], got float64[3, 2]");
  tensor same = x.clone();
  CHECK(message_of([&] { cumsum(same, 1, false, false, same); }) ==
        "kiln::kernels::cumsum: the output float64[2, 3] overlaps the input; write into a separate tensor");
}

TEST_CASE("bad reduction arguments are clear errors") {
  const tensor x = tensor::zeros({2, 3}, dtype::float32);
  CHECK(message_of<kernel_error>([&] { sum(x, {2}); }) == "kiln::kernels::sum: axis 2 is out of range for a 2-d tensor");
  CHECK(message_of<kernel_error>([&] { sum(x, {1, -1}); }) == "kiln::kernels::sum: axis -1 is given twice");
  CHECK(message_of<kernel_error>([&] { mean(tensor::zeros({2}, dtype::int32), {0}); }) == "kiln::kernels::mean: needs a float32 or float64 tensor, got int32[2]");
  CHECK(message_of<kernel_error>([&] { sum(x, std::array<std::int64_t, 1>{0}, false, tensor::zeros({2}, dtype::float32)); }) ==
        "kiln::kernels::sum: the output must be float32[3], got float32[2]");
  CHECK(message_of<kernel_error>([&] { softmax(tensor::zeros({}, dtype::float32)); }) == "kiln::kernels::softmax: needs a tensor of rank at least 1, got a scalar");
  CHECK(message_of<kernel_error>([&] { softmax(x, 2); }) == "kiln::kernels::softmax: axis 2 is out of range for a 2-d tensor");
  CHECK(message_of<kernel_error>([&] { log_softmax(tensor::zeros({3}, dtype::int64)); }) ==
        "kiln::kernels::log_softmax: needs a float32 or float64 tensor, got int64[3]");
}

TEST_CASE("topk: largest or smallest along an axis, ties by index, NaN largest, unsorted in index order, errors") {
  const tensor x = tensor::from_values<float>({2, 4}, {3, 1, 3, 2, 0, -1, 5, 5});
  auto [v, i] = topk(x, 2);
  CHECK(v.to_vector<float>() == std::vector<float>{3, 3, 5, 5});
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2, 2, 3});
  auto [sv, si] = topk(x, 3, 1, false);
  CHECK(sv.to_vector<float>() == std::vector<float>{1, 2, 3, -1, 0, 5});
  CHECK(si.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3, 0, 5 - 4, 0, 2});
  auto [cv, ci] = topk(x, 1, 0);  // along axis 0
  CHECK(cv.to_vector<float>() == std::vector<float>{3, 1, 5, 5});
  CHECK(ci.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0, 1, 1});
  auto [uv, ui] = topk(x, 2, 1, true, false);  // the same two, in index order
  CHECK(ui.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2, 2, 3});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto [nv, ni] = topk(tensor::from_values<float>({3}, {1, nan, 2}), 2);
  CHECK(ni.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2});
  auto [mv, mi] = topk(tensor::from_values<float>({3}, {1, nan, 2}), 2, 0, false);
  CHECK(mi.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2});
  const tensor iv = tensor::empty({2, 1}, dtype::int32), ii = tensor::empty({2, 1}, dtype::int32);
  topk(tensor::from_values<std::int32_t>({2, 3}, {4, 9, 9, -1, -2, -3}), 1, -1, true, true, iv, ii);
  CHECK(iv.to_vector<std::int32_t>() == std::vector<std::int32_t>{9, -1});
  CHECK(ii.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 0});
  CHECK(message_of([&] { (void)topk(x, 5); }) == "kiln::kernels::topk: k = 5 must be in [0, 4], the extent of axis 1 of float32[2, 4]");
  CHECK(message_of([&] { (void)topk(tensor::zeros({2}, dtype::bool_), 1); }) == "kiln::kernels::topk: does not take bool tensors");
  CHECK(message_of([&] { topk(x, 1, -1, true, true, tensor::empty({2, 1}, dtype::float32), tensor::empty({2, 1}, dtype::float32)); }) ==
        "kiln::kernels::topk: the indices output must be int64 or int32[2, 1], got float32[2, 1]");
}
