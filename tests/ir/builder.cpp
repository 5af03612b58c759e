// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

using namespace kiln_test;

TEST_CASE("emit names dataflow variables lv and outputs gv") {
  auto x = ir::make_var("x", f32({2}));
  ir::block_builder bb;
  ir::var a, b, c;
  bb.function("f", {x}, [&] {
    bb.dataflow([&] {
      a = bb.emit(ir::call_op("exp", {x}));
      b = bb.emit_output(ir::call_op("log", {a}));
    });
    c = bb.emit(ir::call_op("tanh", {b}));
    return c;
  });
  CHECK(a->is_dataflow());
  CHECK(a->name_hint == "lv");
  CHECK_FALSE(b->is_dataflow());
  CHECK(b->name_hint == "gv");
  CHECK_FALSE(c->is_dataflow());
  auto& seq = static_cast<const ir::seq_expr_node&>(*static_cast<const ir::function_node&>(*bb.module()->lookup("f")).body);
  REQUIRE(seq.blocks.size() == 2);
  CHECK(seq.blocks[0].dataflow);
  CHECK_FALSE(seq.blocks[1].dataflow);
  CHECK(ir::verify(bb.module()).empty());
}

TEST_CASE("functions built earlier can be called by name") {
  ir::block_builder bb;
  auto x = ir::make_var("x", f32({3}));
  bb.function("inner", {x}, [&] { return bb.emit(ir::call_op("exp", {x})); });
  auto y = ir::make_var("y", f32({3}));
  bb.function("outer", {y}, [&] { return bb.emit(bb.call("inner", {y})); });
  CHECK(bb.module()->size() == 2);
  CHECK(ir::to_string(bb.module()->lookup("outer")->signature()) == "R.Callable((R.Tensor((3,), \"float32\"),), R.Tensor((3,), \"float32\"))");
  CHECK(message_of<kiln::usage_error>([&] { bb.call("missing", {y}); }) == "kiln::ir::block_builder: the module has no function named 'missing'");
}

TEST_CASE("emit_match_cast introduces new size variables") {
  ir::block_builder bb;
  auto o = ir::make_var("o", ir::object_type());
  auto k = ir::make_size_var("k");
  bb.function("f", {o}, [&] { return bb.emit_match_cast(o, f32({k, dim(2)}), "t"); });
  CHECK(ir::verify(bb.module()).empty());
  auto s = ir::make_var("s", ir::shape_type_of_rank(2));
  CHECK(message_of<ir::type_error>([&] { bb.function("g", {s}, [&] { return bb.emit_match_cast(s, f32({2})); }); }).find("can never succeed") !=
        std::string::npos);
}

TEST_CASE("misuse of the builder is a usage error and leaves it usable") {
  ir::block_builder bb;
  auto x = ir::make_var("x", f32({2}));
  CHECK(message_of<kiln::usage_error>([&] { bb.emit(x); }) == "kiln::ir::block_builder: emit outside of a function");
  CHECK(message_of<kiln::usage_error>([&] { bb.end_dataflow(); }) == "kiln::ir::block_builder: end_dataflow without an open dataflow block");
  bb.begin_function("f", {x});
  CHECK(message_of<kiln::usage_error>([&] { bb.begin_function("g", {x}); }) == "kiln::ir::block_builder: begin_function('g') inside function 'f'");
  CHECK(message_of<kiln::usage_error>([&] { bb.emit_output(x); }) == "kiln::ir::block_builder: emit_output is only meaningful inside a dataflow block");
  bb.begin_dataflow();
  CHECK(message_of<kiln::usage_error>([&] { bb.begin_dataflow(); }) == "kiln::ir::block_builder: dataflow blocks cannot nest");
  CHECK(message_of<kiln::usage_error>([&] { bb.end_function(x); }) == "kiln::ir::block_builder: end_function inside an open dataflow block");
  bb.end_dataflow();
  bb.end_function(x);
  CHECK(bb.module()->size() == 1);
}

TEST_CASE("an exception inside a scope discards the scope") {
  ir::block_builder bb;
  auto x = ir::make_var("x", f32({2}));
  CHECK_THROWS_AS(bb.function("bad", {x}, [&]() -> ir::expr { return bb.emit(ir::call_op("matmul", {x, ir::make_var("w", f32({3, 3}))})); }),
                  ir::type_error);
  CHECK_FALSE(bb.in_function());
  CHECK(bb.module()->size() == 0);
  bb.begin_function("f", {x});
  CHECK_THROWS_AS(bb.dataflow([&] { bb.emit(ir::call_op("exp", {x})); throw kiln::error("boom"); }), kiln::error);
  CHECK_FALSE(bb.in_dataflow());
  auto g = bb.end_function(bb.emit(ir::call_op("exp", {x})));
  CHECK(g->name == "f");
  auto& seq = static_cast<const ir::seq_expr_node&>(*static_cast<const ir::function_node&>(*bb.module()->lookup("f")).body);
  CHECK(seq.blocks.size() == 1);  // the failed dataflow block left nothing behind
  CHECK(seq.blocks[0].bindings.size() == 1);
}
