// SPDX-License-Identifier: Apache-2.0
// fuse_attention: matmul, scale, mask, bias, softmax, matmul become one kernels.attention call.
// The IR it makes, what it leaves alone, and that compiled programs with and without it agree —
// with symbolic lengths, a cache appended in place, bytecode and compiled mode.
#include <kiln/compile.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>
#include <kiln/transform/default_pipeline.hpp>
#include <kiln/vm/kernels.hpp>

#include "helpers.hpp"

using namespace kiln_test;
namespace t = kiln::transform;

namespace {

/// GPT-2's attention over a cache: the new keys appended to the past, the scores scaled, the
/// causal mask applied with `where`, the padding mask added, softmax, the values.
const char* gpt2_attention = R"(@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((1, 2, n, 8), "float32"), k: R.Tensor((1, 2, n, 8), "float32"), v: R.Tensor((1, 2, n, 8), "float32"), past_k: R.Tensor((1, 2, p, 8), "float32"), past_v: R.Tensor((1, 2, p, 8), "float32"), causal: R.Tensor((n, p + n), "bool"), bias: R.Tensor((1, 1, 1, p + n), "float32")) -> R.Tuple(R.Tensor((1, 2, n, 8), "float32"), R.Tensor((1, 2, p + n, 8), "float32"), R.Tensor((1, 2, p + n, 8), "float32")):
        with R.dataflow():
            present_k: R.Tensor((1, 2, p + n, 8), "float32") = R.concat((past_k, k), axis=2)
            present_v: R.Tensor((1, 2, p + n, 8), "float32") = R.concat((past_v, v), axis=2)
            kt: R.Tensor((1, 2, 8, p + n), "float32") = R.permute_dims(present_k, axes=[0, 1, 3, 2])
            s: R.Tensor((1, 2, n, p + n), "float32") = R.matmul(q, kt)
            s1: R.Tensor((1, 2, n, p + n), "float32") = R.divide(s, R.const(2.8284271247461903, "float32"))
            s2: R.Tensor((1, 2, n, p + n), "float32") = R.where(causal, s1, R.const(-3.4028234663852886e+38, "float32"))
            s3: R.Tensor((1, 2, n, p + n), "float32") = R.add(s2, bias)
            pr: R.Tensor((1, 2, n, p + n), "float32") = R.nn.softmax(s3, axis=-1)
            out: R.Tensor((1, 2, n, 8), "float32") = R.matmul(pr, present_v)
            R.output(out, present_k, present_v)
        return (out, present_k, present_v)
)";

std::string fused(std::string_view src) {
  const ir::ir_module out = kiln::run(t::fuse_attention{}, ir::parse_module(src));
  for (const ir::diagnostic& d : ir::verify(out)) FAIL_CHECK("not well formed after the pass: " << d.to_string());
  const std::string text = ir::print(out);
  CHECK(ir::print(ir::parse_module(text)) == text);
  return text;
}

tensor attention_input(shape_vector shape, float scale, float shift = -1.0f) {
  tensor x = tensor::empty(std::move(shape), dtype::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 13) * scale + shift;
  return x;
}

tensor causal_mask(std::int64_t n, std::int64_t total) {
  tensor c = tensor::empty({n, total}, dtype::bool_);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < total; ++j) static_cast<std::uint8_t*>(c.data())[i * total + j] = j <= total - n + i;
  return c;
}

}  // namespace

TEST_CASE("fuse_attention: GPT-2's chain becomes one kernels.attention call reading the keys transposed in place") {
  const std::string out = fused(gpt2_attention);
  CHECK(contains(out, R"x(R.call_dps_packed(R.ExternFunc("kernels.attention"), (q, present_k, present_v, R.prim_value(1, "bool"), R.str("(divide x0 2.8284270763397217)"), R.str("(add x0 x1)"), R.prim_value(1), R.prim_value(-3.4028234663852886e+38, "float64"), causal, bias), out_sinfo=R.Tensor((1, 2, n, 8), "float32")))x"));
  for (const char* gone : {"R.nn.softmax", "R.where", "R.divide", "R.permute_dims", "R.matmul"}) CHECK_FALSE(contains(out, gone));
}

TEST_CASE("fuse_attention: a mask that keeps where false, no mask, nested calls, the scale on either side") {
  const std::string out = fused(R"(@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((4, 6, 8), "float32"), k: R.Tensor((4, 8, 6), "float32"), v: R.Tensor((4, 6, 5), "float32"), m: R.Tensor((6,), "bool"), b: R.Tensor((4, 1, 6), "float32")) -> R.Tuple(R.Tensor((4, 6, 5), "float32"), R.Tensor((4, 6, 5), "float32")):
        with R.dataflow():
            s: R.Tensor((4, 6, 6), "float32") = R.multiply(R.const(0.5, "float32"), R.matmul(q, k))
            s1: R.Tensor((4, 6, 6), "float32") = R.where(m, R.const(-10000, "float32"), s)
            a: R.Tensor((4, 6, 5), "float32") = R.matmul(R.nn.softmax(s1, axis=2), v)
            c: R.Tensor((4, 6, 5), "float32") = R.matmul(R.nn.softmax(R.add(b, R.matmul(q, k))), v)
            R.output(a, c)
        return (a, c)
)");
  CHECK(contains(out, R"x((q, k, v, R.prim_value(0, "bool"), R.str("(multiply 0.5 x0)"), R.str(""), R.prim_value(2), R.prim_value(-10000.0, "float64"), m), )x"));
  CHECK(contains(out, R"x((q, k, v, R.prim_value(0, "bool"), R.str("(add x1 x0)"), R.str(""), R.prim_value(0), R.prim_value(0.0, "float64"), R.null_value(), b), )x"));
  CHECK_FALSE(contains(out, "R.nn.softmax"));
}

TEST_CASE("fuse_attention leaves alone softmax along another axis, scores used twice, a tensor fill, a broadcasting chain and two wheres") {
  const std::string src = R"(@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((2, 6, 8), "float32"), k: R.Tensor((2, 8, 6), "float32"), v: R.Tensor((2, 6, 5), "float32"), m: R.Tensor((6, 6), "bool"), f: R.Tensor((6, 6), "float32"), big: R.Tensor((3, 2, 6, 6), "float32")) -> R.Tuple(R.Tensor((2, 6, 5), "float32"), R.Tensor((2, 6, 5), "float32"), R.Tensor((2, 6, 6), "float32"), R.Tensor((2, 6, 5), "float32"), R.Tensor((3, 2, 6, 5), "float32"), R.Tensor((2, 6, 5), "float32")):
        with R.dataflow():
            a: R.Tensor((2, 6, 5), "float32") = R.matmul(R.nn.softmax(R.matmul(q, k), axis=1), v)
            s: R.Tensor((2, 6, 6), "float32") = R.matmul(q, k)
            b: R.Tensor((2, 6, 5), "float32") = R.matmul(R.nn.softmax(s), v)
            c: R.Tensor((2, 6, 5), "float32") = R.matmul(R.nn.softmax(R.where(m, R.matmul(q, k), f)), v)
            d: R.Tensor((3, 2, 6, 5), "float32") = R.matmul(R.nn.softmax(R.add(R.matmul(q, k), big)), v)
            e: R.Tensor((2, 6, 5), "float32") = R.matmul(R.nn.softmax(R.where(m, R.where(m, R.matmul(q, k), R.const(0, "float32")), R.const(0, "float32"))), v)
            R.output(a, b, s, c, d, e)
        return (a, b, s, c, d, e)
)";
  const std::string out = fused(src);
  CHECK_FALSE(contains(out, "kernels.attention"));
}

TEST_CASE("fuse_attention: compiled steps over a growing cache equal the unfused program, in bytecode and compiled mode") {
  const ir::ir_module m = ir::parse_module(gpt2_attention);
  const vm::executable fused_ex = kiln::compile(m);
  CHECK(contains(fused_ex.as_text(), "kernels.attention"));
  const vm::executable& fused_compiled = compiled_mode(m);
  CHECK(contains(fused_compiled.generated_source, "kernels.attention"));
  const vm::executable plain_ex = compile_without(m, "fuse_attention");
  CHECK_FALSE(contains(plain_ex.as_text(), "kernels.attention"));
  // The fused program in bytecode and in compiled mode, each fed its own cache back, against the unfused one.
  std::vector<std::unique_ptr<vm::virtual_machine>> machines;
  for (const vm::executable* ex : {&plain_ex, &fused_ex, &fused_compiled})
    machines.push_back(std::make_unique<vm::virtual_machine>(*ex, vm::vm_options{}, kiln::vm::kernel_registry()));
  std::vector<std::pair<vm::value, vm::value>> caches(3, {vm::value(tensor::empty({1, 2, 0, 8}, dtype::float32)), vm::value(tensor::empty({1, 2, 0, 8}, dtype::float32))});
  std::int64_t total = 0;
  for (int step = 0; step < 6; ++step) {
    CAPTURE(step);
    const std::int64_t n = step == 0 ? 7 : 1;
    total += n;
    tensor bias = tensor::empty({1, 1, 1, total}, dtype::float32);
    for (std::int64_t j = 0; j < total; ++j) bias.data<float>()[j] = j == 1 ? -3.4028234663852886e+38f : 0.0f;  // position 1 is padding
    std::vector<vm::value> results;
    for (std::size_t e = 0; e < 3; ++e) {
      const std::vector<vm::value> args{vm::value(attention_input({1, 2, n, 8}, 0.125f + float(step))), vm::value(attention_input({1, 2, n, 8}, 0.25f - float(step))),
                                        vm::value(attention_input({1, 2, n, 8}, 0.5f, float(step))), caches[e].first, caches[e].second,
                                        vm::value(causal_mask(n, total)), vm::value(bias)};
      results.push_back(machines[e]->invoke_span("main", args));
      caches[e] = {results.back().as_tuple()[1], results.back().as_tuple()[2]};
    }
    CHECK(max_difference(results[1], results[0]) <= 1e-5);
    CHECK(max_difference(results[2], results[0]) <= 1e-5);
  }
}
