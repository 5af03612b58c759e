// SPDX-License-Identifier: Apache-2.0
// Bytecode generation: registers reused by liveness, literals without instructions, renamings
// without copies, control flow, and errors naming the function and binding.
#include <kiln/compile.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/vm/vm.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

using namespace kiln;
using kiln_test::message_of;

namespace {
vm::executable compile_text(const std::string& text, codegen::vm_codegen_options o = {}) {
  return kiln::compile(ir::parse_module(text), {.codegen = o});
}
const vm::function_info& fn(const vm::executable& e, const char* name) { return e.functions[*e.find_function(name)]; }

std::string chain(int n) {
  std::string s = "@I.ir_module\nclass Module:\n    @R.function\n    def main(x: R.Tensor((4,), \"float32\")) -> R.Tensor((4,), \"float32\"):\n        a0: R.Tensor((4,), \"float32\") = R.exp(x)\n";
  for (int i = 1; i < n; ++i)
    s += "        a" + std::to_string(i) + ": R.Tensor((4,), \"float32\") = R.exp(a" + std::to_string(i - 1) + ")\n";
  return s + "        return a" + std::to_string(n - 1) + "\n";
}
}  // namespace

TEST_CASE("registers are reused after a value's last use: a long chain needs a handful, not one per binding") {
  kiln::pass_context ctx;
  ctx.disable("kiln.fuse");  // which would make the chain one kernel call
  kiln::pass_context_scope scope(ctx);
  const vm::executable reused = compile_text(chain(50));
  const vm::executable one_each = compile_text(chain(50), {.reuse_registers = false});
  CHECK(fn(reused, "main").register_file_size <= 5);
  CHECK(fn(one_each, "main").register_file_size >= 50);
  vm::virtual_machine a(reused, {}, vm::kernel_registry()), b(one_each, {}, vm::kernel_registry());
  const runtime::tensor x = runtime::tensor::from_values<float>({4}, {0.f, 0.01f, -0.5f, 0.1f});
  CHECK(a.invoke("main", x).as_tensor().to_vector<float>() == b.invoke("main", x).as_tensor().to_vector<float>());
}

TEST_CASE("renamings and literals emit no instructions, parameters arrive in registers 0..N-1") {
  const vm::executable ex = compile_text(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32"), R.Shape([4])):
        a: R.Tensor((4,), "float32") = x
        b: R.Tensor((4,), "float32") = R.match_cast(a, R.Tensor((4,), "float32"))
        s: R.Shape([4]) = R.shape([4])
        return (b, y, s)
)", {});
  const std::string text = ex.as_text();
  CHECK(text.find("vm.builtin.copy") == std::string::npos);
  CHECK(text.find("vm.builtin.make_tuple") != std::string::npos);
  CHECK(text.find("in: %0, %1, c[") != std::string::npos);
  CHECK(fn(ex, "main").param_names == std::vector<std::string>{"x", "y"});
}

TEST_CASE("the executable carries each function's parameter names and types and its result type") {
  const vm::executable ex = compile_text(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32"), s: R.Shape([n]), k: R.Prim("int64")) -> R.Tuple(R.Tensor((n * 2, 4), "float32"), R.Shape([n])):
        y: R.Tensor((n * 2, 4), "float32") = R.concat((x, x), axis=0)
        return (y, s)
)");
  const auto& f = fn(ex, "main");
  REQUIRE(f.param_types.size() == 3);
  CHECK(f.param_types[0].text() == "R.Tensor((n, 4), \"float32\")");
  CHECK((*f.param_types[0].dims)[0] == vm::dim_signature{-1, "n"});
  CHECK((*f.param_types[0].dims)[1] == vm::dim_signature{4, ""});
  CHECK(f.signature_text() == "(x: R.Tensor((n, 4), \"float32\"), s: R.Shape([n]), k: R.Prim(\"int64\")) -> "
                              "R.Tuple(R.Tensor((n * 2, 4), \"float32\"), R.Shape([n]))");
  CHECK(ex.as_text().find("@main" + f.signature_text() + ":  # 3 args") != std::string::npos);
  CHECK(vm::deserialize(vm::serialize(ex)).functions == ex.functions);

  // A caller holding only the executable can check its inputs as the bytecode would.
  std::map<std::string, std::int64_t> bound;
  CHECK_FALSE(vm::check_argument(f.param_types[0], runtime::tensor::zeros({3, 4}, dtype::float32), bound));
  CHECK(vm::check_argument(f.param_types[1], vm::value::shape({2}), bound) == "dimension 0 is n = 3 (bound earlier), got 2");
}

TEST_CASE("an if becomes If and Goto, both branches copying their result into one register") {
  const vm::executable ex = compile_text(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32"), flag: R.Prim("bool")) -> R.Tensor((2,), "float32"):
        if flag:
            r: R.Tensor((2,), "float32") = R.negative(x)
        else:
            r: R.Tensor((2,), "float32") = R.exp(x)
        return r
)");
  const std::string text = ex.as_text();
  CHECK(text.find("if    %1") != std::string::npos);
  CHECK(text.find("goto") != std::string::npos);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const runtime::tensor x = runtime::tensor::from_values<float>({2}, {0.f, 1.f});
  CHECK(machine.invoke("main", x, true).as_tensor().to_vector<float>() == std::vector<float>{-0.f, -1.f});
  CHECK(machine.invoke("main", x, false).as_tensor().to_vector<float>()[0] == 1.f);
}

TEST_CASE("equal constant tensors share one pool entry") {
  const vm::executable ex = compile_text(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        a: R.Tensor((2,), "float32") = R.add(x, R.const([1.0, 2.0], "float32"))
        b: R.Tensor((2,), "float32") = R.multiply(a, R.const([1.0, 2.0], "float32"))
        return b
)");
  int tensors = 0;
  for (auto& c : ex.constants) tensors += c.is_tensor();
  CHECK(tensors == 1);
}

TEST_CASE("code generation refuses IR it cannot emit, naming the function and binding") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y: R.Tensor((2,), "float32") = R.exp(x)
        return y
)");
  CHECK(message_of<codegen::codegen_error>([&] { codegen::vm_codegen(m); }) ==
        "kiln::codegen::vm_codegen: in function 'helper', binding 'y': operator R.exp reached code generation; the pipeline must lower it first "
        "(legalize_ops, call_tir_rewrite, vm_builtin_lower)");
}
