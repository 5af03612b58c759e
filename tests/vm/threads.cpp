// SPDX-License-Identifier: Apache-2.0
// Threads as users have them: one compiled executable shared by virtual machines on several
// threads, each machine's kernels also running on the kernels' thread pool, and compilations on
// several threads at once. The results are those of one machine on one thread, bit for bit. This
// suite is the one the test script also runs under ThreadSanitizer.
#include "../compile/helpers.hpp"
#include "../common/pool_threads.hpp"
#include "../ir/models.hpp"

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
    vm::virtual_machine machine(ex, {}, kernels::global_registry());
    want = values_of(machine.invoke_span("encoder_layer", args));
  }
  const pool_threads pool(2);
  std::vector<std::vector<float>> got(3);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      vm::virtual_machine machine(ex, {}, kernels::global_registry());  // a machine per thread, as in TVM
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
