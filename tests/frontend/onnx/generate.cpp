// SPDX-License-Identifier: Apache-2.0
// A GPT-2 decoder exported from PyTorch in the decoder-with-past form (scripts/gpt2.py): one
// executable for every prompt length and every step, greedy decoding token for token as PyTorch's
// with its own cache, in bytecode and in the compiled mode.
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/runtime/compare.hpp>
#include <kiln/runtime/npy.hpp>
#include <kiln/vm/generate.hpp>
#include <kiln/vm/kernels.hpp>
#include <kiln/vm/library.hpp>

#include "../../common/message_of.hpp"
#include "../../models/gpt2_accuracy.hpp"
#include "models_dir.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace kiln;
namespace kx = kiln::frontend::onnx;
namespace fs = std::filesystem;

namespace {

fs::path gpt2_stem() { return kiln_test::onnx_models_dir() / "gpt2_test"; }

std::vector<std::int64_t> ints(const fs::path& file) { return runtime::load_npy(file).to_vector<std::int64_t>(); }

/// Greedy decoding of the reference prompt of length `length` on `machine`: the tokens equal
/// PyTorch's, every step's logits lie within 1e-4 of PyTorch's (absolute and relative), and their
/// largest error against the logits in double precision is at most twice PyTorch's float32 one.
void check_greedy(vm::virtual_machine& machine, int length) {
  CAPTURE(length);
  const fs::path stem = gpt2_stem();
  const std::string l = std::to_string(length);
  const std::vector<std::int64_t> prompt = ints(stem.string() + ".prompt_" + l + ".npy");
  const std::vector<std::int64_t> want = ints(stem.string() + ".tokens_" + l + ".npy");
  const runtime::tensor want_logits = runtime::load_npy(stem.string() + ".logits_" + l + ".npy");  // [steps, vocab]
  const std::int64_t vocab = want_logits.shape()[1];
  kiln_test::gpt2_accuracy accuracy(stem, length, want_logits);
  vm::decoder dec(machine);
  std::size_t step = 0;
  vm::generate_options options{.max_new_tokens = std::int64_t(want.size())};
  options.on_logits = [&](const runtime::tensor& logits) {
    CAPTURE(step);
    REQUIRE(logits.shape()[0] == 1);
    REQUIRE(logits.shape()[2] == vocab);
    REQUIRE(step < want.size());
    const std::int64_t last = logits.shape()[1] - 1, s = std::int64_t(step);
    // within atol = rtol = 1e-4, as every model test compares with PyTorch
    const runtime::closeness c = runtime::compare_close(logits.slice(1, last, last + 1).contiguous().view({1, vocab}),
                                                        want_logits.slice(0, s, s + 1), 1e-4, 1e-4);
    CHECK_MESSAGE(c.ok(), c.describe());
    accuracy.add(s, logits.slice(1, last, last + 1));
    ++step;
  };
  const auto got = dec.generate({prompt}, options);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == want);
  CHECK(step == want.size());
  accuracy.check();
}

}  // namespace

TEST_CASE("GPT-2 with past from PyTorch: greedy decoding gives PyTorch's tokens at every prompt length") {
  const ir::ir_module m = kx::import_file(gpt2_stem().string() + ".onnx");
  vm::virtual_machine machine(kiln::compile(m), {}, vm::kernel_registry());
  const vm::decoder dec(machine);
  const vm::decoder_layout& layout = dec.layout();
  CHECK(layout.caches.size() == 4);
  CHECK(layout.caches[0].name == "past_key_values_0_key");
  CHECK(layout.caches[0].axis == 2);
  CHECK(layout.attention_mask.has_value());
  CHECK(layout.position_ids.has_value());
  for (int length : {2, 5, 13, 31}) check_greedy(machine, length);
}

TEST_CASE("GPT-2 with past from PyTorch: the compiled mode decodes as the bytecode does") {
  const ir::ir_module m = kx::import_file(gpt2_stem().string() + ".onnx");
  const vm::executable ex = kiln::compile(m, {.mode = kiln::exec_mode::compiled});
  const fs::path lib = fs::temp_directory_path() / ("kiln-test-" + std::to_string(::getpid()) + "-gpt2.so");
  vm::export_library(ex, lib, {.flags = {"-O1", "-march=native"}});  // the test checks results, not speed
  vm::executable loaded = vm::load_module(lib);
  fs::remove(lib);  // a loaded library stays mapped
  vm::virtual_machine machine(std::move(loaded), {}, vm::kernel_registry());
  check_greedy(machine, 13);
}

TEST_CASE("GPT-2 with past from PyTorch: prompts of different lengths in one batch decode as each alone") {
  const ir::ir_module m = kx::import_file(gpt2_stem().string() + ".onnx");
  vm::virtual_machine machine(kiln::compile(m), {}, vm::kernel_registry());
  vm::decoder dec(machine);
  const fs::path stem = gpt2_stem();
  std::vector<std::vector<std::int64_t>> prompts;
  std::vector<std::vector<std::int64_t>> want;
  for (int length : {5, 31, 2, 13}) {
    prompts.push_back(ints(stem.string() + ".prompt_" + std::to_string(length) + ".npy"));
    want.push_back(ints(stem.string() + ".tokens_" + std::to_string(length) + ".npy"));
    want.back().resize(24);
  }
  std::vector<std::vector<std::int64_t>> streamed(prompts.size());
  vm::generate_options options{.max_new_tokens = 24};
  options.on_token = [&](std::size_t row, std::int64_t token) { streamed.at(row).push_back(token); };
  const auto got = dec.generate(prompts, options);
  CHECK(got == want);
  CHECK(streamed == want);

  // A stop token ends its row (the token is kept); the others go on.
  options.stop_token = want[1][3];
  options.on_token = nullptr;
  const auto stopped = dec.generate(prompts, options);
  REQUIRE(stopped.size() == 4);
  CHECK(stopped[1] == std::vector<std::int64_t>(want[1].begin(), want[1].begin() + 4));
}

TEST_CASE("GPT-2 with past from PyTorch: sampling is seeded, and top_k 1 is greedy") {
  const ir::ir_module m = kx::import_file(gpt2_stem().string() + ".onnx");
  vm::virtual_machine machine(kiln::compile(m), {}, vm::kernel_registry());
  vm::decoder dec(machine);
  const std::vector<std::vector<std::int64_t>> prompts = {ints(gpt2_stem().string() + ".prompt_5.npy")};
  const vm::generate_options sample{.max_new_tokens = 16, .temperature = 0.8, .top_k = 50, .top_p = 0.95, .seed = 7};
  const auto a = dec.generate(prompts, sample);
  CHECK(a == dec.generate(prompts, sample));
  vm::generate_options other = sample;
  other.seed = 8;
  CHECK(a != dec.generate(prompts, other));
  const vm::generate_options top1{.max_new_tokens = 16, .temperature = 1.5, .top_k = 1, .seed = 3};
  CHECK(dec.generate(prompts, top1) == dec.generate(prompts, {.max_new_tokens = 16}));
}

TEST_CASE("GPT-2 with past from PyTorch: upper bounds on the lengths plan memory once and refuse a longer context") {
  const kx::import_options bounded{.upper_bounds = {{"batch_size", 4}, {"past_sequence_length", 48}, {"sequence_length", 32}}};
  const ir::ir_module m = kx::import_file(gpt2_stem().string() + ".onnx", bounded);
  CHECK(ir::print(m).find("\"tir_var_upper_bound\": {\"batch_size\": 4, \"past_sequence_length\": 48, \"sequence_length\": 32}") != std::string::npos);
  vm::virtual_machine machine(kiln::compile(m), {}, vm::kernel_registry());
  vm::decoder dec(machine);
  const std::vector<std::int64_t> prompt = ints(gpt2_stem().string() + ".prompt_13.npy");
  std::vector<std::int64_t> want = ints(gpt2_stem().string() + ".tokens_13.npy");
  want.resize(24);
  CHECK(dec.generate({prompt}, {.max_new_tokens = 24}) == std::vector<std::vector<std::int64_t>>{want});
  // 13 + 40 positions: the step after a past of 48 is refused, naming the bound.
  const std::string msg = kiln_test::message_of<kiln::error>([&] { dec.generate({prompt}, {.max_new_tokens = 40}); });
  CHECK(msg.find("past_sequence_length = 49 exceeds its upper bound 48") != std::string::npos);
  // A name the model does not have is refused at import, with the names it has.
  CHECK(kiln_test::message_of<kiln::error>([&] {
          kx::import_file(gpt2_stem().string() + ".onnx", {.upper_bounds = {{"context", 8}}});
        }).find("import_options::upper_bounds names 'context', which is not a symbolic dimension of the model's inputs (they are: batch_size, "
                "past_sequence_length, sequence_length)") != std::string::npos);
}

TEST_CASE("GPT-2 with past from PyTorch: the caches are appended in place, and with bounds no step after the first allocates") {
  const kx::import_options bounded{.upper_bounds = {{"batch_size", 1}, {"past_sequence_length", 63}, {"sequence_length", 16}}};
  const vm::executable ex = kiln::compile(kx::import_file(gpt2_stem().string() + ".onnx", bounded));
  CHECK(ex.as_text().find("kernels.kv_cache_append") != std::string::npos);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const vm::decoder_layout layout = vm::decoder(machine).layout();
  const std::vector<std::int64_t> prompt = ints(gpt2_stem().string() + ".prompt_13.npy");
  const std::vector<std::int64_t> want = ints(gpt2_stem().string() + ".tokens_13.npy");
  // The decoder's loop by hand, greedy, to see the caches and the VM's allocator between steps.
  std::vector<vm::value> args(layout.num_params);
  for (const auto& c : layout.caches) args[c.param] = vm::value(runtime::tensor::empty({1, c.dims[1], 0, c.dims[3]}, c.dt));
  std::vector<std::int64_t> ids = prompt;
  std::int64_t total = 0;
  std::vector<const void*> buffers;
  std::size_t system_after_first = 0;
  const vm::function_handle f = machine.get_function("main");
  for (std::size_t step = 0; step < 32; ++step) {
    const auto t = std::int64_t(ids.size());
    std::vector<std::int64_t> pos(ids.size());
    for (std::int64_t i = 0; i < t; ++i) pos[std::size_t(i)] = total + i;
    total += t;
    args[layout.input_ids] = vm::value(runtime::tensor::from_values<std::int64_t>({1, t}, std::span<const std::int64_t>(ids)));
    args[*layout.attention_mask] = vm::value(runtime::tensor::from_values<std::int64_t>({1, total}, std::vector<std::int64_t>(std::size_t(total), 1)));
    args[*layout.position_ids] = vm::value(runtime::tensor::from_values<std::int64_t>({1, t}, std::span<const std::int64_t>(pos)));
    const vm::value result = f.call(args);
    const auto results = result.as_tuple();
    for (std::size_t k = 0; k < layout.caches.size(); ++k) {
      const runtime::tensor present = results[k + 1].as_tensor();
      CHECK(present.shape()[2] == total);
      if (step == 0) buffers.push_back(present.data());
      else CHECK(present.data() == buffers[k]);  // the same buffer every step: appended in place
      args[layout.caches[k].param] = results[k + 1];
    }
    const runtime::tensor logits = results[0].as_tensor().contiguous();
    const float* last = logits.data<float>() + (t - 1) * logits.shape()[2];
    const auto token = std::int64_t(std::max_element(last, last + logits.shape()[2]) - last);
    CHECK(token == want[step]);
    ids = {token};
    if (step == 1) system_after_first = machine.allocator_stats().system_allocations;
  }
  CHECK(machine.allocator_stats().system_allocations == system_after_first);
}
