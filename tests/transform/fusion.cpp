// SPDX-License-Identifier: Apache-2.0
// The fusion passes: fuse_epilogue (matmul / conv2d + elementwise tree, transposes absorbed) and
// fuse_elementwise. Each case checks the IR the pass makes, and that the fused module computes
// what the unfused one does (the reference evaluator on random inputs: the same operators per
// element, so equal up to the order of a few roundings), including the cases where fusion must
// not happen.
#include <kiln/interpreter/reference_evaluator.hpp>
#include <kiln/kernels/elementwise.hpp>
#include <kiln/transform/default_pipeline.hpp>

#include "helpers.hpp"

#include <random>

using namespace kiln;
using namespace kiln_test;
namespace t = kiln::transform;

namespace {

using fuse_all = kiln::sequential<t::fuse_epilogue, t::fuse_elementwise>;

/// Random arguments for `main` (static shapes; float tensors in [-2, 2], bools random).
std::vector<vm::value> random_arguments(const ir::ir_module& m, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<vm::value> args;
  for (auto& p : ir::ref_cast<ir::function_node>(m->lookup("main"))->params) {
    auto* tt = ir::dyn_cast<ir::tensor_type_node>(p->checked_type);
    REQUIRE(tt);
    runtime::shape_vector shape;
    for (int i = 0; i < tt->ndim; ++i) shape.push_back(*tt->static_dim(i));
    runtime::tensor x = runtime::tensor::empty(shape, tt->dt);
    std::vector<double> values(std::size_t(x.numel()));
    for (auto& v : values) v = tt->dt == dtype::bool_ ? double(gen() & 1) : u(gen);
    args.emplace_back(kernels::cast(runtime::tensor::from_values<double>(shape, values), tt->dt));
  }
  return args;
}

double max_abs_difference(const vm::value& a, const vm::value& b) {
  if (a.is_tuple()) {
    double d = 0;
    for (std::size_t i = 0; i < a.as_tuple().size(); ++i) d = std::max(d, max_abs_difference(a.as_tuple()[i], b.as_tuple()[i]));
    return d;
  }
  const auto x = kernels::cast(a.as_tensor(), dtype::float64).to_vector<double>(), y = kernels::cast(b.as_tensor(), dtype::float64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

/// Runs the fusion passes on `text`, checks that the result computes what the input does, and
/// returns the result as text.
std::string fused(std::string_view text, double tolerance = 1e-5) {
  const ir::ir_module in = ir::parse_module(text);
  const std::string out_text = after(fuse_all{}, text);
  const ir::ir_module out = ir::parse_module(out_text);
  for (unsigned seed = 1; seed <= 3; ++seed) {
    const std::vector<vm::value> args = random_arguments(in, seed);
    const vm::value want = kiln::interpreter::reference_evaluator(in).call("main", args);
    const vm::value got = kiln::interpreter::reference_evaluator(out).call("main", args);
    CHECK(max_abs_difference(got, want) <= tolerance);
  }
  return out_text;
}

}  // namespace

TEST_CASE("fuse_elementwise: a chain and a tree become one fused call naming the bindings it replaced") {
  CHECK(fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32"), b: R.Tensor((8,), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            lv: R.Tensor((4, 8), "float32") = R.multiply(x, y)
            lv1: R.Tensor((4, 8), "float32") = R.add(lv, b)
            lv2: R.Tensor((4, 8), "float32") = R.exp(x)
            lv3: R.Tensor((4, 8), "float32") = R.divide(lv1, lv2)
            gv: R.Tensor((4, 8), "float32") = R.clip(lv3, min=-1.5, max=2.0)
            R.output(gv)
        return gv
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32"), b: R.Tensor((8,), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            gv: R.Tensor((4, 8), "float32") = R.call_dps_packed(R.ExternFunc("kernels.fused"), (R.str("(clip (divide (add (multiply x0 x1) x2) (exp x0)) -1.5 2) ; lv lv1 lv2 lv3 gv"), x, y, b), out_sinfo=R.Tensor((4, 8), "float32"))
            R.output(gv)
        return gv
)");
}

TEST_CASE("fuse_elementwise: rank-0 constants become numbers, gelu, relu, sigmoid, float64") {
  CHECK(fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 5), "float64")) -> R.Tensor((3, 5), "float64"):
        with R.dataflow():
            lv: R.Tensor((3, 5), "float64") = R.multiply(x, R.const(0.5, "float64"))
            lv1: R.Tensor((3, 5), "float64") = R.nn.gelu(lv)
            lv2: R.Tensor((3, 5), "float64") = R.nn.gelu(lv1, approximate="tanh")
            lv3: R.Tensor((3, 5), "float64") = R.sigmoid(lv2)
            gv: R.Tensor((3, 5), "float64") = R.nn.relu(lv3)
            R.output(gv)
        return gv
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 5), "float64")) -> R.Tensor((3, 5), "float64"):
        with R.dataflow():
            gv: R.Tensor((3, 5), "float64") = R.call_dps_packed(R.ExternFunc("kernels.fused"), (R.str("(relu (sigmoid (gelu_tanh (gelu (multiply x0 0.5))))) ; lv lv1 lv2 lv3 gv"), x), out_sinfo=R.Tensor((3, 5), "float64"))
            R.output(gv)
        return gv
)");
}

TEST_CASE("fuse_elementwise does not fuse across a value used elsewhere, a returned value, a dtype change, an if, or a lone operator") {
  const char* module = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), c: R.Tensor((), "bool")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32"), R.Tensor((4,), "float64")):
        with R.dataflow():
            lv: R.Tensor((4,), "float32") = R.exp(x)
            lv1: R.Tensor((4,), "float32") = R.negative(lv)
            lv2: R.Tensor((4,), "float32") = R.abs(lv1)
            lv3: R.Tensor((4,), "float32") = R.add(lv, lv2)
            lv4: R.Tensor((4,), "float64") = R.astype(lv3, dtype="float64")
            gv: R.Tensor((4,), "float64") = R.sqrt(lv4)
            R.output(lv2, lv3, gv)
        if c:
            r: R.Tensor((4,), "float32") = R.tanh(lv3)
        else:
            r: R.Tensor((4,), "float32") = lv2
        s: R.Tensor((4,), "float32") = R.log(r)
        return (s, lv2, gv)
)";
  const std::string out = fused(module);
  // lv2 is returned and lv3 is used in a branch: neither disappears; lv1 goes into lv2's group
  // (lv, used twice, does not); the cast and the sqrt after it, the tanh and the log are lone
  // operators.
  CHECK(contains(out, R"(lv2: R.Tensor((4,), "float32") = R.call_dps_packed(R.ExternFunc("kernels.fused"), (R.str("(abs (negative x0)) ; lv1 lv2"), lv))"));
  CHECK(contains(out, R"(lv3: R.Tensor((4,), "float32") = R.add(lv, lv2))"));
  CHECK(contains(out, R"(lv4: R.Tensor((4,), "float64") = R.astype(lv3, dtype="float64"))"));
  CHECK(contains(out, R"(gv: R.Tensor((4,), "float64") = R.sqrt(lv4))"));
  CHECK(contains(out, R"(r: R.Tensor((4,), "float32") = R.tanh(lv3))"));
  CHECK(contains(out, R"(s: R.Tensor((4,), "float32") = R.log(r))"));
}

TEST_CASE("fuse_elementwise keeps a group within 8 inputs") {
  std::string m = R"(@I.ir_module
class Module:
    @R.function
    def main()";
  for (int i = 0; i < 10; ++i) m += (i ? ", " : "") + std::string("x") + std::to_string(i) + R"(: R.Tensor((3,), "float32"))";
  m += R"() -> R.Tensor((3,), "float32"):
        with R.dataflow():
            a0: R.Tensor((3,), "float32") = R.add(x0, x1)
)";
  for (int i = 1; i < 9; ++i)
    m += "            a" + std::to_string(i) + R"(: R.Tensor((3,), "float32") = R.add(a)" + std::to_string(i - 1) + ", x" + std::to_string(i + 1) + ")\n";
  m += R"(            R.output(a8)
        return a8
)";
  const std::string out = fused(m);
  // From the end: a8 takes a2..a7 (a1 and x3..x9: 8 inputs; a1 too would make 9); then a1
  // takes a0.
  CHECK(contains(out, R"(a1: R.Tensor((3,), "float32") = R.call_dps_packed(R.ExternFunc("kernels.fused"), (R.str("(add (add x0 x1) x2) ; a0 a1"), x0, x1, x2))"));
  CHECK(contains(out, R"(; a2 a3 a4 a5 a6 a7 a8"), a1, x3, x4, x5, x6, x7, x8, x9))"));
}

TEST_CASE("fuse_epilogue: matmul + bias + gelu, and a residual, the product must be used only there") {
  CHECK(fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6, 20), "float32"), w: R.Tensor((20, 12), "float32"), b: R.Tensor((12,), "float32"), r: R.Tensor((6, 12), "float32")) -> R.Tensor((6, 12), "float32"):
        with R.dataflow():
            lv: R.Tensor((6, 12), "float32") = R.matmul(x, w)
            lv1: R.Tensor((6, 12), "float32") = R.add(lv, b)
            lv2: R.Tensor((6, 12), "float32") = R.nn.gelu(lv1)
            gv: R.Tensor((6, 12), "float32") = R.add(r, lv2)
            R.output(gv)
        return gv
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6, 20), "float32"), w: R.Tensor((20, 12), "float32"), b: R.Tensor((12,), "float32"), r: R.Tensor((6, 12), "float32")) -> R.Tensor((6, 12), "float32"):
        with R.dataflow():
            gv: R.Tensor((6, 12), "float32") = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused"), (x, w, R.prim_value(0, "bool"), R.prim_value(0, "bool"), R.str("(add x1 (gelu (add x0 x2))) ; lv lv1 lv2 gv"), r, b), out_sinfo=R.Tensor((6, 12), "float32"))
            R.output(gv)
        return gv
)");
  // The product is also returned: the elementwise chain fuses on its own.
  const std::string shared = fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6, 20), "float32"), w: R.Tensor((20, 12), "float32"), b: R.Tensor((12,), "float32")) -> R.Tuple(R.Tensor((6, 12), "float32"), R.Tensor((6, 12), "float32")):
        with R.dataflow():
            lv: R.Tensor((6, 12), "float32") = R.matmul(x, w)
            lv1: R.Tensor((6, 12), "float32") = R.add(lv, b)
            gv: R.Tensor((6, 12), "float32") = R.nn.relu(lv1)
            R.output(lv, gv)
        return (lv, gv)
)");
  CHECK(contains(shared, R"(lv: R.Tensor((6, 12), "float32") = R.matmul(x, w))"));
  CHECK(contains(shared, R"(R.ExternFunc("kernels.fused"), (R.str("(relu (add x0 x1)) ; lv1 gv"), lv, b))"));
  // An epilogue that broadcasts the product to a larger shape is not fused.
  const std::string larger = fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6, 20), "float32"), w: R.Tensor((20, 12), "float32"), b: R.Tensor((2, 6, 12), "float32")) -> R.Tensor((2, 6, 12), "float32"):
        with R.dataflow():
            lv: R.Tensor((6, 12), "float32") = R.matmul(x, w)
            gv: R.Tensor((2, 6, 12), "float32") = R.add(lv, b)
            R.output(gv)
        return gv
)");
  CHECK(contains(larger, "R.matmul(x, w)"));
  CHECK(contains(larger, "R.add(lv, b)"));
}

TEST_CASE("fuse_epilogue: transposed matmul operands are read in place, with or without an epilogue") {
  CHECK(fused(R"(@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((2, 5, 8), "float32"), k: R.Tensor((2, 7, 8), "float32"), a: R.Tensor((8, 5), "float32"), w: R.Tensor((8, 3), "float32")) -> R.Tuple(R.Tensor((2, 5, 7), "float32"), R.Tensor((5, 3), "float32")):
        with R.dataflow():
            kt: R.Tensor((2, 8, 7), "float32") = R.permute_dims(k, axes=[0, 2, 1])
            s: R.Tensor((2, 5, 7), "float32") = R.matmul(q, kt)
            gv: R.Tensor((2, 5, 7), "float32") = R.multiply(s, R.const(0.25, "float32"))
            at: R.Tensor((5, 8), "float32") = R.permute_dims(a)
            gv1: R.Tensor((5, 3), "float32") = R.matmul(at, w)
            R.output(gv, gv1)
        return (gv, gv1)
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((2, 5, 8), "float32"), k: R.Tensor((2, 7, 8), "float32"), a: R.Tensor((8, 5), "float32"), w: R.Tensor((8, 3), "float32")) -> R.Tuple(R.Tensor((2, 5, 7), "float32"), R.Tensor((5, 3), "float32")):
        with R.dataflow():
            gv: R.Tensor((2, 5, 7), "float32") = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused"), (q, k, R.prim_value(0, "bool"), R.prim_value(1, "bool"), R.str("(multiply x0 0.25) ; kt s gv")), out_sinfo=R.Tensor((2, 5, 7), "float32"))
            gv1: R.Tensor((5, 3), "float32") = R.call_dps_packed(R.ExternFunc("kernels.matmul"), (a, w, R.prim_value(1, "bool"), R.prim_value(0, "bool")), out_sinfo=R.Tensor((5, 3), "float32"))
            R.output(gv, gv1)
        return (gv, gv1)
)");
}

TEST_CASE("fuse_epilogue: conv2d + bias + residual + relu, and a per-channel scale") {
  const std::string out = fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4, 9, 9), "float32"), w: R.Tensor((4, 4, 3, 3), "float32"), b: R.Tensor((1, 4, 1, 1), "float32"), s: R.Tensor((4, 1, 1), "float32")) -> R.Tensor((2, 4, 9, 9), "float32"):
        with R.dataflow():
            lv: R.Tensor((2, 4, 9, 9), "float32") = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            lv1: R.Tensor((2, 4, 9, 9), "float32") = R.add(lv, b)
            lv2: R.Tensor((2, 4, 9, 9), "float32") = R.add(lv1, x)
            lv3: R.Tensor((2, 4, 9, 9), "float32") = R.nn.relu(lv2)
            lv4: R.Tensor((2, 4, 9, 9), "float32") = R.nn.conv2d(lv3, w, padding=[1, 1, 1, 1])
            gv: R.Tensor((2, 4, 9, 9), "float32") = R.multiply(lv4, s)
            R.output(gv)
        return gv
)");
  CHECK(contains(out, R"(lv3: R.Tensor((2, 4, 9, 9), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused"), (x, w, R.null_value(), R.shape([1, 1]), R.shape([1, 1, 1, 1]), R.shape([1, 1]), R.prim_value(1), R.str("(relu (add (add x0 x1) x2)) ; lv lv1 lv2 lv3"), b, x))"));
  CHECK(contains(out, R"(gv: R.Tensor((2, 4, 9, 9), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused"), (lv3, w, R.null_value(), R.shape([1, 1]), R.shape([1, 1, 1, 1]), R.shape([1, 1]), R.prim_value(1), R.str("(multiply x0 x1) ; lv4 gv"), s))"));
}

TEST_CASE("fuse_epilogue: a bias add that SiLU or hard-swish reads twice is computed once per use inside the epilogue") {
  // x * sigmoid(x) and x * clip(x / 6 + 0.5, 0, 1) over conv + bias (EfficientNet, MobileNet-V3
  // as the ONNX importer writes them): the bias add is one arithmetic operator on inputs, used
  // only inside the group, so the group takes it in twice rather than leave the convolution's
  // output to a kernel of its own.
  const std::string out = fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 4, 9, 9), "float32"), w: R.Tensor((4, 4, 3, 3), "float32"), b: R.Tensor((4, 1, 1), "float32")) -> R.Tensor((1, 4, 9, 9), "float32"):
        with R.dataflow():
            lv: R.Tensor((1, 4, 9, 9), "float32") = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            lv1: R.Tensor((1, 4, 9, 9), "float32") = R.add(lv, b)
            lv2: R.Tensor((1, 4, 9, 9), "float32") = R.sigmoid(lv1)
            lv3: R.Tensor((1, 4, 9, 9), "float32") = R.multiply(lv1, lv2)
            lv4: R.Tensor((1, 4, 9, 9), "float32") = R.nn.conv2d(lv3, w, padding=[1, 1, 1, 1])
            lv5: R.Tensor((1, 4, 9, 9), "float32") = R.add(lv4, b)
            gv: R.Tensor((1, 4, 9, 9), "float32") = R.multiply(lv5, R.clip(R.add(R.multiply(lv5, R.const(0.16666667, "float32")), R.const(0.5, "float32")), min=0.0, max=1.0))
            R.output(gv)
        return gv
)");
  CHECK(contains(out, R"(lv3: R.Tensor((1, 4, 9, 9), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused"), (x, w, R.null_value(), R.shape([1, 1]), R.shape([1, 1, 1, 1]), R.shape([1, 1]), R.prim_value(1), R.str("(multiply (add x0 x1) (sigmoid (add x0 x1))) ; lv lv1 lv2 lv3"), b))"));
  CHECK(contains(out, R"(R.str("(multiply (add x0 x1) (clip (add (multiply (add x0 x1) 0.1666666716337204) 0.5) 0 1)) ; lv4 lv5 gv"), b))"));
  // Used outside the group too, or more than one operator, or not arithmetic: computed once,
  // by a kernel of its own.
  const std::string kept = fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 5), "float32"), y: R.Tensor((4, 5), "float32")) -> R.Tuple(R.Tensor((4, 5), "float32"), R.Tensor((4, 5), "float32"), R.Tensor((4, 5), "float32"), R.Tensor((4, 5), "float32")):
        with R.dataflow():
            a: R.Tensor((4, 5), "float32") = R.add(x, y)
            b: R.Tensor((4, 5), "float32") = R.multiply(a, R.sigmoid(a))
            c: R.Tensor((4, 5), "float32") = R.add(R.multiply(x, y), x)
            d: R.Tensor((4, 5), "float32") = R.multiply(c, R.tanh(c))
            e: R.Tensor((4, 5), "float32") = R.maximum(x, y)
            f: R.Tensor((4, 5), "float32") = R.multiply(e, R.exp(e))
            R.output(a, b, d, f)
        return (a, b, d, f)
)");
  CHECK(contains(kept, R"(b: R.Tensor((4, 5), "float32") = R.call_dps_packed(R.ExternFunc("kernels.fused"), (R.str("(multiply x0 (sigmoid x0)) ; b"), a))"));
  CHECK(contains(kept, R"(R.str("(multiply x0 (tanh x0)) ; d"), c))"));
  CHECK(contains(kept, R"(R.str("(multiply x0 (exp x0)) ; f"), e))"));
}

TEST_CASE("the default pipeline fuses at opt level 1 and not at 0, each fusion can be disabled by name") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            lv: R.Tensor((4, 8), "float32") = R.matmul(x, w)
            lv1: R.Tensor((4, 8), "float32") = R.nn.relu(lv)
            lv2: R.Tensor((4, 8), "float32") = R.exp(x)
            lv3: R.Tensor((4, 8), "float32") = R.negative(lv2)
            gv: R.Tensor((4, 8), "float32") = R.add(lv1, lv3)
            R.output(gv)
        return gv
)");
  auto text_at = [&](int opt, std::vector<std::string> disabled) {
    kiln::pass_context ctx(opt);
    for (auto& d : disabled) ctx.disable(d);
    return text_of(kiln::run(t::fuse{}, m, ctx));
  };
  CHECK_FALSE(contains(text_at(0, {}), "fused"));
  {
    kiln::pass_context ctx(1);
    (void)kiln::run(t::fuse{}, m, ctx);
    CHECK(ctx.statistic("fuse_epilogue", "epilogues") == 1);
    CHECK(ctx.statistic("fuse_epilogue", "transposes") == 0);
    CHECK(ctx.statistic("fuse_elementwise", "groups") == 0);
  }
  const std::string all = text_at(1, {});
  CHECK(contains(all, R"(R.ExternFunc("kernels.matmul_fused"), (x, w, R.prim_value(0, "bool"), R.prim_value(0, "bool"), R.str("(add (relu x0) (negative (exp x1))) ; lv lv1 lv2 lv3 gv"), x))"));
  const std::string no_epilogue = text_at(1, {"fuse_epilogue"});
  CHECK(contains(no_epilogue, "R.matmul(x, w)"));
  CHECK(contains(no_epilogue, R"(R.str("(add (relu x0) (negative (exp x1))) ; lv1 lv2 lv3 gv"), lv, x))"));
  const std::string no_elementwise = text_at(1, {"fuse_elementwise"});
  CHECK_FALSE(contains(no_elementwise, "kernels.fused\""));
}

TEST_CASE("fusion takes in operator calls nested in operands, as written by hand or by the ONNX importer") {
  CHECK(fused(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 16), "float32"), b: R.Tensor((16,), "float32"), v: R.Tensor((16, 8), "float32")) -> R.Tensor((4, 16), "float32"):
        with R.dataflow():
            h: R.Tensor((4, 16), "float32") = R.nn.relu(R.add(R.matmul(x, w), b))
            e: R.Tensor((4, 16), "float32") = R.multiply(R.exp(h), R.sigmoid(h))
            t: R.Tensor((4, 16), "float32") = R.matmul(x, R.permute_dims(v))
            gv: R.Tensor((4, 16), "float32") = R.add(e, t)
            R.output(gv)
        return gv
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 16), "float32"), b: R.Tensor((16,), "float32"), v: R.Tensor((16, 8), "float32")) -> R.Tensor((4, 16), "float32"):
        with R.dataflow():
            h: R.Tensor((4, 16), "float32") = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused"), (x, w, R.prim_value(0, "bool"), R.prim_value(0, "bool"), R.str("(relu (add x0 x1)) ; h"), b), out_sinfo=R.Tensor((4, 16), "float32"))
            gv: R.Tensor((4, 16), "float32") = R.call_dps_packed(R.ExternFunc("kernels.matmul_fused"), (x, v, R.prim_value(0, "bool"), R.prim_value(1, "bool"), R.str("(add (multiply (exp x1) (sigmoid x1)) x0) ; e permute_dims t gv"), h), out_sinfo=R.Tensor((4, 16), "float32"))
            R.output(gv)
        return gv
)");
}

TEST_CASE("calls hoisted out of a dataflow block's output bind dataflow variables") {
  // gv is an output of the block; the softmax's nested matmul is hoisted before it and must stay
  // local to the block (a dataflow variable, not one more output).
  const std::string out = after(t::fuse_elementwise{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 16), "float32")) -> R.Tensor((4, 16), "float32"):
        with R.dataflow():
            gv: R.Tensor((4, 16), "float32") = R.nn.softmax(R.matmul(x, w), axis=-1)
            R.output(gv)
        return gv
)");
  const ir::ir_module m = ir::parse_module(out);
  const auto& body = static_cast<const ir::seq_expr_node&>(*ir::ref_cast<ir::function_node>(m->lookup("main"))->body);
  REQUIRE(body.blocks.size() == 1);
  REQUIRE(body.blocks[0].dataflow);
  REQUIRE(body.blocks[0].bindings.size() == 2);
  CHECK(body.blocks[0].bindings[0].variable->is_dataflow());
  CHECK(body.blocks[0].bindings[0].variable->name_hint == "matmul");
  CHECK_FALSE(body.blocks[0].bindings[1].variable->is_dataflow());
  CHECK(out.find("R.output(gv)") != std::string::npos);
}
