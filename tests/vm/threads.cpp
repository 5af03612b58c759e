// SPDX-License-Identifier: Apache-2.0
// Threads as users have them: one compiled executable shared by virtual machines on several
// threads, each machine's kernels also running on the kernels' thread pool, and compilations on
// several threads at once. The results are those of one machine on one thread, bit for bit. One
// machine called from two threads refuses the second caller. This suite is the one the test
// script also runs under ThreadSanitizer.
#include "../compile/helpers.hpp"
#include "../common/message_of.hpp"
#include "../common/pool_threads.hpp"
#include "../ir/models.hpp"

#include <atomic>
#include <thread>

using namespace kiln;
using namespace kiln_test;

namespace {
/// The bytes of a tensor result, for bit-for-bit comparison.
std::vector<float> values_of(const vm::value& v) { return v.as_tensor().to_vector<float>(); }
}  // namespace

TEST_CASE("one executable runs on virtual machines in several threads, with the kernels' pool, bit for bit") {
  const ir::ir_module m = make_transformer_layer();
  const vm::executable ex = kiln::compile(m);
  const std::vector<vm::value> args = arguments_for(m, "encoder_layer", {{"batch", 2}, {"seq", 8}}, 5);
  std::vector<float> want;
  {
    vm::virtual_machine machine(ex, {}, vm::kernel_registry());
    want = values_of(machine.invoke_span("encoder_layer", args));
  }
  const pool_threads pool(2);
  std::vector<std::vector<float>> got(3);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      vm::virtual_machine machine(ex, {}, vm::kernel_registry());  // a machine per thread, as in TVM
      for (int i = 0; i < 3; ++i) got[t] = values_of(machine.invoke_span("encoder_layer", args));
    });
  for (auto& t : threads) t.join();
  for (const auto& g : got) CHECK(g == want);
}

TEST_CASE("compilations on several threads at once give the same executable") {
  const ir::ir_module m = make_cnn();
  const std::vector<std::byte> want = vm::serialize(kiln::compile(m));
  std::vector<std::vector<std::byte>> got(3);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      kiln::pass_context ctx(2);  // each thread its own context
      kiln::pass_context_scope scope(ctx);
      got[t] = vm::serialize(kiln::compile(m));
    });
  for (auto& t : threads) t.join();
  for (const auto& g : got) CHECK(g == want);
}

namespace {
/// main() calls "test.wait", which tells the test it has started and waits until the test lets it go.
struct waiting_program {
  std::atomic<bool> entered{false}, release{false};
  vm::function_registry registry;
  vm::executable exec;
  waiting_program() {
    vm::register_builtins(registry);
    registry.add("test.wait", [this]() -> std::int64_t {
      entered = true;
      while (!release) std::this_thread::yield();
      return 7;
    });
    vm::exec_builder b;
    b.begin_function("main", {}, 1);
    b.emit_call("test.wait", {}, 0);
    b.emit_ret(0);
    b.end_function();
    exec = b.get();
  }
};
}  // namespace

TEST_CASE("a virtual machine refuses a second thread while it runs, with a message, and serves it afterwards") {
  waiting_program p;
  vm::virtual_machine machine(p.exec, {}, p.registry);
  vm::value first;
  std::thread runner([&] { first = machine.invoke("main"); });
  while (!p.entered) std::this_thread::yield();
  const std::string busy =
      "kiln::vm: this virtual_machine is already running 'main' on another thread; use one virtual_machine per thread "
      "(a machine serves one caller at a time)";
  CHECK(message_of<usage_error>([&] { machine.invoke("main"); }) == busy);
  CHECK(message_of<usage_error>([&] { machine.get_function("main")(); }) == busy);
  CHECK(message_of<usage_error>([&] { machine.set_input("main"); }) == busy);
  CHECK(message_of<usage_error>([&] { machine.invoke_stateful("main"); }) == busy);
  CHECK(message_of<usage_error>([&] { machine.save_function("main", "saved"); }) == busy);
  CHECK(message_of<usage_error>([&] { machine.set_instrument(nullptr); }) == busy);
  CHECK(message_of<usage_error>([&] { (void)machine.allocator_stats(); }) == busy);
  p.release = true;
  runner.join();
  CHECK(first.as_int() == 7);
  CHECK(machine.invoke("main").as_int() == 7);  // free again, for this thread too
  machine.set_input("main");
  machine.invoke_stateful("main");
  CHECK(machine.get_outputs("main").as_int() == 7);
}

TEST_CASE("two threads hammering one virtual machine: every call returns the right result or is refused, none crashes") {
  const ir::ir_module m = make_transformer_layer();
  const vm::executable ex = kiln::compile(m);
  const std::vector<vm::value> args = arguments_for(m, "encoder_layer", {{"batch", 1}, {"seq", 4}}, 3);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const std::vector<float> want = values_of(machine.invoke_span("encoder_layer", args));
  std::atomic<int> served{0}, refused{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        try {
          if (values_of(machine.invoke_span("encoder_layer", args)) != want) ++wrong;
          ++served;
        } catch (const usage_error& e) {
          // "already running 'encoder_layer'", or "already in use" when the other thread is between
          // its claim and naming the function (or releasing both): the name is for the message only.
          if (std::string(e.what()).find(" on another thread; use one virtual_machine per thread") == std::string::npos) ++wrong;
          ++refused;
        }
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(served + refused == 400);
  CHECK(served > 0);  // a call is refused only while another is served
  MESSAGE(served.load() << " calls served, " << refused.load() << " refused");
}
