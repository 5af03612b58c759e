// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include <random>

using namespace kiln_test;

namespace {
const char* header = "@I.ir_module\nclass Module:\n";

/// A one-function module whose body lines are `lines` (indented by the helper).
std::string fn(const std::string& params, const std::string& ret, const std::vector<std::string>& lines) {
  std::string s = std::string(header) + "    @R.function\n    def main(" + params + ") -> " + ret + ":\n";
  for (auto& l : lines) s += "        " + l + "\n";
  return s;
}

ir::parse_error parse_fails(const std::string& text) {
  try {
    ir::parse_module(text);
  } catch (const ir::parse_error& e) {
    return e;
  }
  FAIL("expected a parse error for:\n" << text);
  throw;
}
}  // namespace

TEST_CASE("every module of the corpus survives print then parse") {
  for (auto& entry : corpus()) {
    const auto& [name_, m] = entry;
    const std::string& name = name_;
    CAPTURE(name);
    const std::string text = ir::print(m);
    ir::ir_module back = ir::parse_module(text);
    CHECK(ir::structural_equal(m, back));
    CHECK(ir::structural_hash(m) == ir::structural_hash(back));
    CHECK(ir::print(back) == text);
    CHECK(ir::verify(back).empty());
  }
}

TEST_CASE("constants of every dtype round-trip bit for bit") {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> real(-1e6, 1e6);
  for (dtype t : kiln::all_dtypes) {
    CAPTURE(kiln::name(t));
    std::vector<double> values;
    for (int i = 0; i < 24; ++i) values.push_back(t == dtype::bool_ ? (i % 3 == 0) : kiln::is_float(t) ? real(rng) / (i + 1) : (i * 37) % 100 - 50 + (t == dtype::uint8 ? 50 : 0));
    auto c = ir::make_constant(ir::ndarray::from<double>(t, {2, 3, 4}, values));
    auto x = ir::make_var("x", c->checked_type);
    ir::ir_module m = ir::with_function(ir::make_module(), "f", ir::make_function({x}, ir::make_tuple({x, c})));
    CHECK(ir::structural_equal(ir::parse_module(ir::print(m)), m));
  }
  auto big = ir::make_constant(ir::ndarray::from<std::int64_t>(dtype::int64, {2}, {std::int64_t{1} << 62, -(std::int64_t{1} << 62) - 7}));
  ir::ir_module m = ir::with_function(ir::make_module(), "f", ir::make_function({}, big));
  CHECK(ir::structural_equal(ir::parse_module(ir::print(m)), m));
}

TEST_CASE("the parser accepts hand-written variations of the format") {
  std::string text = std::string("# a comment\n\n") + header +
                     "    # functions may call functions defined later\n"
                     "    @R.function\n"
                     "    def main(x: R.Tensor((n, 4), 'float32')) -> R.Tensor((n, 4), \"float32\"):\n"
                     "        y = cls.helper(x)   # no annotation\n"
                     "        c = R.const([[1, 2, 3, 4]], \"float32\")\n"
                     "        z: R.Tensor(ndim=2) = R.add(y,\n"
                     "                                    c)\n"
                     "        w = R.reshape(z, R.shape([T.max(n, 1) * 0 + n, (2 + 2)]))\n"
                     "        e = R.const([], \"float32\", shape=(0, 2))\n"
                     "        s = R.nn.softmax(R.sum(z, axis=[-1], keepdims=True), axis=-2)\n"
                     "        return y\n"
                     "\n"
                     "    @R.function\n"
                     "    def helper(a: R.Tensor((m, 4), \"float32\")) -> R.Tensor((m, 4), \"float32\"):\n"
                     "        return a\n";
  ir::ir_module m = ir::parse_module(text);
  REQUIRE(m->size() == 2);
  CHECK(ir::verify(m).empty());
  auto& seq = static_cast<const ir::seq_expr_node&>(*static_cast<const ir::function_node&>(*m->lookup("main")).body);
  CHECK(ir::to_string(seq.blocks[0].bindings[0].variable->checked_type) == "R.Tensor((n, 4), \"float32\")");
  CHECK(ir::to_string(seq.blocks[0].bindings[2].variable->checked_type) == "R.Tensor(ndim=2)");
  CHECK(ir::to_string(seq.blocks[0].bindings[4].variable->checked_type) == "R.Tensor((0, 2), \"float32\")");
  auto& softmax = static_cast<const ir::call_node&>(*seq.blocks[0].bindings[5].value);
  CHECK(softmax.attrs.get_or<std::int64_t>("axis", 0) == -2);
  CHECK(static_cast<const ir::call_node&>(*softmax.args[0]).attrs.find("axis")->as<ir::int_array>() == ir::int_array{-1});
}

TEST_CASE("a dict of ints is an attribute value: it prints, parses back and hashes by content") {
  const std::string text = fn("x: R.Tensor((n, 4), \"float32\")", "R.Tensor((n, 4), \"float32\")",
                              {"R.func_attr({\"tir_var_upper_bound\": {\"m\": 3, \"n\": 1024}})", "return x"});
  const ir::ir_module m = ir::parse_module(text);
  const auto& f = static_cast<const ir::function_node&>(*m->lookup("main"));
  CHECK(f.attrs.find("tir_var_upper_bound")->as<ir::int_dict>() == ir::int_dict{{"m", 3}, {"n", 1024}});
  CHECK(ir::print(m) == "# kiln IR\n" + text);
  const ir::ir_module other = ir::parse_module(fn("x: R.Tensor((n, 4), \"float32\")", "R.Tensor((n, 4), \"float32\")",
                                                  {"R.func_attr({\"tir_var_upper_bound\": {\"m\": 3, \"n\": 1025}})", "return x"}));
  CHECK_FALSE(ir::structural_equal(m, other));
  CHECK(ir::structural_hash(m) != ir::structural_hash(other));
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"R.func_attr({\"b\": {\"n\": 1, \"n\": 2}})", "return x"})).message() ==
        "key \"n\" is given twice");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"R.func_attr({\"b\": {\"n\": 1.5}})", "return x"})).message().find("expected an integer") == 0);
}

TEST_CASE("a list with a float in it is a list of floats: it prints, parses back and hashes by content") {
  const std::string text = fn("x: R.Tensor((1, 4), \"float32\")", "R.Tensor((2, 6), \"float32\")",
                              {"gv: R.Tensor((2, 6), \"float32\") = R.image.resize(x, size=[2, 6], scales=[2.0, 1.5], method=\"nearest\")",
                               "return gv"});
  const ir::ir_module m = ir::parse_module(text);
  CHECK(ir::print(m).find("scales=[2.0, 1.5]") != std::string::npos);
  CHECK(ir::structural_equal(ir::parse_module(ir::print(m)), m));
  // one float makes the whole list floats; whole numbers print with a point so they read back as floats
  const ir::ir_module mixed = ir::parse_module(fn("x: R.Tensor((1, 4), \"float32\")", "R.Tensor((2, 6), \"float32\")",
                                                  {"gv: R.Tensor((2, 6), \"float32\") = R.image.resize(x, size=[2, 6], scales=[2, 1.5e0], method=\"nearest\")",
                                                   "return gv"}));
  CHECK(ir::structural_equal(mixed, m));
  const ir::ir_module other = ir::parse_module(fn("x: R.Tensor((1, 4), \"float32\")", "R.Tensor((2, 6), \"float32\")",
                                                  {"gv: R.Tensor((2, 6), \"float32\") = R.image.resize(x, size=[2, 6], scales=[2.0, 1.25], method=\"nearest\")",
                                                   "return gv"}));
  CHECK_FALSE(ir::structural_equal(m, other));
  CHECK(ir::structural_hash(m) != ir::structural_hash(other));
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"R.func_attr({\"b\": [1, \"a\"]})", "return x"})).message().find("expected a number") == 0);
}

TEST_CASE("syntax errors give line, column, expectation and a caret") {
  auto e = parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Tensor((3,), \"float32\")", {"y = R.add(x x)", "return y"}));
  CHECK(e.line() == 5);
  CHECK(e.column() == 21);
  CHECK(e.message() == "expected ')' but found 'x'");
  CHECK(std::string(e.what()) ==
        "kiln::ir::parse_module: line 5, column 21: expected ')' but found 'x'\n"
        "            y = R.add(x x)\n"
        "                        ^");
  CHECK(parse_fails("@I.ir_module\nclass Module\n").message() == "expected ':' but found the end of the line");
  CHECK(parse_fails("class Module:\n").message() == "expected '@' but found 'class'");
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Tensor((3,), \"float32\")", {"y = R.add(x, x", "return y"})).message() ==
        "unbalanced brackets: the text ends inside ( [ or {");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = R.str(\"abc)", "return y"})).message() == "unterminated string literal");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = x $ x", "return y"})).message() == "unexpected character '$'");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"\ty = x", "return y"})).message() == "tabs are not allowed in indentation; use spaces");
  CHECK(parse_fails(std::string(header) + "    @R.function\n    def f(x: R.Object) -> R.Object:\n        return x\n   pass\n").message() ==
        "this line's indentation does not match any enclosing block");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = x"})).message() == "the function body must end with 'return'");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"return x", "y = x"})).message() == "'return' must be the last statement of a function");
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float33\")", "R.Object", {"return x"})).message() ==
        "unknown dtype \"float33\" (known: bool, int8, int32, int64, uint8, float16, float32, float64, void)");
  CHECK(parse_fails(fn("x: R.Tensr", "R.Object", {"return x"})).message() ==
        "unknown type R.Tensr (expected R.Tensor, R.Shape, R.Tuple, R.Prim, R.Object or R.Callable)");
  CHECK(parse_fails(std::string(header) + "    @R.func\n    def f() -> R.Object:\n        return R.str(\"\")\n").message() ==
        "expected @R.function or @T.prim_func but found @R.func");
  CHECK(parse_fails(std::string(header) + "    @R.function\n    def f(x: R.Object):\n        return x\n").message() ==
        "function 'f' needs a return type annotation (-> R.Tensor(...))");
  CHECK(parse_fails(ir::print(make_mlp()) + "garbage\n").message() == "expected the end of the text after the module");
}

TEST_CASE("name errors suggest what was probably meant") {
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Tensor((3,), \"float32\")", {"y = R.ad(x, x)", "return y"})).message() ==
        "unknown operator R.ad (did you mean 'add' or 'nn.pad'?)");
  CHECK(parse_fails(fn("value: R.Tensor((3,), \"float32\")", "R.Tensor((3,), \"float32\")", {"y = R.exp(valeu)", "return y"})).message() ==
        "undefined variable 'valeu' (did you mean 'value'?)");
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Object", {"y = cls.helpr(x)", "return y"})).message() ==
        "the module has no function named 'helpr'");
  CHECK(parse_fails(fn("x: R.Tensor((n,), \"float32\")", "R.Object", {"y: R.Tensor((nn,), \"float32\") = x", "return y"})).message() ==
        "undefined symbolic variable 'nn' (symbolic dimensions are introduced by parameter types and R.match_cast) (did you mean 'n'?)");
}

TEST_CASE("scoping errors: dataflow variables, outputs, if branches") {
  auto e = parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Tensor((3,), \"float32\")",
                          {"with R.dataflow():", "    lv = R.exp(x)", "    gv = R.exp(lv)", "    R.output(gv)", "return lv"}));
  CHECK(e.message() == "'lv' is a dataflow variable of an earlier dataflow block and is not visible here (list it in R.output to use it after the block)");
  CHECK(e.line() == 9);
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Object", {"with R.dataflow():", "    lv = R.exp(x)", "    R.output(nope)", "return x"})).message() ==
        "R.output names 'nope', which is not bound in this dataflow block");
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Object", {"with R.dataflow():", "    R.output(x)", "    lv = R.exp(x)", "return x"})).message() ==
        "R.output names 'x', which is not bound in this dataflow block");
  CHECK(parse_fails(fn("c: R.Prim(\"bool\"), x: R.Object", "R.Object", {"with R.dataflow():", "    if c:", "        y = x", "    else:", "        y = x", "return x"}))
            .message() == "an if is not allowed inside a dataflow block (dataflow blocks hold pure, straight-line code)");
  CHECK(parse_fails(fn("c: R.Prim(\"bool\"), x: R.Object", "R.Object", {"if c:", "    y = x", "else:", "    z = x", "return y"})).message() ==
        "both branches of an if must bind the same variable last, but they bind 'y' and 'z'");
  CHECK(parse_fails(fn("c: R.Prim(\"bool\"), x: R.Object", "R.Object", {"if c:", "    t = x", "    y = x", "else:", "    y = x", "return t"})).message() ==
        "undefined variable 't'");
  CHECK(parse_fails(fn("x: R.Object, x: R.Object", "R.Object", {"return x"})).message() == "parameter 'x' is declared twice");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = R.match_cast(x, R.Tensor((k,), \"float32\"))", "z: R.Tensor((j,)) = y", "return x"})).message().find(
            "undefined symbolic variable 'j'") == 0);
}

TEST_CASE("type errors are reported at the call that causes them") {
  auto e = parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Tensor((3,), \"float32\")", {"y = R.matmul(x, R.const([1, 2], \"float32\"))", "return y"}));
  CHECK(e.line() == 5);
  CHECK(e.column() == 13);
  CHECK(e.message() == "matmul: reduction dimensions differ: argument 'x1' (#1) has shape (3,) and argument 'x2' (#2) has shape (2,) (3 vs 2)");
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Object", {"y: R.Tensor((4,), \"float32\") = R.exp(x)", "return y"})).message() ==
        "'y' is annotated R.Tensor((4,), \"float32\"), but the value has type R.Tensor((3,), \"float32\")");
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Tensor((4,), \"float32\")", {"return x"})).message() ==
        "kiln::ir: function body has type R.Tensor((3,), \"float32\"), which does not match the declared return type R.Tensor((4,), \"float32\")");
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Object", {"y = R.sum(x, keepdim=True)", "return y"})).message() ==
        "sum: unknown attribute 'keepdim'; its attributes are: axis, keepdims");
  CHECK(parse_fails(fn("x: R.Tensor((3,), \"float32\")", "R.Object", {"y = x[0]", "return y"})).message().find("which is not a tuple") !=
        std::string::npos);
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = R.const([[1, 2], [3]], \"int32\")", "return y"})).message() ==
        "ragged constant: this list has 1 elements, but its siblings have 2");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = R.const([1.5], \"int32\")", "return y"})).message() ==
        "an integer constant of dtype int32 cannot hold 1.5");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = R.const([300], \"int8\")", "return y"})).message() == "300 does not fit in int8");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = R.const([1, 2, 3], \"int8\", shape=(2, 2))", "return y"})).message() ==
        "the constant has 3 values but shape=(...) needs 4");
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = R.shape([4 // 0])", "return y"})).message() ==
        "kiln::ir: division by zero in a shape expression");
  CHECK(parse_fails(fn("x: R.Shape(ndim=1)", "R.Object", {"y = R.match_cast(x, R.Tensor((k,), \"float32\"))", "return y"})).message() ==
        "R.match_cast of a value of type R.Shape(ndim=1) to R.Tensor((k,), \"float32\") can never succeed");
}

TEST_CASE("every prefix and every single-byte corruption of valid text fails cleanly or parses") {
  const std::string text = ir::print(make_misc());
  std::size_t parsed = 0, rejected = 0;
  auto attempt = [&](const std::string& t) {
    try {
      ir::ir_module m = ir::parse_module(t);
      (void)ir::verify(m);
      ++parsed;
    } catch (const kiln::error&) {
      ++rejected;
    }
  };
  for (std::size_t n = 0; n < text.size(); n += 7) attempt(text.substr(0, n));
  std::mt19937 rng(7);
  const std::string alphabet = "()[]{},:.=@+-*/%#\"' \n\tabcRTI019_";
  for (int i = 0; i < 400; ++i) {
    std::string t = text;
    t[rng() % t.size()] = alphabet[rng() % alphabet.size()];
    attempt(t);
  }
  CHECK(rejected > 0);
  CHECK(parsed + rejected == (text.size() + 6) / 7 + 400);
}

TEST_CASE("text nested deeper than the parser's limit is an error, never a stack overflow") {
  const int deep = 100000;  // ~100 KB of text: overflowed the stack before the limit
  auto repeat = [](std::string_view s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out.append(s);
    return out;
  };
  const std::string limit = "nested too deeply (limit 256)";
  // Parenthesised dimensions, and a chain of unary minus signs (no brackets at all).
  CHECK(parse_fails(fn("x: R.Tensor((" + repeat("(", deep) + "3" + repeat(")", deep) + ",), \"float32\")", "R.Object", {"return x"}))
            .message() == limit);
  CHECK(parse_fails(fn("x: R.Tensor((" + repeat("-", deep) + "3,), \"float32\")", "R.Object", {"return x"})).message() == limit);
  // Nested types and nested expressions.
  CHECK(parse_fails(fn("x: " + repeat("R.Tuple(", deep) + "R.Object" + repeat(")", deep), "R.Object", {"return x"})).message() ==
        limit);
  CHECK(parse_fails(fn("x: R.Object", "R.Object", {"y = " + repeat("(", deep) + "x" + repeat(")", deep), "return y"})).message() ==
        limit);
  // A long sum has no nesting in the text but makes deep IR: refused where it goes too deep.
  std::string sum = "n";
  for (int i = 0; i < 1200; ++i) sum += " + n";
  const ir::parse_error deep_sum = parse_fails(fn("x: R.Tensor((n, " + sum + "), \"float32\")", "R.Object", {"return x"}));
  CHECK(deep_sum.message().find("IR nested too deeply") != std::string::npos);
  CHECK(deep_sum.line() == 4);
  // Constant dimensions that overflow int64 when folded.
  const ir::parse_error overflow = parse_fails(fn("x: R.Tensor((9223372036854775807 + 1,), \"float32\")", "R.Object", {"return x"}));
  CHECK(overflow.message() == "kiln::ir: a shape expression overflows int64: 9223372036854775807 + 1");
  // Up to the limit it parses: 200 levels of parentheses in a dimension.
  CHECK_NOTHROW(ir::parse_module(fn("x: R.Tensor((" + repeat("(", 200) + "3" + repeat(")", 200) + ",), \"float32\")", "R.Object",
                                    {"return x"})));
}
