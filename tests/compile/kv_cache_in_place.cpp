// SPDX-License-Identifier: Apache-2.0
// kv_cache_in_place: a returned concat(parameter, new) becomes an append into a capacity buffer.
// The IR it makes, what it leaves alone, and that a compiled step fed its own result back writes
// in place and computes what concat does — in bytecode and in the memory the planner gives it.
#include <kiln/compile.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>
#include <kiln/runtime/kv_cache.hpp>
#include <kiln/transform/default_pipeline.hpp>
#include <kiln/vm/kernels.hpp>

#include "helpers.hpp"

using namespace kiln_test;
namespace t = kiln::transform;

namespace {

/// One decoder-like step: the cache grows by the new positions k (after a scale, so that k is a
/// value the planner places in its arena), and the scores read the grown cache.
const char* step_src(std::string_view attrs) {
  static std::string s;
  s = std::string(R"(@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((1, 2, n, 4), "float32"), k: R.Tensor((1, 2, n, 4), "float32"), past: R.Tensor((1, 2, p, 4), "float32")) -> R.Tuple(R.Tensor((1, 2, n, p + n), "float32"), R.Tensor((1, 2, p + n, 4), "float32")):
)") + std::string(attrs) +
      R"(        with R.dataflow():
            ks: R.Tensor((1, 2, n, 4), "float32") = R.multiply(k, R.const(0.5, "float32"))
            present: R.Tensor((1, 2, p + n, 4), "float32") = R.concat((past, ks), axis=2)
            scores: R.Tensor((1, 2, n, p + n), "float32") = R.matmul(q, R.permute_dims(present, axes=[0, 1, 3, 2]))
            R.output(scores, present)
        return (scores, present)
)";
  return s.c_str();
}

std::string lowered(std::string_view src) {
  using lower = kiln::sequential<t::legalize_ops, t::kv_cache_in_place>;
  const ir::ir_module out = kiln::run(lower{}, ir::parse_module(src));
  for (const ir::diagnostic& d : ir::verify(out)) FAIL_CHECK("not well formed after the pass: " << d.to_string());
  const std::string text = ir::print(out);
  CHECK(ir::print(ir::parse_module(text)) == text);
  return text;
}

tensor filled(shape_vector shape, float scale) {
  tensor x = tensor::empty(std::move(shape), dtype::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 13) * scale - 1.0f;
  return x;
}

}  // namespace

TEST_CASE("kv_cache_in_place: a returned concat of a parameter and a new tensor becomes kernels.kv_cache_append") {
  const std::string out = lowered(step_src(""));
  CHECK(contains(out, R"(R.call_packed("kernels.kv_cache_append", past, ks, R.prim_value(2), R.prim_value(0), sinfo_args=R.Tensor((1, 2, p + n, 4), "float32")))"));
  CHECK_FALSE(contains(out, "kernels.concat"));
  // With upper bounds the buffer's room is the bound of p + n.
  const std::string bounded = lowered(step_src(R"(        R.func_attr({"tir_var_upper_bound": {"p": 100, "n": 28}})
)"));
  CHECK(contains(bounded, R"(R.call_packed("kernels.kv_cache_append", past, ks, R.prim_value(2), R.prim_value(128), )"));
}

TEST_CASE("kv_cache_in_place leaves alone a concat not returned, one whose first operand is not a parameter or has a fixed length, and three operands") {
  const std::string out = lowered(R"(@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((2, n), "float32"), b: R.Tensor((2, n), "float32"), c: R.Tensor((2, 3), "float32")) -> R.Tuple(R.Tensor((2, n * 2), "float32"), R.Tensor((2, n * 3), "float32"), R.Tensor((2, n * 2), "float32"), R.Tensor((2, n + 3), "float32")):
        with R.dataflow():
            lv: R.Tensor((2, n * 2), "float32") = R.concat((a, b), axis=1)
            lv1: R.Tensor((2, n * 2), "float32") = R.nn.relu(lv)
            lv2: R.Tensor((2, n * 3), "float32") = R.concat((a, b, a), axis=1)
            lv3: R.Tensor((2, n), "float32") = R.add(a, b)
            lv4: R.Tensor((2, n * 2), "float32") = R.concat((lv3, a), axis=1)
            lv5: R.Tensor((2, n + 3), "float32") = R.concat((c, a), axis=1)
            R.output(lv1, lv2, lv4, lv5)
        return (lv1, lv2, lv4, lv5)
)");
  CHECK_FALSE(contains(out, "kv_cache_append"));
}

TEST_CASE("kv_cache_in_place: a compiled step fed its own cache back appends in place and computes what concat does") {
  for (const char* attrs : {"", R"(        R.func_attr({"tir_var_upper_bound": {"p": 40, "n": 8}})
)"}) {
    CAPTURE(attrs);
    const ir::ir_module m = ir::parse_module(step_src(attrs));
    vm::executable in_place = kiln::compile(m);
    CHECK(contains(in_place.as_text(), "kernels.kv_cache_append"));
    vm::executable copying = compile_without(m, "kv_cache_in_place");
    CHECK_FALSE(contains(copying.as_text(), "kernels.kv_cache_append"));
    vm::virtual_machine a(in_place, {}, kiln::vm::kernel_registry()), b(copying, {}, kiln::vm::kernel_registry());

    vm::value past_a(tensor::empty({1, 2, 0, 4}, dtype::float32)), past_b = past_a;
    const void* buffer = nullptr;
    for (int step = 0; step < 12; ++step) {
      const std::int64_t n = step == 0 ? 5 : 1;  // a prompt of 5, then one position per step
      const vm::value q(filled({1, 2, n, 4}, 0.25f + float(step))), k(filled({1, 2, n, 4}, 0.5f - float(step)));
      const vm::value ra = a.invoke_span("main", std::vector<vm::value>{q, k, past_a});
      const vm::value rb = b.invoke_span("main", std::vector<vm::value>{q, k, past_b});
      CHECK(max_difference(ra, rb) == 0);
      const tensor present = ra.as_tuple()[1].as_tensor();
      CHECK(present.shape() == shape_vector{1, 2, 5 + step, 4});
      if (step == 0) buffer = present.data();
      CHECK(present.data() == buffer);  // one buffer: 64 positions, or the bound of 48
      past_a = ra.as_tuple()[1];
      past_b = rb.as_tuple()[1];
    }
  }
}
