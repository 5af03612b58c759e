// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

using namespace kiln_test;

namespace {
/// Wraps `blocks` and `body` into a module with one function `main(params)`.
ir::ir_module module_of(std::vector<ir::var> params, std::vector<ir::binding_block> blocks, ir::expr body, ir::ir_module base = ir::make_module()) {
  ir::expr seq = ir::make_ref<ir::seq_expr_node>(std::move(blocks), body, body->checked_type);
  auto f = ir::make_ref<ir::function_node>(std::move(params), seq, body->checked_type, ir::attr_map{});
  return ir::with_function(base, "main", f);
}
std::vector<std::string> problems(const ir::ir_module& m) {
  std::vector<std::string> out;
  for (auto& d : ir::verify(m)) out.push_back(d.to_string());
  return out;
}
}  // namespace

TEST_CASE("the corpus is well formed") {
  for (auto& entry : corpus()) {
    const auto& [name_, m] = entry;
    const std::string& name = name_;
    CAPTURE(name);
    CHECK(ir::verify(m).empty());
    CHECK_NOTHROW(ir::verify_or_throw(m));
  }
}

TEST_CASE("undefined and doubly defined variables") {
  auto x = ir::make_var("x", f32({2}));
  auto ghost = ir::make_var("ghost", f32({2}));
  auto y = ir::make_var("y", f32({2}));
  CHECK(problems(module_of({x}, {{false, {{y, ir::call_op("add", {x, ghost}), {}}}}}, y)) ==
        std::vector<std::string>{"in function 'main', binding 'y': variable 'ghost' is used but not defined"});
  CHECK(problems(module_of({x}, {{false, {{y, x, {}}, {y, x, {}}}}}, y)) ==
        std::vector<std::string>{"in function 'main', binding 'y': variable 'y' is defined twice"});
  CHECK(problems(module_of({x, x}, {}, x)) == std::vector<std::string>{"in function 'main', signature: parameter 'x' appears twice"});
}

TEST_CASE("dataflow variables stay inside their dataflow block") {
  auto x = ir::make_var("x", f32({2}));
  auto lv = ir::make_dataflow_var("lv", f32({2}));
  auto gv = ir::make_var("gv", f32({2}));
  CHECK(problems(module_of({x}, {{true, {{lv, x, {}}, {gv, lv, {}}}}}, lv)) ==
        std::vector<std::string>{"in function 'main', return: dataflow variable 'lv' is used outside its dataflow block"});
  CHECK(problems(module_of({x}, {{false, {{lv, x, {}}}}}, x)) ==
        std::vector<std::string>{"in function 'main', binding 'lv': dataflow variable 'lv' is bound outside a dataflow block"});
}

TEST_CASE("recorded types must match what operators infer") {
  auto x = ir::make_var("x", f32({2, 3}));
  auto y = ir::make_var("y", f32({3, 2}));
  auto wrong = ir::make_call(ir::op_registry::global().get("exp"), {x}, {}, {}, f32({3, 2}));
  CHECK(problems(module_of({x}, {{false, {{y, wrong, {}}}}}, y)) ==
        std::vector<std::string>{"in function 'main', binding 'y': the call to R.exp records type R.Tensor((3, 2), \"float32\"), but its operands give R.Tensor((2, 3), \"float32\")"});
  auto bad_args = ir::make_call(ir::op_registry::global().get("matmul"), {x, x}, {}, {}, f32({2, 3}));
  auto z = ir::make_var("z", f32({2, 3}));
  auto p = problems(module_of({x}, {{false, {{z, bad_args, {}}}}}, z));
  REQUIRE(p.size() == 1);
  CHECK(p[0].find("in function 'main', binding 'z': matmul: attribute") == std::string::npos);
  CHECK(p[0].find("matmul: reduction dimensions differ") != std::string::npos);
  auto mistyped = ir::make_var("m", f32({7}));
  CHECK(problems(module_of({x}, {{false, {{mistyped, x, {}}}}}, x)) ==
        std::vector<std::string>{"in function 'main', binding 'm': variable 'm' is declared R.Tensor((7,), \"float32\"), but its value has type R.Tensor((2, 3), \"float32\")"});
}

TEST_CASE("return types and symbolic variables") {
  auto n = ir::make_size_var("n");
  auto x = ir::make_var("x", f32({2}));
  auto seq = ir::make_seq({}, x);
  auto f = ir::make_ref<ir::function_node>(std::vector<ir::var>{x}, seq, f32({3}), ir::attr_map{});
  CHECK(problems(ir::with_function(ir::make_module(), "main", f)) ==
        std::vector<std::string>{"in function 'main', return: the body has type R.Tensor((2,), \"float32\"), which does not match the declared return type R.Tensor((3,), \"float32\")"});
  auto s = ir::make_var("s", ir::shape_type_of_rank(1));
  CHECK(problems(module_of({x}, {{false, {{s, ir::make_shape_expr({n}), {}}}}}, x)) ==
        std::vector<std::string>{"in function 'main', binding 's': symbolic variable 'n' is used but not defined (by a parameter type or a match_cast)"});
}

TEST_CASE("calls must name functions the module has, with current signatures") {
  auto x = ir::make_var("x", f32({2}));
  auto y = ir::make_var("y", f32({2}));
  auto ghost = ir::make_global_var("ghost", ir::func_type({f32({2})}, f32({2})));
  CHECK(problems(module_of({x}, {{false, {{y, ir::call_function(ghost, {x}), {}}}}}, y)) ==
        std::vector<std::string>{"in function 'main', binding 'y': refers to function 'ghost', which is not in the module"});
  // a callee whose signature changed after the call was built
  auto p = ir::make_var("p", f32({2}));
  ir::ir_module base = ir::with_function(ir::make_module(), "g", ir::make_function({p}, p));
  auto call = ir::call_function(base->get_global_var("g"), {x});
  auto q = ir::make_var("q", f32({2}));
  ir::ir_module m = module_of({x}, {{false, {{y, call, {}}}}}, y, ir::with_function(base, "g", ir::make_function({q}, ir::call_op("sum", {q}))));
  CHECK(problems(m) == std::vector<std::string>{"in function 'main', binding 'y': the call to 'g' records type R.Tensor((2,), \"float32\"), but the function returns R.Tensor((), \"float32\")"});
}

TEST_CASE("kernels are called through call_tir and only call operators") {
  auto a = ir::make_var("a", f32({2}));
  auto o = ir::make_var("o", f32({2}));
  ir::ir_module base = ir::with_function(ir::make_module(), "k", ir::make_prim_func({a, o}, 1));
  auto x = ir::make_var("x", f32({2}));
  auto y = ir::make_var("y", f32({2}));
  auto direct = ir::make_call(base->get_global_var("k"), {x}, {}, {}, f32({2}));
  CHECK(problems(module_of({x}, {{false, {{y, direct, {}}}}}, y, base)) ==
        std::vector<std::string>{"in function 'main', binding 'y': kernel function 'k' must be called through R.call_tir"});
  auto p = ir::make_var("p", f32({2}));
  ir::ir_module with_fn = ir::with_function(ir::make_module(), "f", ir::make_function({p}, p));
  auto tir = ir::make_call(ir::op_registry::global().get("call_tir"), {with_fn->get_global_var("f"), ir::make_tuple({x})}, {}, {f32({2})}, f32({2}));
  CHECK(problems(module_of({x}, {{false, {{y, tir, {}}}}}, y, with_fn)) ==
        std::vector<std::string>{"in function 'main', binding 'y': R.call_tir target 'f' is not a kernel function (prim_func)"});
  auto kernel_body = ir::make_seq({}, ir::call_extern("f", {a}, f32({2})));
  ir::ir_module bad_kernel = ir::with_function(ir::make_module(), "k", ir::make_prim_func({a, o}, 1, kernel_body));
  CHECK(problems(bad_kernel) == std::vector<std::string>{"in function 'k', return: a kernel function may only call operators"});
}

TEST_CASE("if must be bound, and not inside a dataflow block") {
  auto c = ir::make_var("c", ir::prim_type(dtype::bool_));
  auto x = ir::make_var("x", f32({2}));
  auto i = ir::make_if(c, x, x);
  auto s = ir::make_ref<ir::seq_expr_node>(std::vector<ir::binding_block>{}, i, i->checked_type);
  auto f = ir::make_ref<ir::function_node>(std::vector<ir::var>{c, x}, s, i->checked_type, ir::attr_map{});
  CHECK(problems(ir::with_function(ir::make_module(), "main", f)) ==
        std::vector<std::string>{"in function 'main', return: an if expression must be bound to a variable"});
  auto lv = ir::make_dataflow_var("lv", f32({2}));
  CHECK(problems(module_of({c, x}, {{true, {{lv, i, {}}}}}, x)) ==
        std::vector<std::string>{"in function 'main', binding 'lv': an if expression is not allowed inside a dataflow block"});
}

TEST_CASE("verify_or_throw lists every problem") {
  auto x = ir::make_var("x", f32({2}));
  auto g1 = ir::make_var("g1", f32({2}));
  auto g2 = ir::make_var("g2", f32({2}));
  auto y = ir::make_var("y", f32({2}));
  ir::ir_module m = module_of({x}, {{false, {{y, ir::make_tuple({g1, g2}), {}}}}}, x);
  try {
    ir::verify_or_throw(m);
    FAIL("expected a verify_error");
  } catch (const ir::verify_error& e) {
    CHECK(e.diagnostics().size() == 3);  // two undefined variables and the mistyped binding
    CHECK(std::string(e.what()).rfind("kiln::ir::verify: the module is not well formed (3 problems):\n  in function 'main', binding 'y': variable 'g1' is used but not defined", 0) == 0);
  }
}
