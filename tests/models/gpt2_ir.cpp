// SPDX-License-Identifier: Apache-2.0
// GPT-2 written in kiln's IR with its caches as the VM's state (examples/gpt2_ir.hpp), on the
// weights of the model scripts/gpt2.py exports: greedy decoding gives PyTorch's tokens, with the
// logits within 1e-4 at every step, for four prompt lengths, in bytecode and in compiled mode; one
// executable, the caches kept in place, no allocation after the first step.
#include "../../examples/gpt2_ir.hpp"
#include "../common/message_of.hpp"
#include "../frontend/onnx/models_dir.hpp"
#include "gpt2_accuracy.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace kiln;
namespace fs = std::filesystem;

namespace {

fs::path gpt2_ir_stem() { return kiln_test::onnx_models_dir() / "gpt2_test"; }
fs::path gpt2_ir_weights() { return kiln_test::onnx_models_dir() / "gpt2_test.weights"; }

std::vector<std::int64_t> gpt2_ir_ints(const fs::path& file) { return runtime::load_npy(file).to_vector<std::int64_t>(); }

/// 64 greedy steps from the reference prompt of `length` tokens: PyTorch's tokens, and every
/// step's logits within 1e-4 of PyTorch's: relatively, and absolutely on the scale of the step's
/// largest logit; and the largest error against the logits in double precision at most twice
/// PyTorch's float32 one. (The logits' rounding error is absolute, on the scale of the largest:
/// each is the last hidden state's product with an embedding row. Against double precision,
/// PyTorch's float32 logits of this model are off by up to 7e-5 and kiln's by up to 9e-5 where the
/// largest logit is about 15, so two float32 engines can differ by more than 1e-4 in a small logit.)
void check_gpt2_ir_greedy(vm::virtual_machine& machine, int length) {
  CAPTURE(length);
  const std::string stem = gpt2_ir_stem().string(), l = std::to_string(length);
  const std::vector<std::int64_t> prompt = gpt2_ir_ints(stem + ".prompt_" + l + ".npy");
  const std::vector<std::int64_t> want = gpt2_ir_ints(stem + ".tokens_" + l + ".npy");
  const runtime::tensor want_logits = runtime::load_npy(stem + ".logits_" + l + ".npy");  // [steps, vocab]
  const std::int64_t vocab = want_logits.shape()[1];
  kiln_test::gpt2_accuracy accuracy(stem, length, want_logits);
  gpt2_ir::sequence seq(machine);
  std::vector<std::int64_t> got;
  std::vector<std::int64_t> ids = prompt;
  for (std::size_t step = 0; step < want.size(); ++step) {
    CAPTURE(step);
    const runtime::tensor logits = seq.step(ids);
    REQUIRE(logits.shape() == runtime::shape_vector{1, 1, vocab});
    const auto s = std::int64_t(step);
    const runtime::tensor want_step = want_logits.slice(0, s, s + 1).contiguous();
    double scale = 1;
    for (float v : want_step.to_vector<float>()) scale = std::max(scale, double(std::abs(v)));
    const runtime::closeness c = runtime::compare_close(logits.contiguous().view({1, vocab}), want_step, 1e-4, 1e-4 * scale);
    CHECK_MESSAGE(c.ok(), c.describe());
    accuracy.add(s, logits);
    got.push_back(gpt2_ir::argmax(logits));
    ids = {got.back()};
  }
  CHECK(got == want);
  accuracy.check();
  CHECK(seq.length() == std::int64_t(prompt.size() + want.size() - 1));
}

}  // namespace

TEST_CASE("GPT-2 in kiln's IR: greedy decoding gives PyTorch's tokens at every prompt length (bytecode)") {
  const gpt2_ir::weights weights(gpt2_ir_weights());
  const ir::ir_module m = gpt2_ir::build(weights);
  CHECK(ir::verify(m).empty());
  const vm::executable ex = kiln::compile(m);
  const std::string text = ex.as_text();
  CHECK(text.find("kernels.attention") != std::string::npos);  // the attention of each layer: one kernel
  CHECK(text.find("vm.builtin.attention_kv_cache_append") != std::string::npos);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  for (int length : {2, 5, 13, 31}) check_gpt2_ir_greedy(machine, length);  // one executable for all
}

TEST_CASE("GPT-2 in kiln's IR: the compiled mode decodes as PyTorch does") {
  const vm::executable ex = kiln::compile(gpt2_ir::build(gpt2_ir::weights(gpt2_ir_weights())), {.mode = kiln::exec_mode::compiled});
  const fs::path lib = fs::temp_directory_path() / ("kiln-test-" + std::to_string(::getpid()) + "-gpt2-ir.so");
  vm::export_library(ex, lib, {.flags = {"-O1", "-march=native"}});  // the test checks results, not speed
  vm::executable loaded = vm::load_module(lib);
  fs::remove(lib);  // a loaded library stays mapped
  vm::virtual_machine machine(std::move(loaded), {}, vm::kernel_registry());
  for (int length : {2, 5, 13, 31}) check_gpt2_ir_greedy(machine, length);
}

TEST_CASE("GPT-2 in kiln's IR: the caches stay in place, no step after the first allocates, popping goes back, and the bound is enforced") {
  const gpt2_ir::weights weights(gpt2_ir_weights());
  vm::virtual_machine machine(kiln::compile(gpt2_ir::build(weights)), {}, vm::kernel_registry());
  gpt2_ir::sequence seq(machine);
  const std::vector<std::int64_t> prompt = gpt2_ir_ints(gpt2_ir_stem().string() + ".prompt_13.npy");
  std::vector<std::int64_t> ids = prompt;
  std::vector<const void*> buffers;
  std::size_t system_after_first = 0;
  std::vector<std::int64_t> tokens;
  for (int step = 0; step < 24; ++step) {
    CAPTURE(step);
    tokens.push_back(gpt2_ir::argmax(seq.step(ids)));
    ids = {tokens.back()};
    const auto caches = seq.caches().as_tuple();
    REQUIRE(caches.size() == std::size_t(2 * weights.cfg().n_layer));
    for (std::size_t i = 0; i < caches.size(); ++i) {
      const runtime::tensor data = caches[i].as_object<runtime::attention_kv_cache>()->data();
      CHECK(data.shape() == runtime::shape_vector{weights.cfg().n_head, seq.length(), weights.cfg().n_embd / weights.cfg().n_head});
      if (step == 0) buffers.push_back(data.data());
      else CHECK(data.data() == buffers[i]);  // appended in place: room for n_positions was reserved
    }
    if (step == 1) system_after_first = machine.allocator_stats().system_allocations;
  }
  CHECK(machine.allocator_stats().system_allocations == system_after_first);

  // Back 6 positions: feeding the tokens that followed them again continues as before, in the
  // same buffers (nothing else held a view of the dropped positions).
  REQUIRE(seq.length() == 13 + 23);
  seq.pop(6);  // positions 0..29 stay; 30 was where step 18 fed tokens[17]
  for (std::size_t step = 18; step < 23; ++step) {
    CAPTURE(step);
    CHECK(gpt2_ir::argmax(seq.step(std::span(&tokens[step - 1], 1))) == tokens[step]);
    CHECK(seq.caches().as_tuple()[0].as_object<runtime::attention_kv_cache>()->data().data() == buffers[0]);
  }
  CHECK(kiln_test::message_of<kiln::error>([&] { seq.pop(99); }) == "gpt2_ir::sequence::pop: cannot drop 99 of 35 positions");

  // A prompt longer than n_positions is refused before anything runs, naming the bound.
  gpt2_ir::sequence fresh(machine);
  const std::vector<std::int64_t> too_long(std::size_t(weights.cfg().n_positions + 1), 1);
  const std::string msg = kiln_test::message_of<kiln::error>([&] { fresh.step(too_long); });
  CHECK(msg.find("n = 257 exceeds its upper bound 256") != std::string::npos);
}

TEST_CASE("GPT-2 in kiln's IR: a bad weights directory is named with what is wrong") {
  const fs::path dir = fs::temp_directory_path() / ("kiln-test-" + std::to_string(::getpid()) + "-gpt2-weights");
  fs::create_directories(dir);
  auto write = [&](const std::string& json) { std::ofstream(dir / "config.json") << json; };
  auto config_error = [&] { return kiln_test::message_of<kiln::error>([&] { gpt2_ir::weights{dir}; }); };
  CHECK(config_error().find("config.json': cannot be read") != std::string::npos);
  write(R"({"n_layer": 2, "n_embd": 128, "n_head": 4, "vocab_size": 1000})");
  CHECK(config_error().find("config.json': no number 'n_positions'") != std::string::npos);
  write(R"({"n_layer": 2, "n_embd": 128, "n_head": 3, "vocab_size": 1000, "n_positions": 64})");
  CHECK(config_error().find("n_embd 128 is not a multiple of n_head 3") != std::string::npos);
  write(R"({"n_layer": 2.5, "n_embd": 128, "n_head": 4, "vocab_size": 1000, "n_positions": 64})");
  CHECK(config_error().find("'n_layer' must be a positive integer, not 2.5") != std::string::npos);
  write(R"({"n_layer": 2, "n_embd": 128 "n_head": 4})");
  CHECK(config_error().find("expected ','") != std::string::npos);
  // Hugging Face's config.json: strings, lists, booleans, null and nested objects are skipped.
  write(R"({"architectures": ["GPT2LMHeadModel"], "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 10, "n_positions": 4,
            "scale_attn_weights": true, "summary_activation": null, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}}})");
  const gpt2_ir::weights w(dir);
  CHECK(w.cfg().n_embd == 8);
  CHECK(w.cfg().layer_norm_epsilon == 1e-5);
  // A parameter of the wrong shape, or missing, is named with its file.
  runtime::save_npy(dir / "wte.weight.npy", runtime::tensor::zeros({10, 9}, dtype::float32));
  const std::string shape_msg = kiln_test::message_of<kiln::error>([&] { gpt2_ir::build(w); });
  CHECK(shape_msg.find("wte.weight.npy' holds float32[10, 9], expected float32[10, 8] (by config.json)") != std::string::npos);
  runtime::save_npy(dir / "wte.weight.npy", runtime::tensor::zeros({10, 8}, dtype::float32));
  CHECK(kiln_test::message_of<kiln::error>([&] { gpt2_ir::build(w); }).find("wpe.weight.npy") != std::string::npos);
  fs::remove_all(dir);
}
