// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include <limits>

using namespace kiln_test;

TEST_CASE("constant dimensions fold") {
  CHECK(ir::as_int(dim(3) + dim(4)) == 7);
  CHECK(ir::as_int(dim(3) * dim(4)) == 12);
  CHECK(ir::as_int(ir::floordiv(dim(-7), dim(2))) == -4);
  CHECK(ir::as_int(ir::floormod(dim(-7), dim(2))) == 1);
  CHECK(ir::as_int(ir::make_binary(ir::prim_op::min, dim(3), dim(5))) == 3);
  CHECK(ir::as_int(ir::make_binary(ir::prim_op::max, dim(3), dim(5))) == 5);
}

TEST_CASE("identities keep the symbolic operand itself") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK((n + 0) == n);
  CHECK((n * 1) == n);
  CHECK((dim(1) * n) == n);
  CHECK(ir::floordiv(n, dim(1)) == n);
  CHECK(ir::as_int(n * 0) == 0);
  CHECK(ir::as_int(n - n) == 0);
  CHECK(ir::as_int(ir::floormod(n, dim(1))) == 0);
}

TEST_CASE("division by a zero constant is an error") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(message_of([&] { ir::floordiv(n, dim(0)); }).find("division by zero") != std::string::npos);
  CHECK(message_of([&] { ir::floormod(dim(4), dim(0)); }).find("modulo by zero") != std::string::npos);
}

TEST_CASE("prove_equal sees through commutativity and cancelling constants") {
  ir::prim_expr n = ir::make_size_var("n"), m = ir::make_size_var("m");
  CHECK(ir::prove_equal(n * 4, dim(4) * n));
  CHECK(ir::prove_equal((n + 1) - 1, n));
  CHECK(ir::prove_equal(n * 2 + n * 2, n * 4));
  CHECK(ir::prove_equal(n * m * 64, (n * m) * 4 * 16));
  CHECK_FALSE(ir::prove_equal(n, m));
  CHECK_FALSE(ir::prove_equal(n * 2, n * 3));
}

TEST_CASE("prove_not_equal only claims what it can show") {
  ir::prim_expr n = ir::make_size_var("n"), m = ir::make_size_var("m");
  CHECK(ir::prove_not_equal(dim(3), dim(4)));
  CHECK(ir::prove_not_equal(n + 1, n));
  CHECK_FALSE(ir::prove_not_equal(n, m));  // could be equal at run time
  CHECK_FALSE(ir::prove_not_equal(n, dim(4)));
}

TEST_CASE("dimensions print with minimal parentheses") {
  ir::prim_expr n = ir::make_size_var("n"), m = ir::make_size_var("m");
  CHECK(ir::to_string(n * 4 + 1) == "n * 4 + 1");
  CHECK(ir::to_string((n + 1) * 4) == "(n + 1) * 4");
  CHECK(ir::to_string(n - (m - 1)) == "n - (m - 1)");
  CHECK(ir::to_string(ir::floordiv(n + m, dim(2))) == "(n + m) // 2");
  CHECK(ir::to_string(ir::make_binary(ir::prim_op::min, n, m)) == "T.min(n, m)");
}

TEST_CASE("substitute replaces size variables and simplifies") {
  ir::size_var n = ir::make_size_var("n");
  ir::prim_expr e = ir::prim_expr(n) * 4 + 2;
  ir::prim_expr r = ir::substitute(e, [&](const ir::size_var_node& v) { return &v == n.get() ? dim(3) : ir::prim_expr(); });
  CHECK(ir::as_int(r) == 14);
  ir::prim_expr same = ir::substitute(e, [](const ir::size_var_node&) { return ir::prim_expr(); });
  CHECK(same == e);
  std::vector<ir::size_var> vars;
  ir::collect_size_vars(e * n, vars);
  CHECK(vars.size() == 1);
}

TEST_CASE("constant folding that would overflow int64 is an error, and proofs with huge coefficients stay sound") {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max(), small = std::numeric_limits<std::int64_t>::min();
  CHECK(message_of([&] { (void)(dim(big) + dim(1)); }) == "kiln::ir: a shape expression overflows int64: 9223372036854775807 + 1");
  CHECK(message_of([&] { (void)(dim(small) - dim(1)); }) == "kiln::ir: a shape expression overflows int64: -9223372036854775808 - 1");
  CHECK(message_of([&] { (void)(dim(big) * dim(2)); }).find("overflows int64") != std::string::npos);
  CHECK(message_of([&] { (void)ir::floordiv(dim(small), dim(-1)); }).find("overflows int64") != std::string::npos);
  CHECK(ir::as_int(ir::floormod(dim(small), dim(-1))) == 0);
  CHECK(ir::as_int(ir::floordiv(dim(-7), dim(2))) == -4);
  // Linear forms whose coefficients would overflow compare as opaque terms: no overflow, and no
  // false proof.
  ir::prim_expr n = ir::make_size_var("n");
  ir::prim_expr huge = n * big;
  CHECK_FALSE(ir::prove_equal(huge * 2, n * 0));
  CHECK(ir::prove_equal(huge * 2, huge * 2));
  CHECK_FALSE(ir::prove_equal(huge + huge, n * -2));
  CHECK_FALSE(ir::prove_equal(huge + 1 - (n * small), n));
}

TEST_CASE("proofs about deep products take time linear in their size (found by fuzz_compile)") {
  // Each product's operands were linearized twice (once for the product, once more for its atom's
  // key), doubling the work at every level: a 64-factor dimension never finished compiling. Built
  // twice, so that the two are equal by structure and not by pointer.
  std::vector<ir::prim_expr> vars;
  for (int i = 0; i < 64; ++i) vars.push_back(ir::make_size_var("n" + std::to_string(i)));
  auto product = [&](bool reversed) {
    ir::prim_expr p = dim(1);
    for (int i = 0; i < 64; ++i) p = (p + 1) * vars[static_cast<std::size_t>(reversed ? 63 - i : i)];
    return p;
  };
  CHECK(ir::prove_equal(product(false), product(false)));
  CHECK_FALSE(ir::prove_equal(product(false), product(true)));  // (a+1)*b is not (b+1)*a
  CHECK(ir::prove_equal(product(false) * 2 + vars[0], vars[0] + product(false) + product(false)));
  CHECK(ir::prove_not_equal(product(true) + 3, product(true) + 4));
}
