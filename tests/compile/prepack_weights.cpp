// SPDX-License-Identifier: Apache-2.0
// prepack_weights: constant matmul weights packed at compile time. The IR it makes, what it leaves
// alone, and that the compiled program computes what it computes without the pass — also from an
// executable serialized and loaded back, and from a weight packed in another build's layout.
#include <kiln/compile.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/transform/default_pipeline.hpp>
#include <kiln/vm/serialize.hpp>

#include "helpers.hpp"

#include <iomanip>
#include <optional>
#include <sstream>

using namespace kiln_test;
namespace t = kiln::transform;
namespace kernels = kiln::kernels;

namespace {

/// A K x N float32 weight as IR text: R.const([[...], ...], "float32"), values i * 0.01 - j * 0.02.
std::string weight_text(std::int64_t k, std::int64_t n, std::string_view dt = "float32") {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << "R.const([";
  for (std::int64_t i = 0; i < k; ++i) {
    s << (i ? ", [" : "[");
    for (std::int64_t j = 0; j < n; ++j) s << (j ? ", " : "") << double((i * 7 + j * 3) % 11) * 0.01 - 0.05;
    s << "]";
  }
  s << "], \"" << dt << "\")";
  return s.str();
}

/// `main` of `m` compiled at opt level 2 (with the default pipeline or `pipeline`), with
/// `prepack_weights` disabled when `disable`, run on `args`; the statistic of packed weights in
/// `*packed`, the executable as text in `*text`.
vm::value run(const ir::ir_module& m, const std::vector<vm::value>& args, bool disable, std::int64_t* packed = nullptr,
              std::string* text = nullptr, std::optional<std::string> pipeline = std::nullopt) {
  kiln::pass_context ctx(2);
  if (disable) ctx.disable("prepack_weights");
  kiln::pass_context_scope scope(ctx);
  vm::executable ex = kiln::compile(m, {.pipeline = pipeline});
  if (packed) *packed = ctx.statistic("prepack_weights", "weights packed");
  if (text) *text = ex.as_text();
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  return machine.invoke_span("main", args);
}

/// The IR `pass` makes of `input`, as text; checks that it is well formed and round-trips.
template <class Pass>
std::string after(Pass pass, std::string_view input) {
  const ir::ir_module out = kiln::run(pass, ir::parse_module(input));
  for (const ir::diagnostic& d : ir::verify(out)) FAIL_CHECK("not well formed after the pass: " << d.to_string());
  const std::string text = ir::print(out);
  CHECK(ir::print(ir::parse_module(text)) == text);
  return text;
}

/// The layout numbers the pass records for a K x N float32 weight in this build.
std::string layout_text(std::int64_t k, std::int64_t n) {
  const kernels::packed_weight_layout l = kernels::native_weight_layout(dtype::float32, k, n);
  return "R.shape([" + std::to_string(l.k) + ", " + std::to_string(l.n) + ", " + std::to_string(l.panels.nr) + ", " +
         std::to_string(l.panels.kc) + "])";
}

}  // namespace

TEST_CASE("prepack_weights: a constant weight becomes packed panels and a prepacked kernel call, fused or not") {
  const std::string src = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6, 4), "float32"), b: R.Tensor((5,), "float32")) -> R.Tuple(R.Tensor((6, 5), "float32"), R.Tensor((6, 5), "float32")):
        with R.dataflow():
            lv: R.Tensor((6, 5), "float32") = R.matmul(x, )" + weight_text(4, 5) + R"()
            lv1: R.Tensor((6, 5), "float32") = R.matmul(x, )" + weight_text(4, 5) + R"()
            lv2: R.Tensor((6, 5), "float32") = R.add(lv1, b)
            gv: R.Tensor((6, 5), "float32") = R.nn.relu(lv2)
            R.output(lv, gv)
        return (lv, gv)
)";
  using lower = kiln::sequential<t::fuse_epilogue, t::legalize_ops, t::prepack_weights>;
  const std::string out = after(lower{}, src);
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.matmul_prepacked"), (x, R.const([)"));
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.matmul_fused_prepacked"), (x, R.const([)"));
  CHECK(contains(out, R"(], "float32"), R.prim_value(0, "bool"), )" + layout_text(4, 5) + R"(, R.str("(relu (add x0 x1)) ; lv1 lv2 gv"), b))"));
  CHECK_FALSE(contains(out, "kernels.matmul\""));
  CHECK_FALSE(contains(out, "kernels.matmul_fused\""));

  // Compiled: the same results as without the pass (bit for bit: six rows, the same panels), and
  // the two matmuls of one weight share one packed constant.
  const ir::ir_module m = ir::parse_module(src);
  const auto args = arguments_for(m, "main", {});
  std::int64_t packed = 0, unpacked = 0;
  CHECK(max_difference(run(m, args, false, &packed), run(m, args, true, &unpacked)) == 0);
  CHECK(packed == 1);
  CHECK(unpacked == 0);
}

TEST_CASE("prepack_weights: a weight read transposed (ONNX Gemm's transB), float64, batched and vector inputs") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 7, 40), "float64"), v: R.Tensor((40,), "float64"), y: R.Tensor((2, 40), "float64")) -> R.Tuple(R.Tensor((3, 7, 33), "float64"), R.Tensor((33,), "float64"), R.Tensor((2, 33), "float64")):
        with R.dataflow():
            w: R.Tensor((33, 40), "float64") = )" + weight_text(33, 40, "float64") + R"(
            lv: R.Tensor((3, 7, 33), "float64") = R.matmul(x, R.permute_dims(w))
            lv1: R.Tensor((33,), "float64") = R.matmul(v, R.permute_dims(w))
            gv: R.Tensor((2, 33), "float64") = R.matmul(y, R.permute_dims(w))
            R.output(lv, lv1, gv)
        return (lv, lv1, gv)
)");
  const auto args = arguments_for(m, "main", {});
  // The default pipeline folds the transpose into the constant; without `kiln.simplify` the
  // matmuls read the weight transposed, and the pass packs it transposed, once.
  for (const char* pipeline : {"kiln.default", "kiln.fuse,legalize_ops,prepack_weights,kiln.lower_to_vm"}) {
    CAPTURE(pipeline);
    std::int64_t packed = 0;
    std::string text;
    CHECK(max_difference(run(m, args, false, &packed, &text, pipeline), run(m, args, true, nullptr, nullptr, pipeline)) <= 1e-14);
    CHECK(contains(text, "kernels.matmul_prepacked"));
    CHECK(packed == 1);  // folded three times into equal constants, shared; or one constant read transposed
  }
  const std::string lowered = after(kiln::sequential<t::fuse_epilogue, t::legalize_ops, t::prepack_weights>{}, ir::print(m));
  CHECK_FALSE(contains(lowered, "permute_dims"));
  CHECK(contains(lowered, ", R.prim_value(0, \"bool\"), R.shape([40, 33, "));
}

TEST_CASE("prepack_weights leaves alone weights that are parameters, integer matmuls, batched weights, constant left operands, and opt level 0") {
  const std::string src = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 2), "float32"), w: R.Tensor((2, 3), "float32"), i: R.Tensor((2, 3), "int32")) -> R.Tuple(R.Tensor((4, 3), "float32"), R.Tensor((2, 2), "int32"), R.Tensor((2, 4, 3), "float32"), R.Tensor((3, 2), "float32")):
        with R.dataflow():
            lv: R.Tensor((4, 3), "float32") = R.matmul(x, w)
            lv1: R.Tensor((2, 2), "int32") = R.matmul(i, R.const([[1, 2], [3, 4], [5, 6]], "int32"))
            lv2: R.Tensor((2, 4, 3), "float32") = R.matmul(x, R.const([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[0.5, 0.25, 1.0], [2.0, -1.0, 0.0]]], "float32"))
            lv3: R.Tensor((3, 2), "float32") = R.matmul(R.const([[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]], "float32"), x)
            R.output(lv, lv1, lv2, lv3)
        return (lv, lv1, lv2, lv3)
)";
  using lower = kiln::sequential<t::legalize_ops, t::prepack_weights>;
  CHECK_FALSE(contains(after(lower{}, src), "prepacked"));
  const ir::ir_module m = ir::parse_module(src);
  std::int64_t packed = -1;
  std::string text;
  const auto args = arguments_for(m, "main", {});
  CHECK(max_difference(run(m, args, false, &packed, &text), run(m, args, true)) == 0);
  CHECK(packed == 0);
  CHECK_FALSE(contains(text, "prepacked"));

  // Opt level 0 runs no optimisation, this one included.
  const ir::ir_module dense = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6, 4), "float32")) -> R.Tensor((6, 5), "float32"):
        gv: R.Tensor((6, 5), "float32") = R.matmul(x, )" + weight_text(4, 5) + R"()
        return gv
)");
  kiln::pass_context ctx(0);
  kiln::pass_context_scope scope(ctx);
  CHECK_FALSE(contains(kiln::compile(dense).as_text(), "prepacked"));
  kiln::pass_context ctx1(1);
  kiln::pass_context_scope scope1(ctx1);
  CHECK(contains(kiln::compile(dense).as_text(), "kernels.matmul_prepacked"));
}

TEST_CASE("a prepacked executable serialized and loaded back, and a weight packed in another build's layout, give the same results") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((9, 40), "float32")) -> R.Tensor((9, 70), "float32"):
        with R.dataflow():
            lv: R.Tensor((9, 70), "float32") = R.matmul(x, )" + weight_text(40, 70) + R"()
            gv: R.Tensor((9, 70), "float32") = R.nn.gelu(lv)
            R.output(gv)
        return gv
)");
  const auto args = arguments_for(m, "main", {});
  const vm::value want = run(m, args, true);
  const vm::executable ex = kiln::compile(m);
  CHECK(contains(ex.as_text(), "kernels.matmul_fused_prepacked"));
  const vm::executable back = vm::deserialize(vm::serialize(ex));
  vm::virtual_machine machine(back, {}, vm::kernel_registry());
  CHECK(max_difference(machine.invoke_span("main", args), want) == 0);

  // A 2 x 3 weight packed by hand in panels of 2 columns and blocks of 1 row — the layout of no
  // build — as an executable made elsewhere would carry it: unpacked at run time, same product.
  //   B = [[1, 2, 3], [4, 5, 6]]  ->  block 0: [1 2] [3 0], block 1: [4 5] [6 0]
  // (`panels`: the layout's panel width; 2 describes the constant, 8 does not.)
  const auto foreign_with = [](int panels) {
    return ir::parse_module(kiln::detail::concat(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((5, 2), "float32")) -> R.Tensor((5, 3), "float32"):
        gv: R.Tensor((5, 3), "float32") = R.call_dps_packed(R.ExternFunc("kernels.matmul_prepacked"), (x, R.const([1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0], "float32"), R.prim_value(0, "bool"), R.shape([2, 3, )",
                                                 panels, R"(, 1])), out_sinfo=R.Tensor((5, 3), "float32"))
        return gv
)"));
  };
  const ir::ir_module foreign = foreign_with(2);
  const ir::ir_module plain = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((5, 2), "float32")) -> R.Tensor((5, 3), "float32"):
        gv: R.Tensor((5, 3), "float32") = R.matmul(x, R.const([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "float32"))
        return gv
)");
  const auto xs = arguments_for(plain, "main", {});
  CHECK(max_difference(run(foreign, xs, true), run(plain, xs, true)) == 0);
  // A layout that does not describe the constant is the kernel's error, naming both.
  const ir::ir_module wrong = foreign_with(8);
  CHECK(contains(message_of([&] { run(wrong, xs, true); }),
                 "kiln::kernels::matmul_prepacked: the packed weight must be a contiguous vector of 2 x 8 elements for a 2 x 3 weight in panels of 8 "
                 "columns, got float32[8]"));
}

TEST_CASE("prepack_weights: a convolution's constant weight is reordered for the direct kernel, fused or not, 1x1, grouped, small and parameter weights are left alone") {
  const std::string w = conv_weight_text(6, 3, 3, 3);
  const std::string src = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3, 9, 10), "float32"), b: R.Tensor((6, 1, 1), "float32"), p: R.Tensor((6, 3, 3, 3), "float32")) -> R.Tuple(R.Tensor((1, 6, 9, 10), "float32"), R.Tensor((1, 6, 9, 10), "float32"), R.Tensor((1, 4, 9, 10), "float32"), R.Tensor((1, 6, 9, 10), "float32"), R.Tensor((1, 6, 3, 2), "float32"), R.Tensor((1, 6, 9, 10), "float32")):
        with R.dataflow():
            lv: R.Tensor((1, 6, 9, 10), "float32") = R.nn.conv2d(x, )" + w + R"(, padding=[1, 1, 1, 1])
            lv1: R.Tensor((1, 6, 9, 10), "float32") = R.nn.conv2d(x, )" + w + R"(, padding=[1, 1, 1, 1])
            lv2: R.Tensor((1, 6, 9, 10), "float32") = R.add(lv1, b)
            gv: R.Tensor((1, 6, 9, 10), "float32") = R.nn.relu(lv2)
            pw: R.Tensor((1, 4, 9, 10), "float32") = R.nn.conv2d(x, )" + conv_weight_text(4, 3, 1, 1) + R"()
            gr: R.Tensor((1, 6, 9, 10), "float32") = R.nn.conv2d(x, )" + conv_weight_text(6, 1, 3, 3) + R"(, padding=[1, 1, 1, 1], groups=3)
            sm: R.Tensor((1, 6, 3, 2), "float32") = R.nn.conv2d(x, )" + w + R"(, strides=[3, 4])
            pr: R.Tensor((1, 6, 9, 10), "float32") = R.nn.conv2d(x, p, padding=[1, 1, 1, 1])
            R.output(lv, gv, pw, gr, sm, pr)
        return (lv, gv, pw, gr, sm, pr)
)";
  using lower = kiln::sequential<t::fuse_epilogue, t::legalize_ops, t::prepack_weights>;
  const std::string out = after(lower{}, src);
  const kernels::packed_conv_layout l = kernels::native_conv_layout(dtype::float32, 6, 3, 3, 3);
  const std::string layout = "R.shape([6, 3, 3, 3, " + std::to_string(l.ob) + "])";
  CHECK(contains(out, R"(lv: R.Tensor((1, 6, 9, 10), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_prepacked"), (x, R.const([)"));
  CHECK(contains(out, R"(], "float32"), R.null_value(), )" + layout + R"(, R.shape([1, 1]), R.shape([1, 1, 1, 1]), R.shape([1, 1])), out_sinfo=)"));
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused_prepacked"), (x, R.const([)"));
  CHECK(contains(out, ", R.str(\"(relu (add x0 x1)) ; lv1 lv2 gv\"), b), out_sinfo="));
  // Left alone: the 1x1 convolution, the grouped one, the one of 6 output positions, the parameter.
  CHECK(contains(out, "pw: R.Tensor((1, 4, 9, 10), \"float32\") = R.call_dps_packed(R.ExternFunc(\"kernels.conv2d\")"));
  CHECK(contains(out, "gr: R.Tensor((1, 6, 9, 10), \"float32\") = R.call_dps_packed(R.ExternFunc(\"kernels.conv2d\")"));
  CHECK(contains(out, "sm: R.Tensor((1, 6, 3, 2), \"float32\") = R.call_dps_packed(R.ExternFunc(\"kernels.conv2d\")"));
  CHECK(contains(out, "pr: R.Tensor((1, 6, 9, 10), \"float32\") = R.call_dps_packed(R.ExternFunc(\"kernels.conv2d\"), (x, p, "));

  // Compiled: the results of the build without the pass (within rounding: the GEMM sums these
  // small convolutions in another order). In the whole pipeline lv1 is lv (the same convolution
  // of the same input), so the epilogue cannot join it: lv is an output too.
  const ir::ir_module m = ir::parse_module(src);
  const auto args = arguments_for(m, "main", {});
  std::int64_t packed = 0;
  std::string text;
  CHECK(max_difference(run(m, args, false, &packed, &text), run(m, args, true)) <= 1e-5);
  CHECK(packed == 1);
  CHECK(contains(text, "kernels.conv2d_prepacked"));
  kiln::pass_context ctx(2);
  kiln::pass_context_scope scope(ctx);
  (void)kiln::compile(m);
  CHECK(ctx.statistic("prepack_weights", "convolutions") == 1);  // lv1 is lv (the same convolution)
  CHECK(ctx.statistic("prepack_weights", "matmuls") == 0);

  // Serialized and loaded back: the packed constant's bytes are kept, the same results.
  const vm::executable ex = kiln::compile(m);
  const vm::executable back = vm::deserialize(vm::serialize(ex));
  vm::virtual_machine a(ex, {}, vm::kernel_registry()), c(back, {}, vm::kernel_registry());
  CHECK(max_difference(a.invoke_span("main", args), c.invoke_span("main", args)) == 0);
}

TEST_CASE("prepack_weights: a 1x1 convolution of few positions gets its weight transposed and packed for X^T W^T, fused or not") {
  // 720 -> 32 channels on 7 x 7 (49 positions: W X would pad them to whole panels), with and
  // without an epilogue; left alone: the same weight on 28 x 28 positions and at stride 2.
  const std::string w = conv_weight_text(32, 720, 1, 1);
  const std::string src = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 720, 7, 7), "float32"), y: R.Tensor((1, 720, 28, 28), "float32"), b: R.Tensor((32, 1, 1), "float32")) -> R.Tuple(R.Tensor((1, 32, 7, 7), "float32"), R.Tensor((1, 32, 7, 7), "float32"), R.Tensor((1, 32, 28, 28), "float32"), R.Tensor((1, 32, 14, 14), "float32")):
        with R.dataflow():
            lv: R.Tensor((1, 32, 7, 7), "float32") = R.nn.conv2d(x, )" + w + R"()
            lv1: R.Tensor((1, 32, 7, 7), "float32") = R.nn.conv2d(x, )" + w + R"()
            lv2: R.Tensor((1, 32, 7, 7), "float32") = R.add(lv1, b)
            gv: R.Tensor((1, 32, 7, 7), "float32") = R.nn.relu(lv2)
            big: R.Tensor((1, 32, 28, 28), "float32") = R.nn.conv2d(y, )" + w + R"()
            st: R.Tensor((1, 32, 14, 14), "float32") = R.nn.conv2d(y, )" + w + R"(, strides=[2, 2])
            R.output(lv, gv, big, st)
        return (lv, gv, big, st)
)";
  REQUIRE(kernels::prefer_pointwise_conv(720, 32, 7, 7));
  REQUIRE(!kernels::prefer_pointwise_conv(720, 32, 28, 28));
  using lower = kiln::sequential<t::fuse_epilogue, t::legalize_ops, t::prepack_weights>;
  const std::string out = after(lower{}, src);
  CHECK(contains(out, R"(lv: R.Tensor((1, 32, 7, 7), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_pointwise"), (x, R.const([)"));
  CHECK(contains(out, R"(], "float32"), R.null_value(), )" + layout_text(720, 32) + R"(, R.shape([1, 1]), R.shape([0, 0, 0, 0]), R.shape([1, 1])), out_sinfo=)"));
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused_pointwise"), (x, R.const([)"));
  CHECK(contains(out, ", R.str(\"(relu (add x0 x1)) ; lv1 lv2 gv\"), b), out_sinfo="));
  CHECK(contains(out, "big: R.Tensor((1, 32, 28, 28), \"float32\") = R.call_dps_packed(R.ExternFunc(\"kernels.conv2d\")"));
  CHECK(contains(out, "st: R.Tensor((1, 32, 14, 14), \"float32\") = R.call_dps_packed(R.ExternFunc(\"kernels.conv2d\")"));

  // Compiled: the same bits as the build without the pass (the same sums in the same order), and
  // the same after serializing the executable and loading it back.
  const ir::ir_module m = ir::parse_module(src);
  const auto args = arguments_for(m, "main", {});
  std::int64_t packed = 0;
  std::string text;
  CHECK(max_difference(run(m, args, false, &packed, &text), run(m, args, true)) == 0);
  CHECK(packed == 1);  // one weight, packed once for the two calls that take it transposed
  CHECK(contains(text, "kernels.conv2d_pointwise"));
  const vm::executable ex = kiln::compile(m);
  const vm::executable back = vm::deserialize(vm::serialize(ex));
  vm::virtual_machine a(ex, {}, vm::kernel_registry()), c(back, {}, vm::kernel_registry());
  CHECK(max_difference(a.invoke_span("main", args), c.invoke_span("main", args)) == 0);
}

TEST_CASE("prepack_weights: a stride-1 3x3 convolution with enough channels and tiles gets its weight transformed for Winograd's kernel") {
  // 64 channels and a 16 x 16 output (64 tiles of 2 x 2): F(2x2), fused or not; on a 28 x 28 output
  // (49 tiles of 4 x 4), F(4x4). The same weight at stride 2 (8 x 8: 16 tiles), and one of 32 input
  // channels, stay with the direct kernel.
  const std::string w = conv_weight_text(64, 64, 3, 3);
  const std::string src = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 64, 16, 16), "float32"), b: R.Tensor((64, 1, 1), "float32"), z: R.Tensor((1, 32, 16, 16), "float32"), y: R.Tensor((1, 64, 28, 28), "float32")) -> R.Tuple(R.Tensor((1, 64, 16, 16), "float32"), R.Tensor((1, 64, 16, 16), "float32"), R.Tensor((1, 64, 8, 8), "float32"), R.Tensor((1, 64, 16, 16), "float32"), R.Tensor((1, 64, 28, 28), "float32")):
        with R.dataflow():
            lv: R.Tensor((1, 64, 16, 16), "float32") = R.nn.conv2d(x, )" + w + R"(, padding=[1, 1, 1, 1])
            lv1: R.Tensor((1, 64, 16, 16), "float32") = R.nn.conv2d(lv, )" + w + R"(, padding=[1, 1, 1, 1])
            lv2: R.Tensor((1, 64, 16, 16), "float32") = R.add(lv1, b)
            gv: R.Tensor((1, 64, 16, 16), "float32") = R.nn.relu(lv2)
            st: R.Tensor((1, 64, 8, 8), "float32") = R.nn.conv2d(x, )" + w + R"(, strides=[2, 2], padding=[1, 1, 1, 1])
            nc: R.Tensor((1, 64, 16, 16), "float32") = R.nn.conv2d(z, )" + conv_weight_text(64, 32, 3, 3) + R"(, padding=[1, 1, 1, 1])
            big: R.Tensor((1, 64, 28, 28), "float32") = R.nn.conv2d(y, )" + w + R"(, padding=[1, 1, 1, 1])
            R.output(lv, gv, st, nc, big)
        return (lv, gv, st, nc, big)
)";
  using lower = kiln::sequential<t::fuse_epilogue, t::legalize_ops, t::prepack_weights>;
  const std::string out = after(lower{}, src);
  // The layout [O, C, m, mr, kc]: this build's panels of the GEMM's A.
  const auto layout = [](std::int64_t m) {
    const kernels::winograd_conv_layout l = kernels::native_winograd_layout(dtype::float32, 64, 64, m);
    CHECK(l.kc == 64);
    return kiln::detail::concat(R"(], "float32"), R.null_value(), R.shape([64, 64, )", m, ", ", l.mr, ", ", l.kc,
                                R"(]), R.shape([1, 1]), R.shape([1, 1, 1, 1]), R.shape([1, 1])), out_sinfo=)");
  };
  CHECK(contains(out, R"(lv: R.Tensor((1, 64, 16, 16), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_winograd"), (x, R.const([)"));
  CHECK(contains(out, layout(2)));
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.conv2d_fused_winograd"), (lv, R.const([)"));
  CHECK(contains(out, R"(st: R.Tensor((1, 64, 8, 8), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_prepacked"))"));
  CHECK(contains(out, R"(nc: R.Tensor((1, 64, 16, 16), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_prepacked"))"));
  CHECK(contains(out, R"(big: R.Tensor((1, 64, 28, 28), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_winograd"), (y, R.const([)"));
  CHECK(contains(out, layout(4)));

  // Compiled: the results of the build without the pass, within Winograd's rounding.
  const ir::ir_module m = ir::parse_module(src);
  const auto args = arguments_for(m, "main", {});
  std::int64_t packed = 0;
  CHECK(max_difference(run(m, args, false, &packed), run(m, args, true)) <= 1e-4);
  CHECK(packed == 5);  // lv's, gv's and big's weights are three constants of the same values until codegen pools them
  kiln::pass_context ctx(2);
  {
    kiln::pass_context_scope scope(ctx);
    (void)kiln::compile(m);
  }
  CHECK(ctx.statistic("prepack_weights", "convolutions") == 5);
  CHECK(ctx.statistic("prepack_weights", "of which Winograd") == 3);
  const vm::executable ex = kiln::compile(m);
  const vm::executable back = vm::deserialize(vm::serialize(ex));
  vm::virtual_machine a(ex, {}, vm::kernel_registry()), c(back, {}, vm::kernel_registry());
  CHECK(max_difference(a.invoke_span("main", args), c.invoke_span("main", args)) == 0);
}

TEST_CASE("kiln.prepack_weights.winograd_max_tile: F(4x4) and F(2x2) by default, F(2x2) only, or the direct kernel, and nothing else") {
  // 64 -> 64 channels on 28² (49 tiles of 4 x 4: F(4x4) by default) and on 14² (F(2x2)).
  const std::string w = conv_weight_text(64, 64, 3, 3);
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 64, 28, 28), "float32"), y: R.Tensor((1, 64, 14, 14), "float32")) -> R.Tuple(R.Tensor((1, 64, 28, 28), "float32"), R.Tensor((1, 64, 14, 14), "float32")):
        with R.dataflow():
            a: R.Tensor((1, 64, 28, 28), "float32") = R.nn.conv2d(x, )" + w + R"(, padding=[1, 1, 1, 1])
            b: R.Tensor((1, 64, 14, 14), "float32") = R.nn.conv2d(y, )" + w + R"(, padding=[1, 1, 1, 1])
            R.output(a, b)
        return (a, b)
)");
  const auto args = arguments_for(m, "main", {});
  // Each convolution's packed layout after prepack_weights (the digit after "[64, 64, ": the
  // Winograd tile, or the direct kernel's KH = 3), and the compiled program's results.
  const auto compiled = [&](std::optional<std::int64_t> max_tile) {
    kiln::pass_context ctx(2);
    if (max_tile) ctx.set_config(t::winograd_max_tile_option(), *max_tile);
    const std::string text = ir::print(kiln::run(kiln::sequential<t::fuse_epilogue, t::legalize_ops, t::prepack_weights>{}, m, ctx));
    kiln::pass_context_scope scope(ctx);
    const vm::executable ex = kiln::compile(m);
    std::string tiles;
    for (std::size_t at = text.find("R.shape([64, 64, "); at != std::string::npos; at = text.find("R.shape([64, 64, ", at + 1))
      tiles += text.substr(at + 17, 1);
    vm::virtual_machine machine(ex, {}, vm::kernel_registry());
    return std::pair{tiles, machine.invoke_span("main", args)};
  };
  const auto [by_default, y_default] = compiled(std::nullopt);
  const auto [four, y_four] = compiled(4);
  const auto [two, y_two] = compiled(2);
  const auto [none, y_none] = compiled(0);
  CHECK(by_default == "42");
  CHECK(four == "42");
  CHECK(two == "22");
  CHECK(none == "33");  // the direct kernel's layout [O, C, KH, KW, ob]
  CHECK(max_difference(y_four, y_default) == 0);
  CHECK(max_difference(y_default, y_none) <= 1e-4);
  CHECK(max_difference(y_two, y_none) <= 1e-4);
  CHECK(max_difference(y_two, y_none) <= max_difference(y_default, y_none));
  for (const std::int64_t bad : {1, 3, 8, -1}) {
    kiln::pass_context ctx(2);
    ctx.set_config(t::winograd_max_tile_option(), bad);
    kiln::pass_context_scope scope(ctx);
    CHECK(message_of([&] { (void)kiln::compile(m); }).find("kiln::transform::prepack_weights: config option "
                                                           "'kiln.prepack_weights.winograd_max_tile' must be 0, 2 or 4, got " +
                                                           std::to_string(bad)) != std::string::npos);
  }
}

TEST_CASE("a convolution weight packed in another build's layout runs unpacked, a wrong layout is the kernel's error") {
  // W = [[[[1, 2]]], [[[3, 4]]], [[[5, 6]]]] ([3, 1, 1, 2]) in blocks of 2 output channels — the
  // layout of no build: block 0 holds channels 0 and 1 per tap, block 1 channel 2 and a zero.
  // (`ob`: the layout's block of output channels; 2 describes the constant, 8 does not.)
  const auto foreign_with = [](int ob) {
    return ir::parse_module(kiln::detail::concat(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 1, 4, 5), "float32")) -> R.Tensor((1, 3, 4, 4), "float32"):
        gv: R.Tensor((1, 3, 4, 4), "float32") = R.call_dps_packed(R.ExternFunc("kernels.conv2d_prepacked"), (x, R.const([1.0, 3.0, 2.0, 4.0, 5.0, 0.0, 6.0, 0.0], "float32"), R.null_value(), R.shape([3, 1, 1, 2, )",
                                                 ob, R"(]), R.shape([1, 1]), R.shape([0, 0, 0, 0]), R.shape([1, 1])), out_sinfo=R.Tensor((1, 3, 4, 4), "float32"))
        return gv
)"));
  };
  const ir::ir_module foreign = foreign_with(2);
  const ir::ir_module plain = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 1, 4, 5), "float32")) -> R.Tensor((1, 3, 4, 4), "float32"):
        gv: R.Tensor((1, 3, 4, 4), "float32") = R.nn.conv2d(x, R.const([[[[1.0, 2.0]]], [[[3.0, 4.0]]], [[[5.0, 6.0]]]], "float32"))
        return gv
)");
  const auto xs = arguments_for(plain, "main", {});
  CHECK(max_difference(run(foreign, xs, true), run(plain, xs, true)) == 0);
  const ir::ir_module wrong = foreign_with(8);
  CHECK(contains(message_of([&] { run(wrong, xs, true); }),
                 "kiln::kernels::conv2d_prepacked: the packed weight must be a contiguous vector of 16 elements for a [3, 1, 1, 2] weight in blocks of 8 "
                 "output channels, got float32[8]"));
}
