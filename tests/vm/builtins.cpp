// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

using namespace kiln;
using namespace kiln::vm;
using kiln_test::message_of;

namespace {

/// Calls the built-in `name` directly with `args`.
template <class... Args>
value call_builtin(std::string_view name, Args&&... args) {
  const auto f = global_registry().find(name);
  REQUIRE(f.has_value());
  const value vals[] = {value(), value(std::forward<Args>(args))...};
  const value* ptrs[sizeof...(Args) + 1];
  for (std::size_t i = 0; i < sizeof...(Args); ++i) ptrs[i] = &vals[i + 1];
  return (*f)(call_args(ptrs, sizeof...(Args)));
}

/// A minimal vm_context for the built-ins that need one.
struct fake_vm final : vm_context {
  kiln::runtime::allocator& allocator_for(std::int64_t) override { return kiln::runtime::default_allocator(); }
  std::int64_t num_devices() const noexcept override { return 1; }
  value call(const value& f, call_args args) override {
    std::vector<const value*> all(args.data(), args.data() + args.size());
    for (auto& b : f.as_closure().bound) all.push_back(&b);
    return f.as_closure().native(call_args(all.data(), all.size()));
  }
  const value& constant(std::size_t) const override { throw kiln::error("no constants"); }
};

constexpr std::int64_t imm = 0, store = 1, noop = 2, load = 3;

}  // namespace

TEST_CASE("match_shape: the four modes against a tensor or a shape, with the heap") {
  fake_vm vm;
  const value heap = call_builtin("vm.builtin.alloc_shape_heap", static_cast<vm_context*>(&vm), 2);
  CHECK(heap.as_tensor().shape() == shape_vector{2});
  const value x(tensor::zeros({4, 7, 3}, dtype::float32));
  // dim 0 == 4, heap[0] = dim 1, dim 2 ignored
  call_builtin("vm.builtin.match_shape", x, heap, 3, imm, 4, store, 0, noop, 0, "main x");
  CHECK(heap.as_tensor().to_vector<std::int64_t>()[0] == 7);
  // A shape value with dim 1 == heap[0]
  call_builtin("vm.builtin.match_shape", value::shape({1, 7}), heap, 2, imm, 1, load, 0, "main y");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.match_shape", x, heap, 3, imm, 5, noop, 0, noop, 0, "main: x"); }) ==
        "vm.builtin.match_shape: main: x: dimension 0 of shape [4, 7, 3] is 4, expected 5");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.match_shape", value::shape({2, 8}), heap, 2, noop, 0, load, 0, "f: y"); }) ==
        "vm.builtin.match_shape: f: y: dimension 1 of shape [2, 8] is 8, expected 7 (from shape heap slot 0)");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.match_shape", x, heap, 2, noop, 0, noop, 0, "f: x"); }) ==
        "vm.builtin.match_shape: f: x: rank is 3 (shape [4, 7, 3]), expected 2");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.match_shape", x, heap, 3, store, 5, noop, 0, noop, 0, "f: x"); }) ==
        "vm.builtin.match_shape: f: x: shape heap index 5 is outside the heap of 2");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.match_shape", value(1), heap, 0, "f: x"); }) ==
        "vm.builtin.match_shape: f: x: expected a tensor or a shape, got int");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.match_shape", x, heap, 3, imm, 4, "f"); }).find("do not match ndim 3") !=
        std::string::npos);
}

TEST_CASE("make_shape and match_prim_value read and write the same heap") {
  fake_vm vm;
  const value heap = call_builtin("vm.builtin.alloc_shape_heap", static_cast<vm_context*>(&vm), 3);
  call_builtin("vm.builtin.match_prim_value", 12, heap, store, 2, "n");
  CHECK(call_builtin("vm.builtin.make_shape", heap, 3, imm, 5, 1, 2, imm, 1).as_shape() == shape_vector{5, 12, 1});
  call_builtin("vm.builtin.match_prim_value", 12, heap, load, 2, "n");
  call_builtin("vm.builtin.match_prim_value", 3, heap, imm, 3, "m");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.match_prim_value", 4, heap, imm, 3, "main: m"); }) ==
        "vm.builtin.match_prim_value: main: m: the value is 4, expected 3");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.match_prim_value", 13, heap, load, 2, "main: n"); }) ==
        "vm.builtin.match_prim_value: main: n: the value is 13, expected 12 (from shape heap slot 2)");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.make_shape", heap, 1, 7, 0); }) ==
        "vm.builtin.make_shape: unknown make_shape mode 7");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.make_shape", value(tensor::zeros({2}, dtype::int32)), 0); }) ==
        "vm.builtin.make_shape: the shape heap must be a contiguous 1-d int64 tensor, got int32[2]");
  CHECK(call_builtin("vm.builtin.make_shape", value(), 1, imm, 9).as_shape() == shape_vector{9});  // no heap needed
}

TEST_CASE("storage and tensors allocated from it") {
  fake_vm vm;
  const value st = call_builtin("vm.builtin.alloc_storage", static_cast<vm_context*>(&vm), value::shape({16}), 0, "float32", "global");
  CHECK(st.as_object<kiln::runtime::storage>()->nbytes() == 64);
  const value a = call_builtin("vm.builtin.alloc_tensor", st, 0, value::shape({2, 4}), "float32");
  const value b = call_builtin("vm.builtin.alloc_tensor", st, 32, value::shape({8}), "float32");
  CHECK(a.as_tensor().shape() == shape_vector{2, 4});
  b.as_tensor().data<float>()[0] = 3;
  CHECK(a.as_tensor().node()->data.get() == b.as_tensor().node()->data.get());
  CHECK(message_of([&] { call_builtin("vm.builtin.alloc_tensor", st, 32, value::shape({9}), "float32"); }).find("does not fit in a storage of 64 bytes") !=
        std::string::npos);
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.alloc_tensor", st, 0, value::shape({1}), "float33"); }) ==
        "vm.builtin.alloc_tensor: unknown dtype 'float33'");
}

TEST_CASE("copy, null_value, read_if_cond, tuples and shape_of") {
  CHECK(call_builtin("vm.builtin.copy", 5).as_int() == 5);
  CHECK(call_builtin("vm.builtin.null_value").is_null());
  CHECK(call_builtin("vm.builtin.read_if_cond", 2).as_bool());
  CHECK_FALSE(call_builtin("vm.builtin.read_if_cond", false).as_bool());
  CHECK(call_builtin("vm.builtin.read_if_cond", value(tensor::from_values<bool>({}, {true}))).as_bool());
  CHECK_FALSE(call_builtin("vm.builtin.read_if_cond", value(tensor::from_values<float>({1}, {0.f}))).as_bool());
  CHECK(message_of<value_error>([] { call_builtin("vm.builtin.read_if_cond", value(tensor::zeros({2}, dtype::int32))); }) ==
        "vm.builtin.read_if_cond: the condition tensor int32[2] has more than one element");
  const value t = call_builtin("vm.builtin.make_tuple", 1, "two", 3.0);
  CHECK(call_builtin("vm.builtin.tuple_size", t).as_int() == 3);
  CHECK(call_builtin("vm.builtin.tuple_getitem", t, 1).as_string() == "two");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.tuple_getitem", t, 3); }) ==
        "vm.builtin.tuple_getitem: index 3 is out of range for a tuple of 3");
  CHECK(call_builtin("vm.builtin.shape_of", value(tensor::zeros({3, 1}, dtype::int8))).as_shape() == shape_vector{3, 1});
}

TEST_CASE("check_tensor_info, check_shape_info and check_tuple_info") {
  const value x(tensor::zeros({2, 2}, dtype::float32));
  call_builtin("vm.builtin.check_tensor_info", x, 2, "float32", "main: x");
  call_builtin("vm.builtin.check_tensor_info", x, -1, "", "main: x");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.check_tensor_info", x, 3, "", "main: x"); }) ==
        "vm.builtin.check_tensor_info: main: x: rank is 2, expected 3");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.check_tensor_info", x, 2, "int8", "main: x"); }) ==
        "vm.builtin.check_tensor_info: main: x: dtype is float32, expected int8");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.check_tensor_info", 1, 2, "", "main: x"); }) ==
        "vm.builtin.check_tensor_info: main: x: expected a tensor, got int");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.check_shape_info", value::shape({1}), 2, "s"); }) ==
        "vm.builtin.check_shape_info: s: rank is 1, expected 2");
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.check_tuple_info", value::tuple({1}), 2, "t"); }) ==
        "vm.builtin.check_tuple_info: t: size is 1, expected 2");
}

TEST_CASE("make_closure and invoke_closure through a VM context") {
  fake_vm vm;
  const value add = value(object_ptr<const closure_obj>([] {
    auto c = kiln::runtime::make_object<closure_obj>();
    c->name = "sub";
    c->native = make_native("sub", [](std::int64_t a, std::int64_t b) { return a - b; });
    return c;
  }()));
  const value bound = call_builtin("vm.builtin.make_closure", add, 1);
  CHECK(call_builtin("vm.builtin.invoke_closure", static_cast<vm_context*>(&vm), bound, 10).as_int() == 9);
  CHECK(message_of<value_error>([&] { call_builtin("vm.builtin.invoke_closure", 5, bound, 10); }) ==
        "kiln::vm: native function 'vm.builtin.invoke_closure', argument 0: expected vm, got int");
}
