// SPDX-License-Identifier: Apache-2.0
// Concatenations run in place by static_plan_block_memory: the kernels producing a concatenation's
// inputs write into its slices, and the concatenation is not run. Where the planner does it and
// where it leaves a copy, the offsets it gives, and that the programs compute what the reference
// evaluator does, in bytecode and compiled mode.
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>
#include <kiln/transform/default_pipeline.hpp>
#include <kiln/vm/kernels.hpp>

#include "helpers.hpp"

using namespace kiln_test;
namespace t = kiln::transform;

namespace {

/// A DenseNet block of three layers at batch `b`: each layer reads the concatenation of all the
/// features before it (a 3x3 convolution after a ReLU, a 3x3 one, a 1x1 one reading the
/// concatenation itself), and the block's result is the concatenation of all four.
std::string dense_block(int b) {
  const std::string n = std::to_string(b);
  auto t4 = [&](int c) { return "R.Tensor((" + n + ", " + std::to_string(c) + ", 16, 16), \"float32\")"; };
  return R"(@I.ir_module
class Module:
    @R.function
    def main(x: )" + t4(8) + ") -> " + t4(14) + R"(:
        with R.dataflow():
            f0: )" + t4(8) + R"( = R.nn.relu(x)
            f1: )" + t4(2) + " = R.nn.conv2d(f0, " + conv_weight_text(2, 8, 3, 3) + R"(, padding=[1, 1, 1, 1])
            c1: )" + t4(10) + R"( = R.concat((f0, f1), axis=1)
            r1: )" + t4(10) + R"( = R.nn.relu(c1)
            f2: )" + t4(2) + " = R.nn.conv2d(r1, " + conv_weight_text(2, 10, 3, 3) + R"(, padding=[1, 1, 1, 1])
            c2: )" + t4(12) + R"( = R.concat((f0, f1, f2), axis=1)
            f3: )" + t4(2) + " = R.nn.conv2d(c2, " + conv_weight_text(2, 12, 1, 1) + R"()
            c3: )" + t4(14) + R"( = R.concat((f0, f1, f2, f3), axis=1)
            gv: )" + t4(14) + R"( = R.multiply(c3, R.const(0.5, "float32"))
            R.output(gv)
        return gv
)";
}

/// How many times `text` contains `part`.
std::size_t count(const std::string& text, std::string_view part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

/// The function after memory planning, as text.
std::string planned(std::string_view src) {
  using upto_plan = kiln::sequential<t::legalize_ops, t::to_non_dataflow, t::call_tir_rewrite, t::static_plan_block_memory>;
  const ir::ir_module out = kiln::run(upto_plan{}, ir::parse_module(src));
  for (const ir::diagnostic& d : ir::verify(out)) FAIL_CHECK("not well formed after planning: " << d.to_string());
  return ir::print(out);
}

std::vector<vm::value> random_input(const ir::ir_module& m) { return arguments_for(m, "main", {}, 7); }

}  // namespace

TEST_CASE("concat in place: a DenseNet block's features are written once into one buffer, every concatenation a prefix of it") {
  const std::string out = planned(dense_block(1));
  CHECK(count(out, "kernels.concat") == 0);
  // Each feature at its channel offset (1 KiB per channel) from c3's start; c1 and c2 at c3's start.
  const auto offset_of = [&](const std::string& var) -> std::int64_t {
    const std::size_t at = out.find(var + ": R.Tensor(");
    REQUIRE(at != std::string::npos);
    const std::size_t line_end = out.find('\n', at);
    const std::string line = out.substr(at, line_end - at);
    REQUIRE(contains(line, "R.memory.alloc_tensor(storage"));
    const std::size_t o = line.find("offset=");
    return o == std::string::npos ? 0 : std::stoll(line.substr(o + 7));
  };
  const std::int64_t base = offset_of("c3");
  CHECK(offset_of("f0") == base);
  CHECK(offset_of("f1") == base + 8 * 1024);
  CHECK(offset_of("f2") == base + 10 * 1024);
  CHECK(offset_of("f3") == base + 12 * 1024);
  CHECK(offset_of("c1") == base);
  CHECK(offset_of("c2") == base);
  // r1 lives while f0 and f1 are in the block: it lies outside it.
  const std::int64_t r1 = offset_of("r1");
  CHECK((r1 + 10 * 1024 <= base || r1 >= base + 14 * 1024));

  const ir::ir_module m = ir::parse_module(dense_block(1));
  check_against_evaluator(m, "main", random_input(m), 2, 1e-6);
  // Unplanned, the copies: the same results.
  check_against_evaluator(m, "main", random_input(m), 0, 1e-6, modes::bytecode);
}

TEST_CASE("concat in place: at batch 2 the slices along the channels are not contiguous, and the concatenations stay copies") {
  CHECK(count(planned(dense_block(2)), "kernels.concat") == 3);
  const ir::ir_module m = ir::parse_module(dense_block(2));
  check_against_evaluator(m, "main", random_input(m), 2, 1e-6);
}

TEST_CASE("concat in place: branches written into one result (GoogLeNet's), a concatenation of a concatenation, the first axis") {
  const std::string src = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3, 6, 5), "float32"), y: R.Tensor((4, 7), "float32")) -> R.Tuple(R.Tensor((1, 12, 6, 5), "float32"), R.Tensor((9, 7), "float32")):
        with R.dataflow():
            a: R.Tensor((1, 4, 6, 5), "float32") = R.nn.conv2d(x, )" + conv_weight_text(4, 3, 1, 1) + R"()
            b: R.Tensor((1, 5, 6, 5), "float32") = R.nn.conv2d(x, )" + conv_weight_text(5, 3, 3, 3) + R"(, padding=[1, 1, 1, 1])
            ab: R.Tensor((1, 9, 6, 5), "float32") = R.concat((a, b), axis=1)
            c: R.Tensor((1, 3, 6, 5), "float32") = R.nn.max_pool2d(x, pool_size=[3, 3], strides=[1, 1], padding=[1, 1, 1, 1])
            abc: R.Tensor((1, 12, 6, 5), "float32") = R.concat((ab, c), axis=-3)
            gv: R.Tensor((1, 12, 6, 5), "float32") = R.nn.relu(abc)
            p: R.Tensor((4, 7), "float32") = R.exp(y)
            q: R.Tensor((5, 7), "float32") = R.concat((R.negative(y), R.const([[1, 2, 3, 4, 5, 6, 7]], "float32")), axis=0)
            pq: R.Tensor((9, 7), "float32") = R.concat((p, q), axis=0)
            gw: R.Tensor((9, 7), "float32") = R.sqrt(R.abs(pq))
            R.output(gv, gw)
        return (gv, gw)
)";
  const std::string out = planned(src);
  // ab, abc and pq run in place; the concatenation with a constant stays a copy.
  CHECK(count(out, "kernels.concat") == 1);
  const ir::ir_module m = ir::parse_module(src);
  check_against_evaluator(m, "main", random_input(m), 2, 1e-6);
}

TEST_CASE("concat in place: a copy where placing in place would contradict itself, and where a tensor is not the planner's") {
  const char* src = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 4, 3, 3), "float32")) -> R.Tuple(R.Tensor((1, 8, 3, 3), "float32"), R.Tensor((1, 8, 3, 3), "float32"), R.Tensor((1, 8, 3, 3), "float32"), R.Tensor((1, 8, 3, 3), "float32")):
        with R.dataflow():
            a: R.Tensor((1, 4, 3, 3), "float32") = R.exp(x)
            b: R.Tensor((1, 4, 3, 3), "float32") = R.negative(x)
            e: R.Tensor((1, 4, 3, 3), "float32") = R.abs(x)
            ab: R.Tensor((1, 8, 3, 3), "float32") = R.concat((a, b), axis=1)
            ba: R.Tensor((1, 8, 3, 3), "float32") = R.concat((b, a), axis=1)
            ae: R.Tensor((1, 8, 3, 3), "float32") = R.concat((a, e), axis=1)
            aa: R.Tensor((1, 8, 3, 3), "float32") = R.concat((a, a), axis=1)
            xa: R.Tensor((1, 8, 3, 3), "float32") = R.concat((x, a), axis=1)
            r1: R.Tensor((1, 8, 3, 3), "float32") = R.add(ab, ba)
            r2: R.Tensor((1, 8, 3, 3), "float32") = R.add(ae, ab)
            r3: R.Tensor((1, 8, 3, 3), "float32") = R.add(aa, xa)
            ret: R.Tensor((1, 8, 3, 3), "float32") = R.concat((b, e), axis=1)
            R.output(r1, r2, r3, ret)
        return (r1, r2, r3, ret)
)";
  // ab runs in place (a and b in its slices); then ba would put a and b the other way round, ae
  // would put e over b's bytes (and ab is read after ae), aa holds a twice, xa holds a parameter,
  // ret is returned.
  const std::string out = planned(src);
  CHECK(count(out, "kernels.concat") == 5);
  CHECK_FALSE(contains(out, R"(R.call_packed("kernels.concat", (a, b))"));
  const ir::ir_module m = ir::parse_module(src);
  check_against_evaluator(m, "main", random_input(m), 2, 0);
}

TEST_CASE("concat in place: the config option kiln.static_plan_block_memory.concat_in_place = false keeps every concatenation a copy") {
  kiln::pass_context ctx;
  ctx.set_config(t::concat_in_place_option(), false);
  kiln::pass_context_scope scope(ctx);
  CHECK(count(planned(dense_block(1)), "kernels.concat") == 3);
  kiln::pass_context text;
  text.set_config_from_text("kiln.static_plan_block_memory.concat_in_place", "false");
  kiln::pass_context_scope text_scope(text);
  CHECK(count(planned(dense_block(1)), "kernels.concat") == 3);
}
