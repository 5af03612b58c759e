// SPDX-License-Identifier: Apache-2.0
// IR built through the API is at most kiln::ir::max_ir_depth deep: deeper nodes are refused when
// they are made, so every recursive algorithm over IR that exists stays within its stack.
#include "helpers.hpp"

#include <kiln/ir/printer.hpp>
#include <kiln/ir/structural_equal.hpp>
#include <kiln/ir/verifier.hpp>
#include <kiln/ir/visitor.hpp>

using namespace kiln_test;

namespace {

/// `x` wrapped in tuples until the result is `depth` deep.
ir::expr nested_tuple(const ir::expr& x, std::uint32_t depth) {
  ir::expr e = x;
  while (e->depth() < depth) e = ir::make_tuple({e});
  return e;
}

/// fn(x) -> nested_tuple(x, depth)
ir::ir_module module_returning(std::uint32_t depth) {
  ir::var x = ir::make_var("x", ir::tensor_type({3}, dtype::float32));
  ir::expr body = ir::make_seq({}, nested_tuple(x, depth));
  const ir::function f = ir::make_function({x}, body, body->checked_type, {});
  return ir::make_module({{ir::make_global_var("main", f->signature()), f}});
}

}  // namespace

TEST_CASE("a node deeper than max_ir_depth is refused when it is made, with the limit in the message") {
  ir::expr x = ir::make_var("x", ir::tensor_type({3}, dtype::float32));
  CHECK(x->depth() == 3);  // var -> tensor type -> dimension
  ir::expr deepest = nested_tuple(x, ir::max_ir_depth);
  CHECK(deepest->depth() == ir::max_ir_depth);
  const std::string msg = message_of([&] { ir::make_tuple({deepest}); });
  CHECK(msg == "kiln::ir: IR nested too deeply: this node would be 1001 levels deep (limit 1000, kiln::ir::max_ir_depth); "
               "bind inner values to variables instead of nesting them");
  CHECK_THROWS_AS(ir::make_tuple({deepest}), ir::depth_error);
  // Types and dimensions count too: a tuple type, and a chain of sums of size variables.
  ir::type t = ir::object_type();
  while (t->depth() < ir::max_ir_depth) t = ir::tuple_type({t});
  CHECK_THROWS_AS(ir::tuple_type({t}), ir::depth_error);
  CHECK_THROWS_AS(ir::make_var("v", t), ir::depth_error);  // a variable is deeper than its type
  ir::prim_expr n = ir::make_size_var("n"), m = ir::make_size_var("m"), d = n;
  int terms = 0;
  CHECK(message_of([&] {
          for (;; ++terms) d = (terms % 2 ? d + n : d * m);
        }).find("limit 1000") != std::string::npos);
  CHECK(terms == 999);
  CHECK(d->depth() == ir::max_ir_depth);
}

TEST_CASE("the recursive algorithms handle IR at the depth limit") {
  const std::uint32_t depth = ir::max_ir_depth - 3;  // seq, function and its tuple return type on top
  const ir::ir_module m = module_returning(depth), same = module_returning(depth);
  CHECK(ir::verify(m).empty());
  CHECK(ir::structural_equal(m, same));
  CHECK(ir::structural_hash(m) == ir::structural_hash(same));
  const std::string text = ir::print(m);
  CHECK(text.find(std::string(depth - 4, '(')) != std::string::npos);
  // The text nests deeper than the parser's limit: refused there, cleanly.
  CHECK(message_of([&] { ir::parse_module(text); }).find("nested too deeply (limit 256)") != std::string::npos);
  std::size_t visited = 0;
  ir::post_order_visit(static_cast<const ir::function_node&>(*m->functions()[0].func).body, [&](const ir::expr&) { ++visited; });
  CHECK(visited == depth - 3 + 2);  // tuples, the variable and the seq
  // A mutator that renames the innermost variable rebuilds every level.
  struct rename final : ir::expr_mutator {
    ir::var to = ir::make_var("y", ir::tensor_type({3}, dtype::float32));
    ir::expr mutate_var(const ir::var_node&, const ir::expr&) override { return to; }
  } r;
  const ir::function f = ir::ref_cast<ir::function_node>(m->functions()[0].func);
  const ir::expr body = r.mutate(f->body);
  CHECK(body != f->body);
  CHECK(body->depth() == f->body->depth());
}
