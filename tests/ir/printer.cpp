// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include <limits>

using namespace kiln_test;

TEST_CASE("a small module prints exactly so") {
  auto n = ir::make_size_var("n");
  auto x = ir::make_var("x", f32({n, dim(4)}));
  ir::block_builder bb(ir::with_module_attrs(ir::make_module(), {{"target", "cpu"}}));
  bb.function(
      "main", {x},
      [&] {
        auto y = bb.dataflow([&] {
          auto a = bb.emit(ir::call_op("exp", {x}));
          return bb.emit_output(ir::call_op("sum", {a}, {{"axis", ir::int_array{1}}}), "y");
        });
        return bb.emit(ir::call_op("add", {y, ir::make_constant(1.0, dtype::float32)}), "z");
      },
      {{ir::attr::global_symbol, "main"}});
  CHECK(ir::print(bb.module()) ==
        "# kiln IR\n"
        "@I.ir_module\n"
        "class Module:\n"
        "    I.module_attrs({\"target\": \"cpu\"})\n"
        "\n"
        "    @R.function\n"
        "    def main(x: R.Tensor((n, 4), \"float32\")) -> R.Tensor((n,), \"float32\"):\n"
        "        R.func_attr({\"global_symbol\": \"main\"})\n"
        "        with R.dataflow():\n"
        "            lv: R.Tensor((n, 4), \"float32\") = R.exp(x)\n"
        "            y: R.Tensor((n,), \"float32\") = R.sum(lv, axis=[1])\n"
        "            R.output(y)\n"
        "        z: R.Tensor((n,), \"float32\") = R.add(y, R.const(1.0, \"float32\"))\n"
        "        return z\n");
  ir::print_options no_types;
  no_types.show_binding_types = false;
  CHECK(ir::print(bb.module(), no_types).find("            lv = R.exp(x)\n") != std::string::npos);
}

TEST_CASE("names are made unique, valid and not reserved") {
  auto x = ir::make_var("x", f32({2}));
  auto x2 = ir::make_var("x", f32({2}));
  auto weird = ir::make_var("my.var-1", f32({2}));
  auto kw = ir::make_var("return", f32({2}));
  auto digit = ir::make_var("3d", f32({2}));
  auto empty = ir::make_var("", f32({2}));
  auto body = ir::make_tuple({x, x2, weird, kw, digit, empty});
  std::string text = ir::print(ir::with_function(ir::make_module(), "f", ir::make_function({x, x2, weird, kw, digit, empty}, body)));
  CHECK(text.find("def f(x: R.Tensor((2,), \"float32\"), x1: R.Tensor((2,), \"float32\"), my_var_1: R.Tensor((2,), \"float32\"), "
                  "return_: R.Tensor((2,), \"float32\"), v3d: R.Tensor((2,), \"float32\"), v: R.Tensor((2,), \"float32\"))") != std::string::npos);
  CHECK(text.find("return (x, x1, my_var_1, return_, v3d, v)") != std::string::npos);
}

TEST_CASE("constants print in a form that reads back exactly") {
  auto p = [](ir::ndarray a) { return ir::print(ir::make_constant(std::move(a))); };
  CHECK(p(ir::ndarray::from<int>(dtype::int32, {2, 2}, {1, -2, 3, 4})) == "R.const([[1, -2], [3, 4]], \"int32\")");
  CHECK(p(ir::ndarray::from<int>(dtype::bool_, {3}, {1, 0, 1})) == "R.const([True, False, True], \"bool\")");
  CHECK(p(ir::ndarray::scalar(dtype::float32, 0.1)) == "R.const(0.1, \"float32\")");
  CHECK(p(ir::ndarray::scalar(dtype::float64, 0.1)) == "R.const(0.1, \"float64\")");
  CHECK(p(ir::ndarray::scalar(dtype::float32, 3.0)) == "R.const(3.0, \"float32\")");
  CHECK(p(ir::ndarray::scalar(dtype::float16, 0.1)) == "R.const(0.099975586, \"float16\")");
  CHECK(p(ir::ndarray::from<double>(dtype::float32, {3}, {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                                         std::numeric_limits<double>::quiet_NaN()})) == "R.const([inf, -inf, nan], \"float32\")");
  CHECK(p(ir::ndarray(dtype::float32, {2, 0}, {})) == "R.const([], \"float32\", shape=(2, 0))");
  CHECK(p(ir::ndarray(dtype::int64, {0}, {})) == "R.const([], \"int64\", shape=(0,))");
  ir::print_options elide;
  elide.max_constant_elements = 3;
  CHECK(ir::print(ir::make_constant(ir::ndarray::from<int>(dtype::int8, {4}, {1, 2, 3, 4})), elide) ==
        "R.const(meta[0], \"int8\", shape=(4,))");
  CHECK(ir::print(ir::make_constant(ir::ndarray::from<int>(dtype::int8, {3}, {1, 2, 3})), elide) == "R.const([1, 2, 3], \"int8\")");
}

namespace {
const char* two_constants = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 20), "float32")) -> R.Tensor((2, 20), "float32"):
        a: R.Tensor((2, 20), "float32") = R.add(x, R.const([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0]], "float32"))
        b: R.Tensor((2, 20), "float32") = R.multiply(a, R.const(2.0, "float32"))
        c: R.Tensor((2, 20), "float32") = R.subtract(b, R.const([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19], "float32"))
        return c
)";
}  // namespace

TEST_CASE("the readable form elides large constants by index, and reads back only with them") {
  const ir::ir_module m = ir::parse_module(two_constants);
  std::vector<ir::ndarray> elided;
  ir::print_options opt = ir::print_options::readable();
  opt.elided_constants = &elided;
  const std::string text = ir::print(m, opt);
  CHECK(text.find("R.const(meta[0], \"float32\", shape=(2, 20))") != std::string::npos);
  CHECK(text.find("R.const(2.0, \"float32\")") != std::string::npos);  // small ones stay
  CHECK(text.find("R.const(meta[1], \"float32\", shape=(20,))") != std::string::npos);
  REQUIRE(elided.size() == 2);
  CHECK(ir::print(m, ir::print_options::readable()) == text);  // the same without collecting them

  // From text alone: an error that says so, where.
  const auto err = message_of<ir::parse_error>([&] { (void)ir::parse_module(text); });
  CHECK(err.find("line 6, column 60:") != std::string::npos);  // after the "# kiln IR" line
  CHECK(err.find("constants elided: meta[0] stands for a float32 of shape (2, 20) constant the printer left out") != std::string::npos);

  // With the constants: the same module, whose constants share the printed ones' data.
  const ir::ir_module back = ir::parse_module(text, {.constants = elided});
  CHECK(ir::structural_equal(back, m));
  CHECK(ir::print(back) == ir::print(m));

  // Constants that do not fit the text are refused by index.
  std::vector<ir::ndarray> wrong = {elided[1], elided[0]};
  CHECK(message_of<ir::parse_error>([&] { (void)ir::parse_module(text, {.constants = wrong}); })
            .find("meta[0] is printed as a float32 of shape (2, 20) constant, but the one given is float32 of another shape") != std::string::npos);
  std::vector<ir::ndarray> short_list = {elided[0]};
  CHECK(message_of<ir::parse_error>([&] { (void)ir::parse_module(text, {.constants = short_list}); })
            .find("meta[1] is not among the 1 elided constants given") != std::string::npos);
}

TEST_CASE("other leaves print in their R. forms") {
  ir::prim_expr n = ir::make_size_var("n");
  CHECK(ir::print(ir::make_shape_expr({n * 2, dim(3)})) == "R.shape([n * 2, 3])");
  CHECK(ir::print(ir::make_prim_value(n + 1)) == "R.prim_value(n + 1)");
  CHECK(ir::print(ir::make_prim_value(1, dtype::bool_)) == "R.prim_value(1, \"bool\")");
  CHECK(ir::print(ir::make_float_prim_value(2.5, dtype::float32)) == "R.prim_value(2.5, \"float32\")");
  CHECK(ir::print(ir::make_string_imm("a\"b\\c\n\x01")) == "R.str(\"a\\\"b\\\\c\\n\\x01\")");
  CHECK(ir::print(ir::call_extern("f", {}, ir::object_type())) == "R.call_packed(\"f\", sinfo_args=R.Object)");
  CHECK(ir::print(ir::make_tuple({})) == "()");
  CHECK(ir::print(ir::make_tuple({ir::make_string_imm("s")})) == "(R.str(\"s\"),)");
}

TEST_CASE("printing is deterministic and functions print on their own") {
  for (auto& entry : corpus()) {
    const auto& [name_, m] = entry;
    const std::string& name = name_;
    CAPTURE(name);
    CHECK(ir::print(m) == ir::print(m));
  }
  auto m = make_mlp();
  std::string f = ir::print("main", m->lookup("main"));
  CHECK(f.rfind("@R.function\ndef main(", 0) == 0);
}

TEST_CASE("unbound if and nested sequences cannot be printed") {
  auto c = ir::make_var("c", ir::prim_type(dtype::bool_));
  auto x = ir::make_var("x", f32({2}));
  CHECK(message_of([&] { ir::print(ir::make_if(c, x, x)); }).find("an if expression must be bound to a variable") != std::string::npos);
  CHECK(message_of([&] { ir::print(ir::call_op("exp", {ir::make_seq({}, x)})); }).find("a sequence expression can only be") != std::string::npos);
}
