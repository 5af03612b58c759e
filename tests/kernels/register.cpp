// SPDX-License-Identifier: Apache-2.0
// The kernels through the VM: bytecode allocates the outputs and calls the registered natives.
#include <kiln/kernels/register.hpp>
#include <kiln/vm/vm.hpp>

#include "../common/message_of.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

using namespace kiln;
using namespace kiln::vm;
using kiln_test::message_of;

namespace {

function_registry& registry() {
  static function_registry* r = [] {
    auto* reg = new function_registry();
    register_builtins(*reg);
    kernels::register_kernels(*reg);
    return reg;
  }();
  return *r;
}

/// main(a, b): s = storage; t = alloc_tensor(s); kernels.<op>(a, b, t); return t   (shape [n])
executable binary_program(const std::string& op, std::int64_t n, const char* dtype_name) {
  exec_builder b;
  b.begin_function("main", {"a", "b"}, 4);
  const auto shape = b.c(b.add_constant(value::shape({n})));
  b.emit_call("vm.builtin.alloc_storage", {b.vm(), shape, b.imm(0), b.c(b.add_constant(value(dtype_name))), b.c(b.add_constant(value("global")))}, 2);
  b.emit_call("vm.builtin.alloc_tensor", {b.r(2), b.imm(0), shape, b.c(b.add_constant(value(dtype_name)))}, 3);
  b.emit_call("kernels." + op, {b.r(0), b.r(1), b.r(3)}, void_register);
  b.emit_ret(3);
  b.end_function();
  return b.get();
}

}  // namespace

TEST_CASE("bytecode calls the registered kernels, destination-passing") {
  const tensor a = kiln_test::random_tensor<float>({37}, -1, 1, 1), b = kiln_test::random_tensor<float>({37}, -1, 1, 2);
  virtual_machine add_vm(binary_program("add", 37, "float32"), {}, registry());
  kiln_test::check_all_close(add_vm.invoke("main", a, b).as_tensor().to_vector<float>(), kernels::add(a, b).to_vector<float>());
  virtual_machine less_vm(binary_program("less", 37, "bool"), {}, registry());
  CHECK(kiln_test::bools(less_vm.invoke("main", a, b).as_tensor()) == kiln_test::bools(kernels::less(a, b)));
  // A kernel error reaches the caller with the bytecode location; the VM is fine afterwards.
  const std::string msg = message_of<vm_error>([&] { add_vm.invoke("main", a, tensor::zeros({5}, dtype::float32)); });
  CHECK(msg == "kiln::vm: in 'main' at instruction 2 (call 'kernels.add'): kiln::kernels::add: operands of shapes [37] and [5] do not broadcast "
               "(dimension 0 is 37 in one and 5 in another)");
  CHECK(add_vm.invoke("main", a, a).as_tensor().to_vector<float>()[0] == 2 * a.to_vector<float>()[0]);
}

TEST_CASE("kernels.fused parses a description once and runs it; kernels.clip takes its bounds") {
  exec_builder b;
  b.begin_function("main", {"x", "y", "out"}, 3);
  b.emit_call("kernels.fused", {b.c(b.add_constant(value("(add x0 (exp x1))"))), b.r(0), b.r(1), b.r(2)}, void_register);
  b.emit_call("kernels.clip", {b.r(2), b.c(b.add_constant(value(-1.0))), b.c(b.add_constant(value(2.0))), b.r(2)}, void_register);
  b.emit_ret(2);
  b.end_function();
  virtual_machine vm(b.get(), {}, registry());
  const tensor x = kiln_test::random_tensor<float>({2, 50}, -2, 2, 3), y = kiln_test::random_tensor<float>({50}, -2, 2, 4);
  const tensor out = tensor::zeros({2, 50}, dtype::float32);
  for (int i = 0; i < 3; ++i) vm.invoke("main", x, y, out);
  kiln_test::check_all_close(out.to_vector<float>(), kernels::clip(kernels::add(x, kernels::exp(y)), -1, 2).to_vector<float>());
  CHECK(message_of<vm_error>([&] { vm.invoke("main", x, 3, out); }).find("kiln::kernels::fused: argument 2 must be a tensor, got int") != std::string::npos);
}

TEST_CASE("reductions and softmax through the VM") {
  exec_builder b;
  b.begin_function("main", {"x", "s", "m", "out"}, 4);
  b.emit_call("kernels.sum", {b.r(0), b.c(b.add_constant(value::shape({1}))), b.c(b.add_constant(value(false))), b.r(1)}, void_register);
  b.emit_call("kernels.argmax", {b.r(0), b.c(b.add_constant(value())), b.c(b.add_constant(value(false))), b.r(2)}, void_register);
  b.emit_call("kernels.softmax", {b.r(0), b.imm(-1), b.r(3)}, void_register);
  b.emit_ret(3);
  b.end_function();
  virtual_machine vm(b.get(), {}, registry());
  const tensor x = kiln_test::random_tensor<float>({3, 20}, -2, 2, 8);
  const tensor s = tensor::zeros({3}, dtype::float32), m = tensor::zeros({}, dtype::int64), out = tensor::zeros({3, 20}, dtype::float32);
  vm.invoke("main", x, s, m, out);
  kiln_test::check_all_close(s.to_vector<float>(), kernels::sum(x, {1}).to_vector<float>());
  CHECK(m.to_vector<std::int64_t>() == kernels::argmax(x).to_vector<std::int64_t>());
  kiln_test::check_all_close(out.to_vector<float>(), kernels::softmax(x).to_vector<float>());
}
