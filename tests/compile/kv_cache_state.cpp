// SPDX-License-Identifier: Apache-2.0
// A key/value cache as a program's state (TVM's vm.builtin.attention_kv_cache_*): one function
// makes the caches, a step function appends to them and attends over their views. Compiled with
// and without fuse_attention, in bytecode and compiled mode: the same outputs step after step, one
// buffer throughout, and the built-ins' errors.
#include <kiln/compile.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/runtime/kv_cache.hpp>
#include <kiln/vm/builtins.hpp>
#include <kiln/vm/kernels.hpp>

#include "../common/message_of.hpp"
#include "helpers.hpp"

using namespace kiln_test;

namespace {

// docs/generation.md shows the module's functions (the region between the "# [program]" lines).
const char* stateful_attention = R"(@I.ir_module
class Module:
    # [program]
    @R.function
    def create_kv_cache() -> R.Tuple(R.Object, R.Object):
        init: R.Tensor((2, 16, 8), "float32") = R.broadcast_to(R.const(0, "float32"), R.shape([2, 16, 8]))
        kc: R.Object = R.call_packed("vm.builtin.attention_kv_cache_create", init, R.shape([2, 16, 8]), R.prim_value(0), R.prim_value(1), sinfo_args=R.Object)
        vc: R.Object = R.call_packed("vm.builtin.attention_kv_cache_create", init, R.shape([2, 16, 8]), R.prim_value(0), R.prim_value(1), sinfo_args=R.Object)
        return (kc, vc)

    @R.function
    def step(q: R.Tensor((2, n, 8), "float32"), k: R.Tensor((2, n, 8), "float32"), v: R.Tensor((2, n, 8), "float32"), all_len: R.Shape([m]), caches: R.Tuple(R.Object, R.Object)) -> R.Tuple(R.Tensor((2, n, 8), "float32"), R.Tuple(R.Object, R.Object)):
        kc: R.Object = caches[0]
        vc: R.Object = caches[1]
        kc1: R.Object = R.call_packed("vm.builtin.attention_kv_cache_append", kc, k, sinfo_args=R.Object)
        vc1: R.Object = R.call_packed("vm.builtin.attention_kv_cache_append", vc, v, sinfo_args=R.Object)
        keys: R.Tensor((2, m, 8), "float32") = R.call_packed("vm.builtin.attention_kv_cache_view", kc1, R.shape([2, m, 8]), sinfo_args=R.Tensor((2, m, 8), "float32"))
        values: R.Tensor((2, m, 8), "float32") = R.call_packed("vm.builtin.attention_kv_cache_view", vc1, R.shape([2, m, 8]), sinfo_args=R.Tensor((2, m, 8), "float32"))
        with R.dataflow():
            s: R.Tensor((2, n, m), "float32") = R.matmul(q, R.permute_dims(keys, axes=[0, 2, 1]))
            s1: R.Tensor((2, n, m), "float32") = R.multiply(s, R.const(0.35355339059327373, "float32"))
            p: R.Tensor((2, n, m), "float32") = R.nn.softmax(s1, axis=-1)
            o: R.Tensor((2, n, 8), "float32") = R.matmul(p, values)
            R.output(o)
        return (o, (kc1, vc1))
    # [program]
)";

tensor sample(shape_vector shape, float scale, float shift) {
  tensor x = tensor::empty(std::move(shape), dtype::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 11) * scale + shift;
  return x;
}

}  // namespace

TEST_CASE("a cache kept as state: created once, appended to and viewed by each step, in bytecode and compiled mode, fused or not") {
  const ir::ir_module m = ir::parse_module(stateful_attention);
  const vm::executable fused_ex = kiln::compile(m);
  CHECK(contains(fused_ex.as_text(), "kernels.attention"));
  const vm::executable& compiled = compiled_mode(m);
  const vm::executable plain_ex = compile_without(m, "fuse_attention");
  CHECK_FALSE(contains(plain_ex.as_text(), "kernels.attention"));
  std::vector<std::unique_ptr<vm::virtual_machine>> machines;
  std::vector<vm::value> caches;
  for (const vm::executable* ex : {&plain_ex, &fused_ex, &compiled}) {
    machines.push_back(std::make_unique<vm::virtual_machine>(*ex, vm::vm_options{}, kiln::vm::kernel_registry()));
    caches.push_back(machines.back()->invoke_span("create_kv_cache", std::vector<vm::value>{}));
  }
  const void* buffer = nullptr;
  std::int64_t total = 0;
  for (int step = 0; step < 20; ++step) {  // a prompt of 5, then one position at a time past the room of 16
    CAPTURE(step);
    const std::int64_t n = step == 0 ? 5 : 1;
    total += n;
    std::vector<vm::value> outs;
    for (std::size_t e = 0; e < machines.size(); ++e) {
      const std::vector<vm::value> args{vm::value(sample({2, n, 8}, 0.1f, float(step) * 0.01f)), vm::value(sample({2, n, 8}, -0.2f, 1.0f)),
                                        vm::value(sample({2, n, 8}, 0.3f, float(-step))), vm::value::shape({total}), caches[e]};
      const vm::value r = machines[e]->invoke_span("step", args);
      outs.push_back(r.as_tuple()[0]);
      caches[e] = r.as_tuple()[1];
    }
    CHECK(max_difference(outs[1], outs[0]) <= 1e-5);
    CHECK(max_difference(outs[2], outs[0]) <= 1e-5);
    const auto keys = caches[1].as_tuple()[0].as_object<kiln::runtime::attention_kv_cache>()->data();
    CHECK(keys.shape() == shape_vector{2, total, 8});
    if (step == 0) buffer = keys.data();
    CHECK((keys.data() == buffer) == (total <= 16));  // in place while there is room; then a buffer twice the length
  }
}

TEST_CASE("the key/value cache built-ins say what is wrong") {
  using kiln::vm::builtin::attention_kv_cache_append;
  using kiln::vm::builtin::attention_kv_cache_view;
  const tensor init = tensor::zeros({2, 4, 8}, dtype::float32);
  auto create = [&](std::vector<vm::value> args) {
    std::vector<const vm::value*> ptrs;
    for (const vm::value& a : args) ptrs.push_back(&a);
    return kiln::vm::builtin::attention_kv_cache_create(vm::call_args(ptrs.data(), ptrs.size()));
  };
  const vm::value cache = create({vm::value(init), vm::value::shape({2, 16, 8}), vm::value(std::int64_t(2)), vm::value(std::int64_t(1))});
  CHECK(attention_kv_cache_view(cache, vm::value::shape({2, 2, 8})).shape() == shape_vector{2, 2, 8});
  CHECK(message_of([&] { attention_kv_cache_view(cache, vm::value::shape({2, 3, 8})); }) ==
        "vm.builtin.attention_kv_cache_view: kiln::runtime::attention_kv_cache: a view of shape [2, 3, 8] asked of a cache of float32[2, 2, 8] (2 positions along axis 1)");
  CHECK(message_of([&] { attention_kv_cache_append(cache, tensor::zeros({2, 1, 4}, dtype::float32)); }) ==
        "vm.builtin.attention_kv_cache_append: kiln::runtime::kv_cache_append: the cache float32[2, 2, 8] and the new positions float32[2, 1, 4] differ in dimension 2 (only axis 1 may)");
  CHECK(message_of([&] { attention_kv_cache_append(vm::value(init), init); }) ==
        "vm.builtin.attention_kv_cache_append: expected a key/value cache (vm.AttentionKVCache, from attention_kv_cache_create), got tensor");
  CHECK(message_of([&] { create({vm::value(init), vm::value::shape({2, 16, 8}), vm::value(std::int64_t(5)), vm::value(std::int64_t(1))}); }) ==
        "vm.builtin.attention_kv_cache_create: kiln::runtime::attention_kv_cache: fill count 5 is outside [-1, 4] (-1: all of the initial data's 4 positions)");
  CHECK(message_of([&] { create({vm::value(init), vm::value::shape({2, 16, 8}), vm::value(std::int64_t(0))}); }) ==
        "vm.builtin.attention_kv_cache_create: kiln::runtime::attention_kv_cache: the reserved shape [2, 16, 8] and the initial data float32[2, 4, 8] differ in dimension 1 (only axis 0 may)");
  CHECK(message_of([&] { create({vm::value(init), vm::value::shape({3, 16, 8}), vm::value(std::int64_t(0)), vm::value(std::int64_t(1))}); }) ==
        "vm.builtin.attention_kv_cache_create: kiln::runtime::attention_kv_cache: the reserved shape [3, 16, 8] and the initial data float32[2, 4, 8] differ in dimension 0 (only axis 1 may)");
  CHECK(message_of([&] { create({vm::value(init)}); }) == "vm.builtin.attention_kv_cache_create: expects (init, reserve_shape, fill_count[, axis]), got 1 arguments");
  // The cache is still as it was after each refused call.
  CHECK(attention_kv_cache_view(cache, vm::value::shape({2, 2, 8})).shape() == shape_vector{2, 2, 8});
}

TEST_CASE("attention_kv_cache_array_popn and _clear drop positions of every cache of a tuple, or refuse and change none") {
  using kiln::runtime::attention_kv_cache;
  auto call = [](auto f, std::vector<vm::value> args) {
    std::vector<const vm::value*> ptrs;
    for (const vm::value& a : args) ptrs.push_back(&a);
    return f(vm::call_args(ptrs.data(), ptrs.size()));
  };
  auto make = [](std::int64_t n) {
    return vm::value::from_object(kiln::runtime::make_object<attention_kv_cache>(sample({2, n, 8}, 0.5f, 0.0f), shape_vector{2, 16, 8}, -1, 1));
  };
  const vm::value caches = vm::value::tuple({make(5), make(3)});
  auto lengths = [&] {
    std::vector<std::int64_t> l;
    for (const vm::value& c : caches.as_tuple()) l.push_back(c.as_object<attention_kv_cache>()->length());
    return l;
  };
  using kiln::vm::builtin::attention_kv_cache_array_clear;
  using kiln::vm::builtin::attention_kv_cache_array_popn;
  CHECK(call(attention_kv_cache_array_popn, {caches, vm::value(std::int64_t(2))}).is_null());
  CHECK(lengths() == std::vector<std::int64_t>{3, 1});
  CHECK(message_of([&] { call(attention_kv_cache_array_popn, {caches, vm::value(std::int64_t(2))}); }) ==
        "vm.builtin.attention_kv_cache_array_popn: cannot pop 2 positions of a cache holding 1");
  CHECK(lengths() == std::vector<std::int64_t>{3, 1});  // the first cache was not popped either
  const vm::value twice = vm::value::tuple({caches.as_tuple()[0], caches.as_tuple()[0]});  // one cache named twice: popped twice
  CHECK(message_of([&] { call(attention_kv_cache_array_popn, {twice, vm::value(std::int64_t(2))}); }) ==
        "vm.builtin.attention_kv_cache_array_popn: cannot pop 2 positions 2 times (the tuple holds it 2 times) of a cache holding 3");
  CHECK(lengths() == std::vector<std::int64_t>{3, 1});
  call(attention_kv_cache_array_popn, {twice, vm::value(std::int64_t(1))});
  CHECK(lengths() == std::vector<std::int64_t>{1, 1});
  CHECK(message_of([&] { call(attention_kv_cache_array_popn, {caches}); }) ==
        "vm.builtin.attention_kv_cache_array_popn: expects (caches, n), got 1 arguments");
  CHECK(message_of([&] { call(attention_kv_cache_array_popn, {make(2), vm::value(std::int64_t(1))}); }) ==
        "vm.builtin.attention_kv_cache_array_popn: expected a tuple of key/value caches, got object");
  CHECK(message_of([&] { call(attention_kv_cache_array_clear, {vm::value::tuple({make(2), vm::value(std::int64_t(1))})}); }) ==
        "vm.builtin.attention_kv_cache_array_clear: expected a key/value cache (vm.AttentionKVCache, from attention_kv_cache_create), got int");
  CHECK(call(attention_kv_cache_array_clear, {caches}).is_null());
  CHECK(lengths() == std::vector<std::int64_t>{0, 0});
}
