// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

using namespace kiln_test;

namespace {
ir::base_func identity(ir::type t) {
  auto x = ir::make_var("x", t);
  return ir::make_function({x}, x);
}
}  // namespace

TEST_CASE("with_function appends new names and replaces existing ones in place") {
  ir::ir_module m = ir::make_module();
  m = ir::with_function(m, "a", identity(f32({1})));
  m = ir::with_function(m, "b", identity(f32({2})));
  ir::ir_module m2 = ir::with_function(m, "a", identity(f32({3})));
  REQUIRE(m2->size() == 2);
  CHECK(m2->functions()[0].gv->name == "a");
  CHECK(m2->functions()[1].func == m->functions()[1].func);  // untouched functions are shared
  CHECK(ir::to_string(m2->get_global_var("a")->checked_type) == "R.Callable((R.Tensor((3,), \"float32\"),), R.Tensor((3,), \"float32\"))");
  CHECK(m->lookup("a") != m2->lookup("a"));  // the old module is unchanged
  CHECK(!m2->lookup("zzz"));
}

TEST_CASE("a replaced function with the same signature keeps its global variable") {
  ir::ir_module m = ir::with_function(ir::make_module(), "f", identity(f32({1})));
  ir::ir_module m2 = ir::with_function(m, "f", identity(f32({1})));
  CHECK(m2->get_global_var("f") == m->get_global_var("f"));
}

TEST_CASE("module errors name the function") {
  ir::ir_module m = ir::with_function(ir::make_module(), "f", identity(f32({1})));
  CHECK(message_of([&] { ir::with_function(m, "not valid", identity(f32({1}))); }) ==
        "kiln::ir::ir_module: 'not valid' is not a valid function name (letters, digits and _ only)");
  CHECK(message_of([&] { ir::without_function(m, "g"); }) == "kiln::ir::ir_module: there is no function named 'g' to remove");
  auto e = m->functions()[0];
  CHECK(message_of([&] { ir::make_module({e, e}); }) == "kiln::ir::ir_module: the function name 'f' is defined twice");
  CHECK(ir::without_function(m, "f")->size() == 0);
}

TEST_CASE("module attributes") {
  ir::ir_module m = ir::with_module_attrs(ir::make_module(), {{"target", "llvm"}});
  CHECK(m->attrs.get_or<std::string>("target", "") == "llvm");
  ir::ir_module m2 = ir::with_function(m, "f", identity(f32({1})));
  CHECK(m2->attrs == m->attrs);
}
