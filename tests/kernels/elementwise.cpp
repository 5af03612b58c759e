// SPDX-License-Identifier: Apache-2.0
// Elementwise kernels against scalar references.
//
// Tolerances: add, subtract, multiply, divide, maximum, minimum, negative, abs, relu, clip,
// comparisons, where and cast are exact (the same IEEE operation per element). Transcendentals
// use xsimd's implementations: exp, log, sqrt, rsqrt, erf within 4 ulp-ish relative error
// (2e-6 for float32, 1e-14 for float64), tanh, sigmoid, gelu within 4e-6 / 1e-14 relative plus a
// tiny absolute term near zero, pow within 1e-5 / 1e-13.
#include <kiln/kernels/elementwise.hpp>
#include <kiln/kernels/reduce.hpp>

#include "../common/message_of.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

#include <cstring>

#include <limits>

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln_test;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan_ = std::numeric_limits<double>::quiet_NaN();

// Sizes around every vector width (4, 8, 16 floats; 2, 4, 8 doubles) and the 2x unrolled loop.
const std::int64_t sizes[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000, 1023};

template <class T>
void check_arithmetic(unsigned seed) {
  for (std::int64_t n : sizes) {
    CAPTURE(n);
    tensor a = random_tensor<T>({n}, -100, 100, seed), b = random_tensor<T>({n}, -100, 100, seed + 1);
    check_all_close(add(a, b).to_vector<T>(), reference_binary<T, T>(a, b, [](T x, T y) { return x + y; }));
    check_all_close(subtract(a, b).to_vector<T>(), reference_binary<T, T>(a, b, [](T x, T y) { return x - y; }));
    check_all_close(multiply(a, b).to_vector<T>(), reference_binary<T, T>(a, b, [](T x, T y) { return x * y; }));
    check_all_close(maximum(a, b).to_vector<T>(), reference_binary<T, T>(a, b, [](T x, T y) { return x < y ? y : x; }));
    check_all_close(minimum(a, b).to_vector<T>(), reference_binary<T, T>(a, b, [](T x, T y) { return y < x ? y : x; }));
    check_all_close(negative(a).to_vector<T>(), reference_unary<T, T>(a, [](T x) { return T(-x); }));
    check_all_close(abs(a).to_vector<T>(), reference_unary<T, T>(a, [](T x) { return x < 0 ? T(-x) : x; }));
    check_all_close(relu(a).to_vector<T>(), reference_unary<T, T>(a, [](T x) { return x < 0 ? T(0) : x; }));
    check_all_close(clip(a, -10, 20).to_vector<T>(), reference_unary<T, T>(a, [](T x) { return x < -10 ? T(-10) : x > 20 ? T(20) : x; }));
    if constexpr (std::is_floating_point_v<T>) {
      check_all_close(divide(a, b).to_vector<T>(), reference_binary<T, T>(a, b, [](T x, T y) { return x / y; }));
      check_all_close(floor_divide(a, b).to_vector<T>(), reference_binary<T, T>(a, b, [](T x, T y) { return std::floor(x / y); }));
      check_all_close(fmod(a, b).to_vector<T>(), reference_binary<T, T>(a, b, [](T x, T y) { return std::fmod(x, y); }));
    }
    check_all_close(bools(less(a, b)), reference_binary<std::uint8_t, T>(a, b, [](T x, T y) { return x < y; }));
    check_all_close(bools(greater_equal(a, b)),
                    reference_binary<std::uint8_t, T>(a, b, [](T x, T y) { return x >= y; }));
    check_all_close(bools(kernels::equal(a, a)), reference_binary<std::uint8_t, T>(a, a, [](T, T) { return true; }));
  }
}

}  // namespace

TEST_CASE("binary arithmetic, comparisons and simple unary ops, every dtype, sizes around the vector width") {
  check_arithmetic<float>(1);
  check_arithmetic<double>(2);
  check_arithmetic<std::int32_t>(3);
  check_arithmetic<std::int64_t>(4);
  check_arithmetic<std::int8_t>(5);
}

TEST_CASE("every broadcasting pattern, and non-contiguous operands") {
  struct shapes {
    shape_vector a, b;
  };
  const shapes patterns[] = {
      {{2, 3}, {2, 3}},         {{2, 3}, {3}},       {{2, 3}, {2, 1}},    {{3, 1, 5}, {4, 1}},  {{}, {2, 3}},
      {{2, 3}, {}},             {{1}, {7}},          {{7}, {1}},          {{0, 3}, {3}},        {{4, 0}, {1}},
      {{1, 1, 17}, {5, 3, 1}},  {{5, 1, 33}, {33}},  {{2, 1, 3, 1}, {4, 1, 6}},
  };
  unsigned seed = 10;
  for (const auto& p : patterns) {
    CAPTURE(runtime::shape_to_string(p.a));
    CAPTURE(runtime::shape_to_string(p.b));
    tensor a = random_tensor<float>(p.a, -5, 5, seed++), b = random_tensor<float>(p.b, -5, 5, seed++);
    const tensor r = add(a, b);
    CHECK(r.shape() == broadcast(p.a, p.b));
    check_all_close(r.to_vector<float>(), reference_binary<float, float>(a, b, [](float x, float y) { return x + y; }));
    check_all_close(multiply(b, a).to_vector<float>(), reference_binary<float, float>(b, a, [](float x, float y) { return x * y; }));
    check_all_close(bools(greater(a, b)), reference_binary<std::uint8_t, float>(a, b, [](float x, float y) { return x > y; }));
  }
  // Transposed, strided and offset views.
  tensor base = random_tensor<float>({6, 40}, -3, 3, 99);
  const tensor t = base.permute({1, 0});           // 40 x 6, strides (1, 40)
  const tensor s = base.slice(1, 1, 39, 3);        // 6 x 13, stride 3
  const tensor u = random_tensor<float>({40, 6}, -3, 3, 98);
  check_all_close(add(t, u).to_vector<float>(), reference_binary<float, float>(t, u, [](float x, float y) { return x + y; }));
  check_all_close(exp(s).to_vector<float>(), reference_unary<float, float>(s, [](float x) { return std::exp(x); }), 2e-6, 0);
  check_all_close(subtract(s, s.slice(1, 0, 1)).to_vector<float>(),
                  reference_binary<float, float>(s, s.slice(1, 0, 1), [](float x, float y) { return x - y; }));
  // Into a strided output.
  tensor out_base = tensor::zeros({6, 80}, dtype::float32);
  const tensor out = out_base.slice(1, 0, 80, 2);  // 6 x 40, stride 2
  add(base, base, out);
  check_all_close(out.to_vector<float>(), reference_binary<float, float>(base, base, [](float x, float y) { return x + y; }));
}

TEST_CASE("transcendental and activation functions against std::, at the extremes too") {
  for (std::int64_t n : {std::int64_t(1), std::int64_t(15), std::int64_t(257)}) {
    CAPTURE(n);
    tensor x = random_tensor<float>({n}, -20, 20, unsigned(n));
    tensor pos = random_tensor<float>({n}, 1e-3, 100, unsigned(n) + 1);
    check_all_close(exp(x).to_vector<float>(), reference_unary<float, float>(x, [](float v) { return std::exp(v); }), 2e-6, 0);
    check_all_close(log(pos).to_vector<float>(), reference_unary<float, float>(pos, [](float v) { return std::log(v); }), 2e-6, 1e-7);
    check_all_close(sqrt(pos).to_vector<float>(), reference_unary<float, float>(pos, [](float v) { return std::sqrt(v); }), 2e-7, 0);
    check_all_close(rsqrt(pos).to_vector<float>(), reference_unary<float, float>(pos, [](float v) { return 1 / std::sqrt(v); }), 2e-7, 0);
    check_all_close(tanh(x).to_vector<float>(), reference_unary<float, float>(x, [](float v) { return std::tanh(v); }), 4e-6, 1e-7);
    check_all_close(sigmoid(x).to_vector<float>(), reference_unary<float, float>(x, [](float v) { return 1 / (1 + std::exp(-v)); }), 4e-6, 1e-7);
    check_all_close(erf(x).to_vector<float>(), reference_unary<float, float>(x, [](float v) { return std::erf(v); }), 2e-6, 1e-7);
    check_all_close(gelu(x).to_vector<float>(),
                    reference_unary<float, float>(x, [](float v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), 4e-6, 1e-6);
    check_all_close(gelu_tanh(x).to_vector<float>(), reference_unary<float, float>(x, [](float v) {
                      return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
                    }), 4e-6, 1e-6);
    tensor xd = random_tensor<double>({n}, -20, 20, unsigned(n) + 7);
    check_all_close(exp(xd).to_vector<double>(), reference_unary<double, double>(xd, [](double v) { return std::exp(v); }), 1e-14, 0);
    check_all_close(tanh(xd).to_vector<double>(), reference_unary<double, double>(xd, [](double v) { return std::tanh(v); }), 1e-14, 1e-16);
    check_all_close(power(pos, x).to_vector<float>(),
                    reference_binary<float, float>(pos, x, [](float a, float b) { return std::pow(a, b); }), 1e-5, 1e-30);
  }
  // The extremes: overflow to infinity, underflow to zero, the domain edges, NaN and infinity in.
  const tensor e = tensor::from_values<float>({9}, {100.f, -100.f, 0.f, -0.f, float(inf), -float(inf), float(nan_), 88.f, -87.f});
  const auto ex = exp(e).to_vector<float>();
  CHECK(std::isinf(ex[0]));
  CHECK(ex[1] == 0);
  CHECK(ex[2] == 1);
  CHECK(std::isinf(ex[4]));
  CHECK(ex[5] == 0);
  CHECK(std::isnan(ex[6]));
  CHECK(close(ex[7], std::exp(88.f), 2e-6, 0));
  const auto lg = log(e).to_vector<float>();
  CHECK(std::isnan(lg[1]));  // log(-100)
  CHECK(lg[2] == -float(inf));
  CHECK(std::isinf(lg[4]));
  CHECK(std::isnan(lg[5]));
  CHECK(std::isnan(lg[6]));
  const auto th = tanh(e).to_vector<float>();
  CHECK(th[0] == 1);
  CHECK(th[1] == -1);
  CHECK(th[4] == 1);
  CHECK(th[5] == -1);
  CHECK(std::isnan(th[6]));
  const auto sg = sigmoid(e).to_vector<float>();
  CHECK(sg[0] == 1);
  CHECK(sg[1] == 0);
  CHECK(sg[2] == 0.5f);
  CHECK(std::isnan(sg[6]));
  CHECK(std::isnan(sqrt(e).to_vector<float>()[1]));
  CHECK(std::isinf(rsqrt(e).to_vector<float>()[2]));
  CHECK(std::isnan(relu(e).to_vector<float>()[6]));
}

TEST_CASE("trigonometric, hyperbolic and rounding functions against std::, in float and double, at the extremes") {
  using fn = tensor (*)(const tensor&);
  struct math_case {
    const char* name;
    fn kernel;
    double (*reference)(double);
    double lo, hi;  // the domain sampled
  };
  const math_case cases[] = {
      {"sin", &kernels::sin, [](double v) { return std::sin(v); }, -10, 10},       {"cos", &kernels::cos, [](double v) { return std::cos(v); }, -10, 10},
      {"tan", &kernels::tan, [](double v) { return std::tan(v); }, -1.5, 1.5},     {"asin", &kernels::asin, [](double v) { return std::asin(v); }, -1, 1},
      {"acos", &kernels::acos, [](double v) { return std::acos(v); }, -1, 1},      {"atan", &kernels::atan, [](double v) { return std::atan(v); }, -50, 50},
      {"sinh", &kernels::sinh, [](double v) { return std::sinh(v); }, -10, 10},    {"cosh", &kernels::cosh, [](double v) { return std::cosh(v); }, -10, 10},
      {"asinh", &kernels::asinh, [](double v) { return std::asinh(v); }, -50, 50}, {"acosh", &kernels::acosh, [](double v) { return std::acosh(v); }, 1, 50},
      {"atanh", &kernels::atanh, [](double v) { return std::atanh(v); }, -0.99, 0.99}};
  for (const math_case& c : cases) {
    CAPTURE(c.name);
    for (std::int64_t n : {std::int64_t(1), std::int64_t(15), std::int64_t(257)}) {
      CAPTURE(n);
      const tensor x = random_tensor<float>({n}, c.lo, c.hi, unsigned(n) + 3);
      check_all_close(c.kernel(x).to_vector<float>(), reference_unary<float, float>(x, [&](float v) { return float(c.reference(v)); }), 4e-6, 1e-6);
      const tensor xd = random_tensor<double>({n}, c.lo, c.hi, unsigned(n) + 4);
      check_all_close(c.kernel(xd).to_vector<double>(), reference_unary<double, double>(xd, c.reference), 1e-15, 0);
    }
    // NaN in, NaN out; the infinities as <cmath> has them (NaN outside the domain), in both types.
    for (const double v : {double(nan_), double(inf), -double(inf)}) {
      CAPTURE(v);
      const double want = c.reference(v);
      const float got_f = c.kernel(tensor::from_values<float>({1}, {float(v)})).to_vector<float>()[0];
      const double got_d = c.kernel(tensor::from_values<double>({1}, {v})).to_vector<double>()[0];
      if (std::isnan(want)) {
        CHECK(std::isnan(got_f));
        CHECK(std::isnan(got_d));
      } else {
        CHECK(got_f == float(want));
        CHECK(got_d == want);
      }
    }
  }
  // Rounding: exact; round takes halves to even, as ONNX's Round and numpy do.
  const std::vector<double> v = {-2.5, -1.5, -0.5, -0.4, 0.0, 0.5, 0.6, 1.5, 2.5, 3.7, -3.7, 1e300, double(inf), -double(inf)};
  const tensor xd = tensor::from_values<double>({std::int64_t(v.size())}, v);
  const tensor xf = cast(xd, dtype::float32);
  const std::vector<double> want_round = {-2, -2, -0.0, -0.0, 0, 0, 1, 2, 2, 4, -4, 1e300, double(inf), -double(inf)};
  CHECK(kernels::round(xd).to_vector<double>() == want_round);
  CHECK(kernels::floor(xd).to_vector<double>() == reference_unary<double, double>(xd, [](double a) { return std::floor(a); }));
  CHECK(kernels::ceil(xd).to_vector<double>() == reference_unary<double, double>(xd, [](double a) { return std::ceil(a); }));
  CHECK(kernels::round(xf).to_vector<float>() == reference_unary<float, float>(xf, [](float a) { return std::nearbyint(a); }));
  CHECK(kernels::floor(xf).to_vector<float>() == reference_unary<float, float>(xf, [](float a) { return std::floor(a); }));
  CHECK(kernels::ceil(xf).to_vector<float>() == reference_unary<float, float>(xf, [](float a) { return std::ceil(a); }));
  CHECK(std::isnan(kernels::round(tensor::from_values<float>({1}, {float(nan_)})).to_vector<float>()[0]));
  CHECK(message_of<kernel_error>([] { (void)kernels::sin(tensor::zeros({2}, dtype::int32)); }).find("kiln::kernels::sin") == 0);
}

TEST_CASE("float64 exp, erf, tanh and the activations built on them: exact at infinity, NaN kept, no UB") {
  // xsimd's float64 exp converts its scaled argument to int64 in plain C++: undefined behaviour
  // for these inputs (Clang's UBSan reports it) unless the kernels keep them away from it.
  const std::vector<double> in = {-inf, inf, nan_, -1e308, 1e308, -800, 800, 1e19, -1e19, 0.5};
  const tensor x = tensor::from_values<double>({std::int64_t(in.size())}, in);
  const auto ex = exp(x).to_vector<double>(), ef = erf(x).to_vector<double>(), th = tanh(x).to_vector<double>();
  const auto sg = sigmoid(x).to_vector<double>(), gl = gelu(x).to_vector<double>();
  for (std::size_t i = 0; i < in.size(); ++i) {
    CAPTURE(in[i]);
    const double v = in[i];
    if (std::isnan(v)) {
      CHECK(std::isnan(ex[i]));
      CHECK(std::isnan(ef[i]));
      CHECK(std::isnan(th[i]));
      CHECK(std::isnan(sg[i]));
      CHECK(std::isnan(gl[i]));
      continue;
    }
    CHECK(close(ex[i], std::exp(v), 1e-14, 0));
    CHECK(close(ef[i], std::erf(v), 1e-14, 0));
    CHECK(close(th[i], std::tanh(v), 1e-14, 0));
    CHECK(close(sg[i], 1 / (1 + std::exp(-v)), 1e-14, 0));
  }
  CHECK(gl[1] == inf);  // gelu(+inf) = inf; gelu(1e308) = 1e308
  CHECK(gl[4] == 1e308);
  CHECK(gl[3] == 0);
  // softmax in float64 with a mask of -inf, its common use.
  const auto sm = softmax(tensor::from_values<double>({4}, {-inf, 0.0, -inf, 0.0})).to_vector<double>();
  CHECK(sm == std::vector<double>{0.0, 0.5, 0.0, 0.5});
}

TEST_CASE("NaN and infinity propagate through maximum, minimum, comparisons and clip") {
  const tensor a = tensor::from_values<float>({6}, {float(nan_), 1.f, float(inf), -float(inf), 2.f, float(nan_)});
  const tensor b = tensor::from_values<float>({6}, {1.f, float(nan_), 5.f, 5.f, float(inf), float(nan_)});
  const auto mx = maximum(a, b).to_vector<float>(), mn = minimum(a, b).to_vector<float>();
  CHECK(std::isnan(mx[0]));
  CHECK(std::isnan(mx[1]));
  CHECK(std::isinf(mx[2]));
  CHECK(mx[3] == 5);
  CHECK(std::isinf(mx[4]));
  CHECK(std::isnan(mn[0]));
  CHECK(std::isnan(mn[1]));
  CHECK(mn[2] == 5);
  CHECK(mn[3] == -float(inf));
  CHECK(bools(kernels::equal(a, a)) == std::vector<std::uint8_t>{0, 1, 1, 1, 1, 0});
  CHECK(bools(not_equal(a, a)) == std::vector<std::uint8_t>{1, 0, 0, 0, 0, 1});
  CHECK(bools(less(a, b)) == std::vector<std::uint8_t>{0, 0, 0, 1, 1, 0});
  const auto c = clip(a, -1, 1).to_vector<float>();
  CHECK(std::isnan(c[0]));
  CHECK(c[2] == 1);
  CHECK(c[3] == -1);
  const auto d = divide(tensor::from_values<float>({3}, {1.f, -1.f, 0.f}), tensor::from_values<float>({3}, {0.f, 0.f, 0.f})).to_vector<float>();
  CHECK(d[0] == float(inf));
  CHECK(d[1] == -float(inf));
  CHECK(std::isnan(d[2]));
}

TEST_CASE("integer arithmetic wraps, divides exactly, and rejects division by zero and negative powers") {
  const auto i32 = [](std::initializer_list<std::int32_t> v) { return tensor::from_values<std::int32_t>({std::int64_t(v.size())}, v); };
  constexpr std::int32_t big = std::numeric_limits<std::int32_t>::max(), small = std::numeric_limits<std::int32_t>::min();
  CHECK(add(i32({big, small}), i32({1, -1})).to_vector<std::int32_t>() == std::vector<std::int32_t>{small, big});
  CHECK(multiply(i32({big}), i32({2})).to_vector<std::int32_t>() == std::vector<std::int32_t>{-2});
  CHECK(negative(i32({small})).to_vector<std::int32_t>() == std::vector<std::int32_t>{small});
  CHECK(abs(i32({small, -3})).to_vector<std::int32_t>() == std::vector<std::int32_t>{small, 3});
  CHECK(divide(i32({7, -7, 7, -7, small}), i32({2, 2, -2, -2, -1})).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{3, -3, -3, 3, small});
  CHECK(floor_divide(i32({7, -7, 7, -7, 6}), i32({2, 2, -2, -2, 3})).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{3, -4, -4, 3, 2});
  CHECK(fmod(i32({7, -7, 7, -7, small}), i32({3, 3, -3, -3, -1})).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -1, 1, -1, 0});
  CHECK(fmod(tensor::from_values<double>({4}, {5.5, -5.5, 1e300, 3}), tensor::from_values<double>({4}, {2, 2, 3, 0}))
            .to_vector<double>()[2] == std::fmod(1e300, 3.0));  // exact, where x - trunc(x / y) * y is not
  CHECK(message_of<kernel_error>([&] { fmod(i32({1}), i32({0})); }) == "kiln::kernels::fmod: integer division by zero");
  CHECK(power(i32({2, 3, -2, 5, 1}), i32({10, 0, 3, 1, 1000})).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{1024, 1, -8, 5, 1});
  CHECK(message_of<kernel_error>([&] { divide(i32({1, 2}), i32({1, 0})); }) == "kiln::kernels::divide: integer division by zero");
  CHECK(message_of<kernel_error>([&] { floor_divide(i32({1}), i32({0})); }) == "kiln::kernels::floor_divide: integer division by zero");
  CHECK(message_of<kernel_error>([&] { power(i32({2}), i32({-1})); }) ==
        "kiln::kernels::power: negative integer power -1 (cast to a float dtype first)");
  CHECK(clip(i32({-5, 0, 5}), -2.5, 1e20).to_vector<std::int32_t>() == std::vector<std::int32_t>{-2, 0, 5});
}

TEST_CASE("where, logical ops and cast") {
  const tensor cond = tensor::from_values<bool>({2, 1}, {true, false});
  const tensor x = tensor::from_values<float>({3}, {1, 2, 3});
  const tensor y = tensor::from_values<float>({2, 3}, {10, 20, 30, 40, 50, 60});
  CHECK(where(cond, x, y).to_vector<float>() == std::vector<float>{1, 2, 3, 40, 50, 60});
  const tensor p = tensor::from_values<bool>({4}, {true, true, false, false}), q = tensor::from_values<bool>({4}, {true, false, true, false});
  CHECK(bools(logical_and(p, q)) == std::vector<std::uint8_t>{1, 0, 0, 0});
  CHECK(bools(logical_or(p, q)) == std::vector<std::uint8_t>{1, 1, 1, 0});
  CHECK(bools(logical_not(p)) == std::vector<std::uint8_t>{0, 0, 1, 1});
  // A bool tensor holding a byte other than 0 or 1 reads as true.
  tensor odd = tensor::zeros({2}, dtype::bool_);
  static_cast<std::uint8_t*>(odd.data())[0] = 7;
  CHECK(bools(logical_not(odd)) == std::vector<std::uint8_t>{0, 1});
  CHECK(cast(odd, dtype::int32).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 0});

  const tensor f = tensor::from_values<float>({7}, {1.7f, -1.7f, float(nan_), 3e9f, -3e9f, float(inf), 0.f});
  CHECK(cast(f, dtype::int32).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{1, -1, 0, std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::min(),
                                  std::numeric_limits<std::int32_t>::max(), 0});
  CHECK(bools(cast(f, dtype::bool_)) == std::vector<std::uint8_t>{1, 1, 1, 1, 1, 1, 0});
  CHECK(cast(tensor::from_values<std::int64_t>({2}, {300, -1}), dtype::uint8).to_vector<std::uint8_t>() == std::vector<std::uint8_t>{44, 255});
  check_all_close(cast(cast(y, dtype::float64), dtype::float32).to_vector<float>(), y.to_vector<float>());
  const tensor big = random_tensor<float>({3, 37}, -50, 50, 5);
  check_all_close(cast(big.permute({1, 0}), dtype::int64).to_vector<std::int64_t>(),
                  reference_unary<std::int64_t, float>(big.permute({1, 0}), [](float v) { return std::int64_t(v); }));

  // float16 converts through float32, both ways, strided too; 65504 is the largest half, 1e6 overflows to inf.
  const tensor h = cast(tensor::from_values<float>({6}, {1.5f, -0.25f, 65504.f, 1e6f, float(nan_), 3.14159f}), dtype::float16);
  const auto back = cast(h, dtype::float32).to_vector<float>();
  CHECK(back[0] == 1.5f);
  CHECK(back[1] == -0.25f);
  CHECK(back[2] == 65504.f);
  CHECK(back[3] == float(inf));
  CHECK(std::isnan(back[4]));
  CHECK(back[5] == 3.140625f);  // the nearest half
  CHECK(cast(cast(tensor::from_values<std::int32_t>({3}, {-7, 0, 2048}), dtype::float16), dtype::int64).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{-7, 0, 2048});
  const tensor h2 = cast(h, dtype::float16);
  CHECK(std::memcmp(h2.data(), h.data(), 12) == 0);
  // Strided: a transposed half matrix read back in the transposed order.
  const tensor m = random_tensor<float>({4, 5}, -8, 8, 9);
  const auto mt = cast(cast(m, dtype::float16).permute({1, 0}), dtype::float32).to_vector<float>();
  const auto want = m.permute({1, 0}).contiguous().to_vector<float>();
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(mt[i] == half_to_float(float_to_half(want[i])));
}

TEST_CASE("writing into an input is allowed, a differently overlapping output is not") {
  tensor a = random_tensor<float>({100}, -1, 1, 3);
  const auto before = a.to_vector<float>();
  add(a, a, a);
  for (std::size_t i = 0; i < before.size(); ++i) CHECK(a.to_vector<float>()[i] == before[i] * 2);
  tensor m = random_tensor<float>({8, 8}, -1, 1, 4);
  CHECK(message_of<kernel_error>([&] { add(m, m, m.permute({1, 0})); }) ==
        "kiln::kernels::add: the output float32[8, 8] overlaps input 0 in another layout; write into a separate tensor");
  tensor v = random_tensor<float>({10}, -1, 1, 5);
  CHECK(message_of<kernel_error>([&] { exp(v.slice(0, 0, 9), v.slice(0, 1, 10)); }).find("overlaps input 0") != std::string::npos);
}

TEST_CASE("bad operands name the operator and the operands") {
  const tensor f = tensor::zeros({2, 3}, dtype::float32), i = tensor::zeros({2, 3}, dtype::int32);
  CHECK(message_of<kernel_error>([&] { add(f, i); }) ==
        "kiln::kernels::add: operands float32[2, 3] and int32[2, 3] have different dtypes; cast one first");
  CHECK(message_of<kernel_error>([&] { multiply(f, tensor::zeros({4}, dtype::float32)); }) ==
        "kiln::kernels::multiply: operands of shapes [2, 3] and [4] do not broadcast (dimension 1 is 3 in one and 4 in another)");
  CHECK(message_of<kernel_error>([&] { add(f, f, tensor::zeros({3, 2}, dtype::float32)); }) ==
        "kiln::kernels::add: the output must be float32[2, 3], got float32[3, 2]");
  CHECK(message_of<kernel_error>([&] { less(f, f, tensor::zeros({2, 3}, dtype::float32)); }) ==
        "kiln::kernels::less: the output must be bool[2, 3], got float32[2, 3]");
  CHECK(message_of<kernel_error>([&] { exp(i); }) == "kiln::kernels::exp: does not take int32 tensors (operand int32[2, 3])");
  CHECK(message_of<kernel_error>([&] { add(tensor::zeros({2}, dtype::bool_), tensor::zeros({2}, dtype::bool_)); }) ==
        "kiln::kernels::add: does not take bool tensors (operand bool[2])");
  CHECK(message_of<kernel_error>([&] { logical_and(f, f); }) == "kiln::kernels::logical_and: does not take float32 tensors (operand float32[2, 3])");
  CHECK(message_of<kernel_error>([&] { add(tensor::zeros({2}, dtype::float16), tensor::zeros({2}, dtype::float16)); }) ==
        "kiln::kernels::add: does not take float16 tensors (operand float16[2])");
  CHECK(message_of<kernel_error>([&] { where(f, f, f); }) == "kiln::kernels::where: the condition must be a bool tensor, got float32[2, 3]");
  CHECK(message_of<kernel_error>([&] { clip(f, 2, 1); }).find("kiln::kernels::clip: the lower bound 2") == 0);
  CHECK(message_of<kernel_error>([&] { negative(tensor()); }) == "kiln::kernels::negative: the operand is undefined");
  CHECK(message_of<kernel_error>([&] { cast(f, tensor::zeros({3}, dtype::int32)); }) == "kiln::kernels::cast: the output must be int32[2, 3], got int32[3]");
}
