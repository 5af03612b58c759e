// SPDX-License-Identifier: Apache-2.0
// Bad input to a compiled program: a clear error naming the function and the parameter, and a VM
// that still works afterwards. Bad input to the compiler: errors naming what and where.
#include "../ir/models.hpp"
#include "helpers.hpp"

using namespace kiln;
using namespace kiln_test;

namespace {
struct compiled_mlp {
  /// In the bytecode mode, or with `compiled` in the compiled mode (built into a library).
  explicit compiled_mlp(bool compiled = false) : ex(compiled ? compiled_mode(m) : kiln::compile(m)) {}
  ir::ir_module m = make_mlp();
  vm::executable ex;
  vm::virtual_machine machine{ex, {}, vm::kernel_registry()};
  std::vector<vm::value> args = arguments_for(m, "main", {{"n", 2}});
  /// The error of main with argument `i` replaced.
  std::string error_with(std::size_t i, vm::value v) {
    auto a = args;
    a[i] = std::move(v);
    return message_of<vm::vm_error>([&] { machine.invoke_span("main", a); });
  }
};
}  // namespace

TEST_CASE("wrong rank, dtype or static dimension of an argument: an error naming the function and parameter") {
  // In both modes: the compiled one checks static parameters inline and calls the built-in, which
  // reports, only when a check fails.
  for (bool mode : {false, true}) {
  CAPTURE(mode);
  compiled_mlp c(mode);
  CHECK(contains(c.error_with(0, tensor::zeros({2, 784, 1}, dtype::float32)),
                 "vm.builtin.check_tensor_info: main: parameter 'x' (R.Tensor((n, 784), \"float32\")): rank is 3, expected 2"));
  CHECK(contains(c.error_with(1, tensor::zeros({784, 128}, dtype::float64)),
                 "vm.builtin.check_tensor_info: main: parameter 'w1' (R.Tensor((784, 128), \"float32\")): dtype is float64, expected float32"));
  CHECK(contains(c.error_with(0, tensor::zeros({2, 783}, dtype::float32)),
                 "vm.builtin.match_shape: main: parameter 'x' (R.Tensor((n, 784), \"float32\")): dimension 1 of shape [2, 783] is 783, expected 784"));
  CHECK(contains(c.error_with(2, vm::value(std::int64_t{3})), "main: parameter 'b1' (R.Tensor((128,), \"float32\")): expected a tensor, got int"));
  // The VM is fine afterwards, and gives what it gave before.
  CHECK(max_difference(c.machine.invoke_span("main", c.args), interpreter::reference_evaluator(c.m).call("main", c.args)) == 0);
  if (mode) CHECK(contains(c.error_with(1, tensor::zeros({784, 127}, dtype::float32)), "kiln::vm: in 'main' at binding '_' (call 'vm.builtin.match_shape'): "));
  }
}

TEST_CASE("a size variable bound to different values by two parameters is an error") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32"), y: R.Tensor((n, 4), "float32")) -> R.Tensor((n, 4), "float32"):
        z: R.Tensor((n, 4), "float32") = R.add(x, y)
        return z
)");
  const vm::executable ex = kiln::compile(m);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const std::string msg = message_of<vm::vm_error>([&] { machine.invoke("main", tensor::zeros({3, 4}, dtype::float32), tensor::zeros({5, 4}, dtype::float32)); });
  CHECK(contains(msg, "vm.builtin.match_shape: main: parameter 'y' (R.Tensor((n, 4), \"float32\")): dimension 0 of shape [5, 4] is 5, expected 3"));
  CHECK(machine.invoke("main", tensor::zeros({5, 4}, dtype::float32), tensor::zeros({5, 4}, dtype::float32)).as_tensor().shape() == shape_vector{5, 4});
}

TEST_CASE("a match_cast that does not hold fails where it stands, naming the binding") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor("float32", ndim=2)) -> R.Tensor("float32", ndim=2):
        y = R.match_cast(x, R.Tensor((k, 3), "float32"))
        z: R.Tensor((k, 3), "float32") = R.exp(y)
        return z
)");
  const vm::executable ex = kiln::compile(m);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  CHECK(machine.invoke("main", tensor::zeros({4, 3}, dtype::float32)).as_tensor().to_vector<float>() == std::vector<float>(12, 1.f));
  CHECK(contains(message_of<vm::vm_error>([&] { machine.invoke("main", tensor::zeros({4, 2}, dtype::float32)); }),
                 "vm.builtin.match_shape: main: match_cast 'y' (R.Tensor((k, 3), \"float32\")): dimension 1 of shape [4, 2] is 2, expected 3"));
}

TEST_CASE("a kernel's error at run time names the function, the instruction and the kernel") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "int64"), i: R.Tensor((2,), "int64")) -> R.Tensor((2,), "int64"):
        y: R.Tensor((2,), "int64") = R.take(x, i, axis=0)
        return y
)");
  const vm::executable ex = kiln::compile(m);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const std::string msg = message_of<vm::vm_error>([&] {
    machine.invoke("main", tensor::from_values<std::int64_t>({3}, {1, 2, 3}), tensor::from_values<std::int64_t>({2}, {0, 7}));
  });
  CHECK(contains(msg, "kiln::vm: in 'main' at instruction"));
  CHECK(contains(msg, "(call 'kernels.take')"));
}

TEST_CASE("the compiler's own errors: bad pipeline text, an unknown pass, code generation of unlowered IR") {
  const ir::ir_module m = make_mlp();
  CHECK(contains(message_of<usage_error>([&] { kiln::compile(m, {.pipeline = "legalize_ops,,"}); }), "kiln::parse_pipeline"));
  CHECK(contains(message_of<usage_error>([&] { kiln::compile(m, {.pipeline = "legalize_opz"}); }), "did you mean 'legalize_ops'?"));
  CHECK(message_of<codegen::codegen_error>([&] { kiln::compile(m, {.pipeline = "canonicalize_bindings"}); }) ==
        "kiln::codegen::vm_codegen: in function 'main', binding 'lv': operator R.matmul reached code generation; the pipeline must lower it "
        "first (legalize_ops, call_tir_rewrite, vm_builtin_lower)");
  CHECK(message_of<codegen::codegen_error>([&] { kiln::compile(m, {.pipeline = "legalize_ops,to_non_dataflow,call_tir_rewrite,vm_builtin_lower"}); }) ==
        "kiln::codegen::vm_codegen: in function 'main', binding 'lv_storage': the shape [n, 128] uses size variables; run vm_shape_lower first");
}

TEST_CASE("compile runs under the current pass context: its opt level, its instruments") {
  const ir::ir_module m = make_mlp();
  kiln::pass_context ctx(0);
  ctx.set_instruments({kiln::instrument(kiln::pass_timing{})});
  {
    kiln::pass_context_scope scope(ctx);
    kiln::compile(m);
  }
  const std::string report = ctx.instruments()[0].target<kiln::pass_timing>()->table();
  for (const char* pass : {"kiln.default", "kiln.simplify", "canonicalize_bindings", "legalize_ops", "kiln.lower_to_vm", "static_plan_block_memory", "vm_shape_lower"})
    CHECK_MESSAGE(contains(report, pass), pass);
  CHECK(!contains(report, "fold_constant"));  // opt level 1: skipped at 0
}
