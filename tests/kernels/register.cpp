// SPDX-License-Identifier: Apache-2.0
// The kernels through the VM: bytecode allocates the outputs and calls the registered natives.
#include <kiln/kernels/attention.hpp>
#include <kiln/kernels/kernels.hpp>
#include <kiln/vm/kernels.hpp>
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
    vm::register_kernels(*reg);
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

TEST_CASE("kernels.fused parses a description once and runs it, kernels.clip takes its bounds") {
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

TEST_CASE("kernels.matmul_fused and kernels.conv2d_fused take an epilogue description and its operands before the output") {
  exec_builder b;
  b.begin_function("main", {"x", "w", "bias", "out"}, 4);
  b.emit_call("kernels.matmul_fused", {b.r(0), b.r(1), b.c(b.add_constant(value(false))), b.c(b.add_constant(value(true))),
                                       b.c(b.add_constant(value("(relu (add x0 x1)) ; lv lv1"))), b.r(2), b.r(3)},
              void_register);
  b.emit_ret(3);
  b.end_function();
  virtual_machine vm(b.get(), {}, registry());
  const tensor x = kiln_test::random_tensor<float>({7, 20}, -1, 1, 5), w = kiln_test::random_tensor<float>({9, 20}, -1, 1, 6);
  const tensor bias = kiln_test::random_tensor<float>({9}, -1, 1, 7), out = tensor::zeros({7, 9}, dtype::float32);
  vm.invoke("main", x, w, bias, out);
  CHECK(out.to_vector<float>() == kernels::relu(kernels::add(kernels::matmul(x, w, false, true), bias)).to_vector<float>());
  CHECK(message_of<vm_error>([&] { vm.invoke("main", x, w, 1.5, out); }).find("kiln::kernels::matmul_fused: argument 5 must be a tensor, got float") !=
        std::string::npos);

  exec_builder c;
  c.begin_function("main", {"x", "w", "residual", "out"}, 4);
  c.emit_call("kernels.conv2d_fused", {c.r(0), c.r(1), c.c(c.add_constant(value())), c.c(c.add_constant(value::shape({1, 1}))),
                                       c.c(c.add_constant(value::shape({1, 1, 1, 1}))), c.c(c.add_constant(value::shape({1, 1}))), c.imm(1),
                                       c.c(c.add_constant(value("(relu (add x0 x1))"))), c.r(2), c.r(3)},
              void_register);
  c.emit_ret(3);
  c.end_function();
  virtual_machine cvm(c.get(), {}, registry());
  const tensor img = kiln_test::random_tensor<float>({1, 3, 6, 6}, -1, 1, 8), k3 = kiln_test::random_tensor<float>({4, 3, 3, 3}, -1, 1, 9);
  const tensor res = kiln_test::random_tensor<float>({1, 4, 6, 6}, -1, 1, 10), y = tensor::zeros({1, 4, 6, 6}, dtype::float32);
  cvm.invoke("main", img, k3, res, y);
  kernels::conv2d_params p;
  p.padding = {1, 1, 1, 1};
  CHECK(y.to_vector<float>() == kernels::relu(kernels::add(kernels::conv2d(img, k3, tensor(), p), res)).to_vector<float>());
}

TEST_CASE("kernels.attention takes its score descriptions, mask mode, fill and mask, then the operands and the output") {
  exec_builder b;
  b.begin_function("main", {"q", "k", "v", "mode", "mask", "bias", "out"}, 7);
  b.emit_call("kernels.attention", {b.r(0), b.r(1), b.r(2), b.c(b.add_constant(value(true))), b.c(b.add_constant(value("(multiply x0 0.5)"))),
                                    b.c(b.add_constant(value("(add x0 x1)"))), b.r(3), b.c(b.add_constant(value(-1e30))), b.r(4), b.r(5), b.r(6)},
              void_register);
  b.emit_ret(6);
  b.end_function();
  virtual_machine vm(b.get(), {}, registry());
  const tensor q = kiln_test::random_tensor<float>({2, 3, 8}, -1, 1, 1), k = kiln_test::random_tensor<float>({2, 5, 8}, -1, 1, 2),
               v = kiln_test::random_tensor<float>({2, 5, 4}, -1, 1, 3), bias = kiln_test::random_tensor<float>({5}, -1, 0, 4);
  tensor mask = tensor::empty({3, 5}, dtype::bool_);
  for (std::int64_t i = 0; i < 15; ++i) static_cast<std::uint8_t*>(mask.data())[i] = i % 5 <= i / 5 + 2;
  const tensor out = tensor::zeros({2, 3, 4}, dtype::float32);
  vm.invoke("main", q, k, v, 1, mask, bias, out);
  const kernels::fused_expr pre = kernels::fused_expr::parse("(multiply x0 0.5)"), post = kernels::fused_expr::parse("(add x0 x1)");
  const tensor want = kernels::attention(q, k, v, true, {&pre, mask, true, -1e30, &post}, std::vector<tensor>{bias});
  CHECK(out.to_vector<float>() == want.to_vector<float>());
  CHECK(message_of<vm_error>([&] { vm.invoke("main", q, k, v, 3, mask, bias, out); })
            .find("kiln::kernels::attention: the mask mode must be 0 (none), 1 (keep where true) or 2 (keep where false), got 3") != std::string::npos);
  CHECK(message_of<vm_error>([&] { vm.invoke("main", q, k, v, 0, mask, bias, out); })
            .find("kiln::kernels::attention: a mask is given but the mask mode is 0 (none)") != std::string::npos);
  CHECK(message_of<vm_error>([&] { vm.invoke("main", q, k, v, 1, value(), bias, out); })
            .find("kiln::kernels::attention: the mask mode needs a mask tensor") != std::string::npos);
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

TEST_CASE("data movement through the VM: tuples for concat and split, a returned view, string modes") {
  exec_builder b;
  // main(parts, pieces, x, ids, cat, perm, sliced, taken, padded) -> reshape_view(x, [-1])
  b.begin_function("main", {"parts", "pieces", "x", "ids", "cat", "perm", "sliced", "taken", "padded"}, 10);
  auto c = [&](value v) { return b.c(b.add_constant(std::move(v))); };
  b.emit_call("kernels.concat", {b.r(0), b.imm(1), b.r(4)}, void_register);
  b.emit_call("kernels.split", {b.r(4), b.imm(1), b.r(1)}, void_register);
  b.emit_call("kernels.permute_dims", {b.r(2), c(value::shape({})), b.r(5)}, void_register);
  b.emit_call("kernels.strided_slice", {b.r(2), c(value::shape({1})), c(value::shape({-1})), c(value::shape({0})), c(value::shape({-2})), b.r(6)},
              void_register);
  b.emit_call("kernels.take", {b.r(2), b.r(3), c(value()), b.r(7)}, void_register);
  b.emit_call("kernels.pad", {b.r(2), c(value::shape({1, 0, 0, 2})), c(value("reflect")), c(value(0.0)), b.r(8)}, void_register);
  b.emit_call("kernels.reshape_view", {b.r(2), c(value::shape({-1}))}, 9);
  b.emit_ret(9);
  b.end_function();
  virtual_machine vm(b.get(), {}, registry());
  const tensor p0 = kiln_test::random_tensor<float>({2, 3}, -1, 1, 1), p1 = kiln_test::random_tensor<float>({2, 1}, -1, 1, 2);
  const tensor x = kiln_test::random_tensor<float>({3, 5}, -1, 1, 3);
  const tensor ids = tensor::from_values<std::int64_t>({2}, {14, -15});
  const tensor cat = tensor::empty({2, 4}, dtype::float32), q0 = tensor::empty({2, 2}, dtype::float32), q1 = tensor::empty({2, 2}, dtype::float32);
  const tensor perm = tensor::empty({5, 3}, dtype::float32), sliced = tensor::empty({3, 2}, dtype::float32);
  const tensor taken = tensor::empty({2}, dtype::float32), padded = tensor::empty({4, 7}, dtype::float32);
  const value flat = vm.invoke("main", value::tuple({p0, p1}), value::tuple({q0, q1}), x, ids, cat, perm, sliced, taken, padded);
  CHECK(same_tensor(cat, kernels::concat({p0, p1}, 1)));
  CHECK(same_tensor(q0, cat.slice(1, 0, 2)));
  CHECK(same_tensor(q1, cat.slice(1, 2, 4)));
  CHECK(same_tensor(perm, kernels::permute_dims(x)));
  CHECK(same_tensor(sliced, kernels::strided_slice(x, {1}, {-1}, {0}, {-2})));
  CHECK(taken.to_vector<float>() == std::vector<float>{x.to_vector<float>()[14], x.to_vector<float>()[0]});
  CHECK(same_tensor(padded, kernels::pad(x, {1, 0, 0, 2}, kernels::pad_mode::reflect)));
  CHECK(flat.as_tensor().data() == x.data());
  CHECK(flat.as_tensor().shape() == runtime::shape_vector{15});
  CHECK(message_of<vm_error>([&] { vm.invoke("main", value::tuple({p0, 1}), value::tuple({q0, q1}), x, ids, cat, perm, sliced, taken, padded); })
            .find("kiln::kernels::concat: field 1 of the inputs must be a tensor, got int") != std::string::npos);
  CHECK(message_of<vm_error>([&] { vm.invoke("main", p0, value::tuple({q0, q1}), x, ids, cat, perm, sliced, taken, padded); })
            .find("kiln::kernels::concat: the inputs must be a tuple of tensors, got tensor") != std::string::npos);
}

TEST_CASE("conv2d and pooling through the VM, with the IR's attribute forms") {
  exec_builder b;
  // main(x, w, bias, y, m, a, g) -> y: conv 3x3 pad 1 (one value), max pool 3x3 s2 pad 1, avg pool 2x2, global
  b.begin_function("main", {"x", "w", "bias", "y", "m", "a", "g"}, 7);
  auto c = [&](value v) { return b.c(b.add_constant(std::move(v))); };
  b.emit_call("kernels.conv2d", {b.r(0), b.r(1), b.r(2), c(value::shape({1})), c(value::shape({1})), c(value::shape({1, 1})), b.imm(1), b.r(3)},
              void_register);
  b.emit_call("kernels.max_pool2d", {b.r(3), c(value::shape({3})), c(value::shape({2, 2})), c(value::shape({1, 1, 1, 1})), c(value::shape({1})),
                                     c(value(false)), b.r(4)},
              void_register);
  b.emit_call("kernels.avg_pool2d", {b.r(3), c(value::shape({2})), c(value::shape({2})), c(value::shape({0})), c(value::shape({1})),
                                     c(value(true)), c(value(false)), b.r(5)},
              void_register);
  b.emit_call("kernels.global_avg_pool2d", {b.r(4), b.r(6)}, void_register);
  b.emit_ret(3);
  b.end_function();
  virtual_machine vm(b.get(), {}, registry());
  const tensor x = kiln_test::random_tensor<float>({1, 3, 9, 9}, -1, 1, 1), w = kiln_test::random_tensor<float>({4, 3, 3, 3}, -1, 1, 2);
  const tensor y = tensor::empty({1, 4, 9, 9}, dtype::float32), m = tensor::empty({1, 4, 5, 5}, dtype::float32);
  const tensor a = tensor::empty({1, 4, 5, 5}, dtype::float32), g = tensor::empty({1, 4, 1, 1}, dtype::float32);
  vm.invoke("main", x, w, value(), y, m, a, g);
  kernels::conv2d_params cp;
  cp.padding = {1, 1, 1, 1};
  CHECK(kiln_test::same_tensor(y, kernels::conv2d(x, w, {}, cp)));
  kernels::pool2d_params mp{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false};
  CHECK(kiln_test::same_tensor(m, kernels::max_pool2d(y, mp)));
  kernels::pool2d_params ap{{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, false};
  CHECK(kiln_test::same_tensor(a, kernels::avg_pool2d(y, ap)));
  CHECK(kiln_test::same_tensor(g, kernels::global_avg_pool2d(m)));
  // A malformed attribute is an error naming the operator.
  exec_builder bad;
  bad.begin_function("main", {"x", "w", "y"}, 3);
  bad.emit_call("kernels.conv2d", {bad.r(0), bad.r(1), bad.c(bad.add_constant(value())), bad.c(bad.add_constant(value::shape({1, 1, 1}))),
                                   bad.c(bad.add_constant(value::shape({0}))), bad.c(bad.add_constant(value::shape({1}))), bad.imm(1), bad.r(2)},
                void_register);
  bad.emit_ret(2);
  bad.end_function();
  virtual_machine bad_vm(bad.get(), {}, registry());
  CHECK(message_of<vm_error>([&] { bad_vm.invoke("main", x, w, y); }).find("kiln::kernels::conv2d: strides must have 1 or 2 values, got 3") !=
        std::string::npos);
}

TEST_CASE("every elementwise kernel of the calling convention's lists is registered under its name, with its arity") {
  namespace abi = kernels::abi;
  const tensor a = kiln_test::random_tensor<float>({9}, -1, 1, 3), b = kiln_test::random_tensor<float>({9}, 0.5, 1, 4);
  for (std::string_view op : abi::binary_operators) {
    CAPTURE(op);
    REQUIRE(registry().find("kernels." + std::string(op)).has_value());
    const bool logical = op.starts_with("logical");
    const bool compares = logical || op.find("equal") != std::string_view::npos || op.starts_with("less") || op.starts_with("greater");
    const char* out_dtype = compares ? "bool" : "float32";
    const tensor x = logical ? kernels::greater(a, tensor::zeros({9}, dtype::float32)) : a;
    const tensor y = logical ? kernels::greater(b, tensor::zeros({9}, dtype::float32)) : b;
    virtual_machine m(binary_program(std::string(op), 9, out_dtype), {}, registry());
    CHECK(m.invoke("main", x, y).as_tensor().numel() == 9);
  }
  for (std::string_view op : abi::unary_operators) {
    CAPTURE(op);
    REQUIRE(registry().find("kernels." + std::string(op)).has_value());
  }
  // Bytecode that calls a kernel with the arguments of another signature is refused when loaded.
  const std::string msg = message_of<kiln::error>([&] { virtual_machine wrong(binary_program("exp", 9, "float32"), {}, registry()); });
  CHECK(msg == "kiln::vm::virtual_machine: function 'main', instruction 2 (call) calls native function 'kernels.exp' with 3 arguments, it takes 2");
}
