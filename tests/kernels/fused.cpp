// SPDX-License-Identifier: Apache-2.0
// Fused elementwise kernels: the compile-time and the run-time form against the same operators
// applied one kernel at a time (exactly equal: the same arithmetic per element) and against a
// scalar reference (tolerance 2e-6 relative for float32, 1e-14 for float64, exp and tanh being
// xsimd's).
#include <kiln/kernels/fused.hpp>

#include "../common/message_of.hpp"
#include "../common/pool_threads.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

#include <functional>

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln_test;

namespace {

// relu(x0 * x1 + x2) * 0.5 and exp(x0 - maximum(x1, x2)) / (1 + tanh(x2)): the first is the
// benchmark's 4-op chain, the second reuses temporaries and inputs.
constexpr auto chain = fx::relu(fx::arg<0>{} * fx::arg<1>{} + fx::arg<2>{}) * 0.5;
constexpr auto mixed = fx::exp(fx::arg<0>{} - fx::maximum(fx::arg<1>{}, fx::arg<2>{})) / (1.0 + fx::tanh(fx::arg<2>{}));
const char* const chain_text = "(multiply (relu (add (multiply x0 x1) x2)) 0.5)";
const char* const mixed_text = "(divide (exp (subtract x0 (maximum x1 x2))) (add 1 (tanh x2)))";

tensor chain_unfused(const tensor& a, const tensor& b, const tensor& c) {
  const tensor half = tensor::from_values<float>({}, {0.5f});
  return a.type() == dtype::float32 ? multiply(relu(add(multiply(a, b), c)), half)
                                    : multiply(relu(add(multiply(a, b), c)), cast(half, dtype::float64));
}

/// Evaluates description `text` one operator at a time, each a single-operator fused expression
/// over whole tensors (constants become rank-0 tensors): the unfused value of `text`.
tensor unfused(std::string_view text, const tensor& x0, const tensor& x1) {
  std::size_t at = 0;
  auto word = [&] {
    while (text[at] == ' ') ++at;
    const std::size_t start = at;
    while (at < text.size() && text[at] != ' ' && text[at] != '(' && text[at] != ')') ++at;
    return std::string(text.substr(start, at - start));
  };
  auto eval = [&](auto& self) -> tensor {
    while (text[at] == ' ') ++at;
    if (text[at] != '(') {
      const std::string w = word();
      if (w == "x0") return x0;
      if (w == "x1") return x1;
      return cast(tensor::from_values<double>({}, {std::stod(w)}), x0.type());
    }
    ++at;
    const std::string op = word();
    std::vector<tensor> args;
    std::string bounds;
    for (;;) {
      while (text[at] == ' ') ++at;
      if (text[at] == ')') break;
      if (op == "clip" && args.size() == 1) {
        bounds += " " + word();
        continue;
      }
      args.push_back(self(self));
    }
    ++at;
    const std::string single = args.size() == 1 ? "(" + op + " x0" + bounds + ")" : "(" + op + " x0 x1)";
    return fused_expr::parse(single).run(std::span<const tensor>(args));
  };
  return eval(eval);
}

}  // namespace

TEST_CASE("compile-time and run-time fused chains equal the unfused kernels, for every size and broadcast") {
  const fused_expr rt_chain = fused_expr::parse(chain_text), rt_mixed = fused_expr::parse(mixed_text);
  CHECK(rt_chain.num_operations() == 4);
  CHECK(rt_chain.num_inputs() == 3);
  struct shapes {
    shape_vector a, b, c;
  };
  const shapes cases[] = {
      {{1}, {1}, {1}},       {{7}, {7}, {7}},          {{33}, {33}, {33}},     {{1000}, {1000}, {1000}},
      {{1025}, {1}, {1025}}, {{3, 700}, {700}, {3, 1}}, {{0, 5}, {5}, {1}},     {{}, {2, 3}, {3}},
      {{4, 1, 600}, {5, 1}, {600}},
  };
  unsigned seed = 1;
  for (const auto& sh : cases) {
    CAPTURE(runtime::shape_to_string(sh.a));
    CAPTURE(runtime::shape_to_string(sh.b));
    tensor a = random_tensor<float>(sh.a, -2, 2, seed++), b = random_tensor<float>(sh.b, -2, 2, seed++), c = random_tensor<float>(sh.c, -2, 2, seed++);
    // Within a rounding of x0 * x1: a compiler may contract the fused chain's multiply and add
    // into one FMA (GCC does where the target has FMA, e.g. with KILN_MARCH=native).
    const auto want = chain_unfused(a, b, c).to_vector<float>();
    check_all_close(run_fused(chain, {a, b, c}).to_vector<float>(), want, 1e-6, 1e-6);
    check_all_close(rt_chain.run({a, b, c}).to_vector<float>(), want, 1e-6, 1e-6);
    const auto ct = run_fused(mixed, {a, b, c}).to_vector<float>();
    check_all_close(rt_mixed.run({a, b, c}).to_vector<float>(), ct, across_levels<float>(), across_levels<float>());
    const tensor bc = tensor::from_values<float>({}, {1.f});
    check_all_close(ct, divide(exp(subtract(a, maximum(b, c))), add(bc, tanh(c))).to_vector<float>(), across_levels<float>(),
                    across_levels<float>());
  }
  // float64, and strided inputs and output.
  tensor base = random_tensor<double>({40, 9}, -1, 1, 77);
  const tensor t = base.permute({1, 0}), u = random_tensor<double>({9, 40}, -1, 1, 78), v = random_tensor<double>({40}, -1, 1, 79);
  tensor out_base = tensor::zeros({9, 80}, dtype::float64);
  const tensor out = out_base.slice(1, 0, 80, 2);
  rt_chain.run({t, u, v}, out);
  check_all_close(out.to_vector<double>(), chain_unfused(t, u, v).to_vector<double>(), 1e-15, 1e-15);
  run_fused(chain, {t, u, v}, out);
  check_all_close(out.to_vector<double>(), chain_unfused(t, u, v).to_vector<double>(), 1e-15, 1e-15);
}

TEST_CASE("a loop plan's ranges cover its elements once, in order, wherever they are cut") {
  // Operand 0 [3, 5, 7] contiguous, operand 1 transposed, operand 2 broadcast along the middle
  // axis: runs of 7 elements (the last axis) over an odometer of 3 x 5.
  const tensor out = tensor::zeros({3, 5, 7}, dtype::float32), t = tensor::zeros({7, 5, 3}, dtype::float32).permute({2, 1, 0}),
               b = tensor::zeros({3, 1, 7}, dtype::float32);
  const loop_plan<3> plan({&out, &t, &b});
  using visit = std::array<const char*, 3>;
  const auto visits = [&](auto&& loop) {
    std::vector<visit> v;
    loop([&](std::int64_t n, const std::array<char*, 3>& p, const std::array<std::int64_t, 3>& st) {
      for (std::int64_t e = 0; e < n; ++e) v.push_back({p[0] + e * st[0], p[1] + e * st[1], p[2] + e * st[2]});
    });
    return v;
  };
  const std::vector<visit> whole = visits([&](auto&& f) { plan.for_each_run(f); });
  REQUIRE(whole.size() == 105);
  for (const std::vector<std::int64_t>& cuts : std::vector<std::vector<std::int64_t>>{{0, 105}, {0, 1, 105}, {0, 7, 35, 36, 104, 105}, {0, 3, 10, 52, 53, 54, 99, 105}}) {
    std::vector<visit> parts;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      const std::vector<visit> v = visits([&](auto&& f) { plan.for_each_run_between(cuts[i], cuts[i + 1], f); });
      parts.insert(parts.end(), v.begin(), v.end());
    }
    CHECK(parts == whole);
  }
  CHECK(visits([&](auto&& f) { plan.for_each_run_between(40, 40, f); }).empty());
  CHECK(visits([&](auto&& f) { plan.for_each_run_between(100, 400, f); }).size() == 5);
}

TEST_CASE("a run-time fused expression shared out among threads gives the one-thread bits") {
  // Large enough to be shared out: a per-channel scale and shift then relu over 1024 planes of
  // 7 x 7 (runs of 49, the ranges cut inside them), one long run, a transposed input and a strided
  // output, and an expression that needs temporaries.
  const fused_expr bn = fused_expr::parse("(relu (add (multiply x0 x1) x2))"), mixed = fused_expr::parse(mixed_text);
  struct problem {
    tensor x0, x1, x2;
    std::function<tensor()> out;  // a new output, zeros
  };
  std::vector<problem> problems;
  problems.push_back({random_tensor<float>({1, 1024, 7, 7}, -2, 2, 901), random_tensor<float>({1024, 1, 1}, -2, 2, 902),
                      random_tensor<float>({1024, 1, 1}, -2, 2, 903), [] { return tensor::zeros({1, 1024, 7, 7}, dtype::float32); }});
  problems.push_back({random_tensor<float>({100003}, -2, 2, 904), random_tensor<float>({100003}, -2, 2, 905), random_tensor<float>({1}, -2, 2, 906),
                      [] { return tensor::zeros({100003}, dtype::float32); }});
  problems.push_back({random_tensor<float>({300, 211}, -2, 2, 907).permute({1, 0}), random_tensor<float>({300}, -2, 2, 908),
                      random_tensor<float>({211, 1}, -1, 1, 909), [] { return tensor::zeros({211, 600}, dtype::float32).slice(1, 0, 600, 2); }});
  for (const fused_expr* e : {&bn, &mixed})
    for (problem& p : problems) {
      CAPTURE(runtime::shape_to_string(p.x0.shape()));
      const std::vector<tensor> in{p.x0, p.x1, p.x2};
      const tensor one = p.out(), two = p.out();
      {
        const pool_threads pool(1);
        e->run(in, one);
      }
      const pool_threads pool(2);
      e->run(in, two);
      CHECK(two.to_vector<float>() == one.to_vector<float>());
    }
}

TEST_CASE("fused results against a scalar reference") {
  // z in [-1, 1] keeps 1 + tanh(z) away from the cancellation near z = -3.
  tensor a = random_tensor<float>({517}, -3, 3, 5), b = random_tensor<float>({517}, -3, 3, 6), c = random_tensor<float>({517}, -1, 1, 7);
  std::vector<float> want;
  for (std::int64_t i = 0; i < 517; ++i) {
    const float x = a.data<float>()[i], y = b.data<float>()[i], z = c.data<float>()[i];
    want.push_back(float(std::exp(double(x) - std::max(y, z)) / (1 + std::tanh(double(z)))));
  }
  check_all_close(fused_expr::parse(mixed_text).run({a, b, c}).to_vector<float>(), want, 4e-6, 1e-7);
  check_all_close(run_fused(mixed, {a, b, c}).to_vector<float>(), want, 4e-6, 1e-7);
}

TEST_CASE("deep and wide run-time expressions reuse temporaries and stay correct") {
  // ((((x0 + 1) * x1) - 2) ...) 24 levels deep, and a balanced tree over all 8 inputs.
  fused_expr deep = fused_expr::input(0);
  for (int i = 0; i < 24; ++i)
    deep = fused_expr::apply(i % 3 == 0 ? "add" : i % 3 == 1 ? "multiply" : "subtract",
                             {deep, i % 3 == 1 ? fused_expr::input(1) : fused_expr::constant(0.25 * i)});
  tensor x0 = random_tensor<double>({300}, -1, 1, 1), x1 = random_tensor<double>({300}, 0.5, 1, 2);
  std::vector<double> want;
  for (std::int64_t k = 0; k < 300; ++k) {
    double v = x0.data<double>()[k];
    for (int i = 0; i < 24; ++i) v = i % 3 == 0 ? v + 0.25 * i : i % 3 == 1 ? v * x1.data<double>()[k] : v - 0.25 * i;
    want.push_back(v);
  }
  check_all_close(deep.run({x0, x1}).to_vector<double>(), want, 1e-14, 1e-14);
  CHECK(fused_expr::parse(deep.to_string()).to_string() == deep.to_string());

  std::vector<fused_expr> level;
  std::vector<tensor> inputs;
  for (std::size_t i = 0; i < 8; ++i) {
    level.push_back(fused_expr::input(i));
    inputs.push_back(random_tensor<float>({100}, -1, 1, unsigned(i) + 10));
  }
  while (level.size() > 1) {
    std::vector<fused_expr> next;
    for (std::size_t i = 0; i < level.size(); i += 2) next.push_back(fused_expr::apply("maximum", {level[i], level[i + 1]}));
    level = next;
  }
  std::vector<float> top(100, -10);
  for (const auto& t : inputs)
    for (std::size_t k = 0; k < 100; ++k) top[k] = std::max(top[k], t.data<float>()[k]);
  check_all_close(level[0].run(std::span<const tensor>(inputs)).to_vector<float>(), top);
  // Constants on either side of non-commutative operators (broadcast in registers), and two
  // constants together, over several tiles and a strided input.
  const tensor long_base = random_tensor<float>({5000, 2}, 0.5, 2, 30);
  const tensor strided = long_base.slice(1, 0, 1);
  const fused_expr consts = fused_expr::parse("(subtract (divide 3 x0) (multiply (add 1 0.5) (subtract x0 0.25)))");
  const auto got = consts.run({strided}).to_vector<float>();
  const auto xs = strided.to_vector<float>();
  REQUIRE(got.size() == 5000);
  std::vector<float> want_consts;
  for (float x : xs) want_consts.push_back(3.f / x - 1.5f * (x - 0.25f));
  check_all_close(got, want_consts, 1e-6, 1e-6);  // not exact: a compiler may contract the reference into an FMA
  // A bare input is a copy; clip takes its bounds.
  check_all_close(fused_expr::parse("x1").run({x0, x1}).to_vector<double>(), x1.to_vector<double>());
  check_all_close(fused_expr::parse("(clip x0 -0.5 0.5)").run({x0}).to_vector<double>(), clip(x0, -0.5, 0.5).to_vector<double>());
  CHECK(fused_expr::parse("(clip x0 -0.5 0.5)").to_string() == "(clip x0 -0.5 0.5)");
}

TEST_CASE("cheap operators after an instruction run in its registers and give the same values") {
  // Each kind of post operator, a constant on either side of non-commutative ones, more posts
  // than one instruction holds, and posts after an expensive operator; against the operators
  // applied one kernel at a time (exactly equal: the same arithmetic per element).
  struct one_case {
    const char* text;
    std::size_t instructions;
  };
  const one_case cases[] = {
      {"(multiply (relu (add (multiply x0 x1) x1)) 0.5)", 2},
      {"(subtract 1 (divide 2 (add x0 x1)))", 1},
      {"(clip (abs (negative (maximum 0.25 (minimum (subtract x0 x1) 0.75)))) -0.5 0.5)", 2},
      {"(relu (multiply (exp x0) 3))", 1},
      {"(add (relu (tanh x0)) x1)", 2},
      {"(multiply (add x0 1) (subtract x1 2))", 3},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const fused_expr e = fused_expr::parse(c.text);
    CHECK(e.num_instructions() == c.instructions);
    for (dtype t : {dtype::float32, dtype::float64}) {
      const tensor x0 = cast(random_tensor<double>({3, 1031}, -2, 2, 40), t), x1 = cast(random_tensor<double>({1031}, -2, 2, 41), t);
      const tensor got = e.run({x0, x1});
      const tensor want = unfused(c.text, x0, x1);
      CHECK(cast(got, dtype::float64).to_vector<double>() == cast(want, dtype::float64).to_vector<double>());
    }
  }
  CHECK(fused_expr::parse("(multiply (relu (add (multiply x0 x1) x2)) 0.5)").num_operations() == 4);
}

TEST_CASE("an epilogue runs an activation of x0 plus operands in one pass, giving the interpreter's values") {
  // Recognised: the sums the compiler writes after a convolution or matmul, under each
  // activation, either operand of an add first; not: x0 twice, SiLU of two different sums, a
  // residual added after the activation, a subtraction.
  for (const char* text : {"x0", "(add x1 x0)", "(add (add x0 x1) x2)", "(add x3 (add x1 x0))", "(relu (add (add x0 x1) (add x2 x3)))",
                           "(clip (add x0 x1) 0 6)", "(sigmoid (add x0 x1))", "(tanh x0)", "(gelu (add x0 x1))", "(gelu_tanh (add x0 x1))",
                           "(multiply (add x0 x1) (sigmoid (add x0 x1)))", "(multiply (sigmoid x0) x0)",
                           "(clip (add (multiply (add x0 x1) 0.2) 0.5) 0 1)",
                           "(multiply (add x0 x1) (clip (add 0.5 (multiply 0.1666 (add x0 x1))) 0 1))"}) {
    CAPTURE(text);
    CHECK(fused_expr::parse(text).one_pass_epilogue());
  }
  for (const char* text : {"(add x0 x0)", "(multiply (add x0 x1) (sigmoid (add x0 x2)))", "(add (relu (add x0 x1)) x2)", "(subtract x0 x1)",
                           "(multiply x0 x1)", "(add x0 1)", "(multiply (add x0 x1) (clip (add (multiply (add x0 x2) 0.2) 0.5) 0 1))",
                           "(exp (add x0 x1))", "(add (add x0 x1) (add x2 x0))"}) {
    CAPTURE(text);
    CHECK_FALSE(fused_expr::parse(text).one_pass_epilogue());
  }
  // Applied to a 5 x 37 block (two whole vectors and a part of one per row at AVX-512's width,
  // more at narrower ones) with a value per row, a value per column and a whole operand; and an
  // operand read with a column stride of 2, which takes the interpreter. Against the expression
  // run over whole tensors: bit for bit.
  const std::int64_t m = 5, n = 37;
  for (const char* text : {"(multiply (add x0 x1) (sigmoid (add x0 x1)))", "(relu (add (add x0 x1) (add x2 x3)))",
                           "(multiply (add x0 x2) (clip (add (multiply (add x0 x2) 0.1666666716337204) 0.5) 0 1))", "(gelu (add x3 x0))"}) {
    CAPTURE(text);
    const fused_expr e = fused_expr::parse(text);
    const tensor c = random_tensor<float>({m, n}, -4, 4, 60), per_row = random_tensor<float>({m, 1}, -1, 1, 61),
                 per_col = random_tensor<float>({1, n}, -1, 1, 62), whole = random_tensor<float>({m, n}, -1, 1, 63);
    const std::vector<float> want = e.run({c, per_row, per_col, whole}).to_vector<float>();
    const float* r = static_cast<const float*>(per_row.data());
    const float* q = static_cast<const float*>(per_col.data());
    const float* w = static_cast<const float*>(whole.data());
    const epilogue_operand<float> operands[] = {{r, 1, 0}, {q, 0, 1}, {w, n, 1}};
    std::vector<float> got = c.to_vector<float>();
    fused_epilogue<float>(e, operands)(got.data(), n, 1, 0, 0, m, n);
    CHECK(got == want);
    // The same block at rows [2, 5) and columns [16, 37) of the matrix only.
    std::vector<float> part = c.to_vector<float>();
    fused_epilogue<float>(e, operands)(part.data() + 2 * n + 16, n, 1, 2, 16, m - 2, n - 16);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const std::size_t at = std::size_t(i * n + j);
        CHECK(part[at] == (i >= 2 && j >= 16 ? want[at] : c.to_vector<float>()[at]));
      }
    // A strided operand: the interpreter, the same values.
    std::vector<float> wide(std::size_t(2 * n));
    for (std::int64_t j = 0; j < n; ++j) wide[std::size_t(2 * j)] = q[j];
    const epilogue_operand<float> strided[] = {{r, 1, 0}, {wide.data(), 0, 2}, {w, n, 1}};
    std::vector<float> slow = c.to_vector<float>();
    fused_epilogue<float>(e, strided)(slow.data(), n, 1, 0, 0, m, n);
    CHECK(slow == want);
    // Blocks of one column (a matrix-vector product's), taken as rows of the transposed matrix:
    // column 5 over all rows, column 36 from row 1, and a column of a matrix stored by columns
    // (rows 1 apart).
    for (const std::int64_t j : {5, 36}) {
      CAPTURE(j);
      const std::int64_t i0 = j == 5 ? 0 : 1;
      std::vector<float> col = c.to_vector<float>();
      fused_epilogue<float>(e, operands)(col.data() + i0 * n + j, n, 1, i0, j, m - i0, 1);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t q = 0; q < n; ++q) {
          const std::size_t at = std::size_t(i * n + q);
          CHECK(col[at] == (q == j && i >= i0 ? want[at] : c.to_vector<float>()[at]));
        }
      const tensor ct = c.permute({1, 0}).contiguous();
      std::vector<float> bycol = ct.to_vector<float>();
      fused_epilogue<float>(e, operands)(bycol.data() + j * m + i0, 1, m, i0, j, m - i0, 1);
      for (std::int64_t i = i0; i < m; ++i) CHECK(bycol[std::size_t(j * m + i)] == want[std::size_t(i * n + j)]);
    }
  }
}

TEST_CASE("fused descriptions and operands that are wrong are clear errors") {
  auto parse_error = [](const char* text) { return message_of<kernel_error>([&] { fused_expr::parse(text); }); };
  CHECK(parse_error("(ad x0 x1)") ==
        "kiln::kernels::fused_expr::parse: at offset 1 of \"(ad x0 x1)\": unknown operator 'ad' (did you mean 'add'?)");
  CHECK(parse_error("(exp x0 x1)") == "kiln::kernels::fused_expr::parse: at offset 1 of \"(exp x0 x1)\": 'exp' takes 1 operands, got 2");
  CHECK(parse_error("(add x0 x1") == "kiln::kernels::fused_expr::parse: at offset 10 of \"(add x0 x1\": missing ')'");
  CHECK(parse_error("(add x0 y)") ==
        "kiln::kernels::fused_expr::parse: at offset 9 of \"(add x0 y)\": expected '(', an input x0..x7 or a number, got 'y'");
  CHECK(parse_error("(exp x9)") == "kiln::kernels::fused_expr::parse: at offset 7 of \"(exp x9)\": input x9: at most 8 inputs (x0..x7)");
  CHECK(parse_error("(clip x0 a 1)") == "kiln::kernels::fused_expr::parse: at offset 10 of \"(clip x0 a 1)\": clip needs number bounds, got 'a'");
  CHECK(parse_error("x0 x1") == "kiln::kernels::fused_expr::parse: at offset 3 of \"x0 x1\": unexpected text after the expression");
  CHECK(parse_error("") == "kiln::kernels::fused_expr::parse: at offset 0 of \"\": expected an expression");
  std::string nested;
  for (int i = 0; i < 300; ++i) nested += "(exp ";
  CHECK(parse_error(nested.c_str()).find("nests too deeply") != std::string::npos);

  const fused_expr e = fused_expr::parse(chain_text);
  const tensor f = tensor::zeros({4}, dtype::float32), i = tensor::zeros({4}, dtype::int32);
  CHECK(message_of<kernel_error>([&] { e.run({f, f}); }) == "kiln::kernels::fused: the expression reads 3 inputs, 2 given");
  CHECK(message_of<kernel_error>([&] { e.run({f, f, tensor::zeros({4}, dtype::float64)}); }) ==
        "kiln::kernels::fused: input 2 is float64[4] but input 0 is float32[4]; all inputs need one dtype");
  CHECK(message_of<kernel_error>([&] { e.run({i, i, i}); }) == "kiln::kernels::fused: inputs must be float32 or float64, got int32[4]");
  CHECK(message_of<kernel_error>([&] { e.run({f, f, tensor::zeros({3}, dtype::float32)}); }).find("do not broadcast") != std::string::npos);
  CHECK(message_of<kernel_error>([&] { e.run({f, f, f}, tensor::zeros({5}, dtype::float32)); }) ==
        "kiln::kernels::fused: the output must be float32[4], got float32[5]");
  CHECK(message_of<kernel_error>([&] { run_fused(chain, {f, f}); }) == "kiln::kernels::fused: the expression reads 3 inputs, 2 given");
}
