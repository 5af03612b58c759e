// SPDX-License-Identifier: Apache-2.0
// Generation with a decoder that carries its key/value cache (docs/generation.md shows this file;
// CTest runs it on the GPT-2 that scripts/gpt2.py exports): gpt2.onnx, then token ids.
#include <kiln/frontend/onnx/import.hpp>   // link kiln::onnx
#include <kiln/kiln.hpp>

#include <cstdlib>
#include <iostream>
#include <vector>

int main(int argc, char** argv) {
  namespace vm = kiln::vm;
  if (argc < 3) {
    std::cerr << "usage: generate MODEL.onnx TOKEN...\n";
    return 2;
  }
  // One executable for every prompt length and every step: the lengths stay symbolic.
  vm::virtual_machine machine(kiln::compile(kiln::frontend::onnx::import_file(argv[1])), {}, kiln::vm::kernel_registry());
  vm::decoder dec(machine);  // finds input_ids, attention_mask, position_ids and the past_* caches

  std::vector<std::int64_t> prompt;
  for (int i = 2; i < argc; ++i) prompt.push_back(std::atoll(argv[i]));
  vm::generate_options options{.max_new_tokens = 16, .temperature = 0.8, .top_k = 40, .top_p = 0.95, .seed = 1};
  options.on_token = [](std::size_t, std::int64_t token) { std::cout << token << ' ' << std::flush; };  // as they come
  dec.generate({prompt}, options);  // a batch of one; returns each row's new tokens, as below

  // The same prompt greedily, in a batch with a shorter one (padded on the left).
  options = {.max_new_tokens = 8};
  for (const auto& row : dec.generate({prompt, {prompt.front()}}, options)) {
    std::cout << "\n";
    for (std::int64_t t : row) std::cout << t << ' ';
  }
  std::cout << "\n";
}
