// SPDX-License-Identifier: Apache-2.0
// Dataflow patterns and the binding rewriter: what matches, what does not (an intermediate used
// elsewhere, a value from another block), names, alternatives, commutativity, predicates, and
// the checks on rules that break the rewriter's contract.
#include <kiln/transform/pattern_rewrite.hpp>

#include "helpers.hpp"

using namespace kiln;
using namespace kiln_test;
using namespace kiln::transform::patterns;
namespace t = kiln::transform;

namespace {

const char* dense_module = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 16), "float32"), b: R.Tensor((16,), "float32")) -> R.Tensor((4, 16), "float32"):
        with R.dataflow():
            lv: R.Tensor((4, 16), "float32") = R.matmul(x, w)
            lv1: R.Tensor((4, 16), "float32") = R.add(b, lv)
            gv: R.Tensor((4, 16), "float32") = R.nn.relu(lv1)
            R.output(gv)
        return gv
)";

/// A scope over one block of `f`'s body: every plain binding of its first block is a producer.
struct block_scope final : t::match_scope {
  std::unordered_map<const ir::var_node*, const ir::binding*> bound;
  std::unordered_map<const ir::var_node*, std::size_t> used;
  explicit block_scope(const ir::function& f) {
    auto& seq = static_cast<const ir::seq_expr_node&>(*f->body);
    for (auto& b : seq.blocks[0].bindings) bound[b.variable.get()] = &b;
    ir::post_order_visit(f->body, [&](const ir::expr& e) {
      if (auto* v = ir::dyn_cast<ir::var_node>(e)) ++used[v];
    });
  }
  const ir::binding* producer(const ir::var_node& v) const override {
    auto it = bound.find(&v);
    return it == bound.end() ? nullptr : it->second;
  }
  std::size_t uses(const ir::var_node& v) const override {
    auto it = used.find(&v);
    return it == used.end() ? 0 : it->second;
  }
};

/// The value of the last binding of the first block of `main`.
ir::expr last_value(const ir::ir_module& m) {
  auto f = ir::ref_cast<ir::function_node>(m->lookup("main"));
  return static_cast<const ir::seq_expr_node&>(*f->body).blocks[0].bindings.back().value;
}

}  // namespace

TEST_CASE("patterns print as what they match") {
  const t::pattern dense = is_op("add")(is_op("matmul")("x", "w"), wildcard("b")).commutative();
  CHECK(dense.to_string() == "add(matmul(x, w), b) commutative");
  CHECK(is_op("nn.relu")(dense).has_dtype(dtype::float32).named("out").to_string() == "nn.relu(add(matmul(x, w), b) commutative) as out : float32");
  CHECK((is_op("exp") | is_op("log"))(wildcard()).to_string() == "(exp(*) | log(*))");
  CHECK(is_elementwise().has_rank(2).has_shape({4, -1}).to_string() == "<elementwise> : rank 2, shape (4, ?)");
  CHECK(is_op("nn.softmax").has_attr("axis", std::int64_t{1}).to_string() == "nn.softmax : axis=1");
  CHECK(is_const().to_string() == "const");
  CHECK(message_of([] { (void)wildcard("x")(wildcard()); }) == "kiln::transform::pattern: only an operator pattern (is_op) takes operands, not x");
  CHECK(message_of([] { (void)is_op("exp").commutative(); }) ==
        "kiln::transform::pattern: commutative() needs an operator pattern with two operands, not exp");
}

TEST_CASE("a pattern looks through the bindings of its block and binds names") {
  const ir::ir_module m = ir::parse_module(dense_module);
  block_scope scope(ir::ref_cast<ir::function_node>(m->lookup("main")));
  const ir::expr root = last_value(m);

  // The add's operands are (b, lv): only the commutative pattern matches.
  const t::pattern ordered = is_op("nn.relu")(is_op("add")(is_op("matmul")("x", "w"), "b"));
  CHECK_FALSE(ordered.match(root, scope));
  const t::pattern dense = is_op("nn.relu")(is_op("add")(is_op("matmul")("x", "w").named("product"), "b").commutative());
  const auto r = dense.match(root, scope);
  REQUIRE(r);
  CHECK(ir::dyn_cast<ir::var_node>(r->operator[]("x"))->name_hint == "x");
  CHECK(ir::dyn_cast<ir::var_node>(r->operator[]("b"))->name_hint == "b");
  CHECK(ir::isa<ir::call_node>(r->operator[]("product")));
  REQUIRE(r->intermediates().size() == 2);
  CHECK(r->intermediates()[0]->variable->name_hint == "lv1");
  CHECK(r->intermediates()[1]->variable->name_hint == "lv");
  CHECK(message_of([&] { (void)r->operator[]("y"); }) ==
        "kiln::transform::match_result: no expression is bound to 'y' (bound: b, product, w, x)");

  // Without a scope nothing is looked through; a wildcard binds the variable itself.
  CHECK_FALSE(dense.match(root));
  const auto shallow = is_op("nn.relu")("v").match(root);
  REQUIRE(shallow);
  CHECK(ir::dyn_cast<ir::var_node>(shallow->operator[]("v"))->name_hint == "lv1");
  CHECK(shallow->intermediates().empty());

  // Predicates, alternatives, a name bound twice.
  CHECK(is_op("nn.relu").has_dtype(dtype::float32).has_shape({4, 16}).match(root, scope));
  CHECK_FALSE(is_op("nn.relu").has_dtype(dtype::float64).match(root, scope));
  CHECK((is_op("exp") | is_op("nn.relu"))("v").match(root, scope));
  CHECK_FALSE(is_op("nn.relu")(is_op("add")("v", "v")).match(root, scope));
  CHECK(is_op("nn.relu")(is_op("add")(is_var(), wildcard())).match(root, scope));   // b is a parameter
  CHECK_FALSE(is_op("nn.relu")(is_op("add")(wildcard(), is_var())).match(root, scope));  // lv has a producer
}

TEST_CASE("an intermediate used outside the match makes the match fail") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        with R.dataflow():
            lv: R.Tensor((4,), "float32") = R.exp(x)
            lv1: R.Tensor((4,), "float32") = R.negative(lv)
            gv: R.Tensor((4,), "float32") = R.negative(lv1)
            gv1: R.Tensor((4,), "float32") = R.add(lv, lv)
            lv5: R.Tensor((4,), "float32") = R.exp(x)
            gv2: R.Tensor((4,), "float32") = R.add(lv5, lv5)
            R.output(gv, gv1, gv2)
        return (gv, gv1, gv2)
)");
  block_scope scope(ir::ref_cast<ir::function_node>(m->lookup("main")));
  auto& bs = static_cast<const ir::seq_expr_node&>(*ir::ref_cast<ir::function_node>(m->lookup("main"))->body).blocks[0].bindings;
  CHECK(is_op("negative")(is_op("negative")("x")).match(bs[2].value, scope));            // lv1 is used only here
  CHECK_FALSE(is_op("negative")(is_op("negative")(is_op("exp")("x"))).match(bs[2].value, scope));  // lv is used by gv1 too
  // Both uses of lv5 inside one match: it may go.
  CHECK(is_op("add")(is_op("exp")("x"), is_op("exp")("x")).match(bs[5].value, scope));
  CHECK_FALSE(is_op("add")(is_op("exp")("x"), is_op("exp")("x")).match(bs[3].value, scope));
}

TEST_CASE("rewrite_bindings replaces the matched binding and removes its intermediates, last binding first") {
  const t::rewrite_rule double_negation{"double_negation", is_op("negative")(is_op("negative")("x")),
                                        [](const t::match_result& r, t::rewrite_context&) { return r["x"]; }};
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        a: R.Tensor((4,), "float32") = R.negative(x)
        b: R.Tensor((4,), "float32") = R.negative(a)
        d: R.Tensor((4,), "float32") = R.negative(b)
        e: R.Tensor((4,), "float32") = R.negative(d)
        if c:
            f: R.Tensor((4,), "float32") = R.negative(e)
            g: R.Tensor((4,), "float32") = R.negative(f)
        else:
            g: R.Tensor((4,), "float32") = R.negative(e)
        h: R.Tensor((4,), "float32") = R.negative(g)
        return h
)");
  t::rewrite_counts counts;
  const ir::ir_module out = t::rewrite_bindings(m, {double_negation}, &counts);
  CHECK(counts["double_negation"] == 3);
  // From the end of the block: h's operand comes from an `if`, which is never looked through;
  // inside the then-branch g = -(-e); then e = -(-b) removes d, and b = -(-x) removes a.
  CHECK(text_of(out) == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        b: R.Tensor((4,), "float32") = x
        e: R.Tensor((4,), "float32") = b
        if c:
            g: R.Tensor((4,), "float32") = e
        else:
            g: R.Tensor((4,), "float32") = R.negative(e)
        h: R.Tensor((4,), "float32") = R.negative(g)
        return h
)");
  CHECK(ir::verify(out).empty());
}

TEST_CASE("a rule that removes a value used elsewhere, or keeps using what it removes, is a usage error") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        a: R.Tensor((4,), "float32") = R.exp(x)
        b: R.Tensor((4,), "float32") = R.log(a)
        return (a, b)
)");
  const t::rewrite_rule greedy{"greedy", is_op("log")(wildcard("v")), [](const t::match_result& r, t::rewrite_context& ctx) {
                                 ctx.absorb(*ir::dyn_cast<ir::var_node>(r["v"]));
                                 return ir::call_op("exp", {r["v"]});
                               }};
  CHECK(message_of([&] { (void)t::rewrite_bindings(m, {greedy}); }) ==
        "kiln::transform::rewrite_bindings: rule 'greedy' removes 'a', which is used outside the match");
  const t::rewrite_rule bogus{"bogus", is_op("exp")(wildcard("v")), [](const t::match_result& r, t::rewrite_context& ctx) {
                                ctx.absorb(*ir::dyn_cast<ir::var_node>(r["v"]));
                                return ir::expr();
                              }};
  CHECK(message_of([&] { (void)t::rewrite_bindings(m, {bogus}); }) ==
        "kiln::transform::rewrite_context: 'x' has no binding this rewrite can remove");
}
