// SPDX-License-Identifier: Apache-2.0
// GPT-2 built in kiln's IR (gpt2_ir.hpp), its caches kept by the VM between calls: compile once,
// prefill the prompt, then decode greedily token by token (docs/generation.md shows this file).
//
//   gpt2_ir WEIGHTS_DIR TOKEN... [--new N] [--compiled] [--print-ir]
//
// WEIGHTS_DIR is what scripts/gpt2.py --weights writes. --compiled runs the compiled mode (the
// functions as C++ in a shared library) instead of bytecode; --print-ir prints the module built
// (its weights elided) before compiling it.
#include "gpt2_ir.hpp"

#include <charconv>
#include <filesystem>
#include <iostream>
#include <string>
#include <unistd.h>

int main(int argc, char** argv) try {
  std::vector<std::int64_t> prompt;
  std::int64_t new_tokens = 8;
  bool compiled = false, print_ir = false;
  auto number = [](const std::string& a) {  // a token id or a count: a non-negative integer
    std::int64_t v = -1;
    const auto [end, ec] = std::from_chars(a.data(), a.data() + a.size(), v);
    if (ec != std::errc() || end != a.data() + a.size() || v < 0) throw std::invalid_argument("'" + a + "' is not a non-negative integer");
    return v;
  };
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--new" && i + 1 < argc) new_tokens = number(argv[++i]);
    else if (a == "--compiled") compiled = true;
    else if (a == "--print-ir") print_ir = true;
    else prompt.push_back(number(a));
  }
  if (argc < 3 || prompt.empty()) {
    std::cerr << "usage: gpt2_ir WEIGHTS_DIR TOKEN... [--new N] [--compiled] [--print-ir]\n";
    return 2;
  }

  kiln::vm::executable ex = [&] {  // the weights as read live until compiled, then only the executable's
    const gpt2_ir::weights weights(argv[1]);
    const kiln::ir::ir_module model = gpt2_ir::build(weights);
    if (print_ir) std::cout << kiln::ir::print(model, kiln::ir::print_options::readable()) << std::endl;
    return kiln::compile(model, {.mode = compiled ? kiln::exec_mode::compiled : kiln::exec_mode::bytecode});
  }();
  if (compiled) {  // the compiled mode's functions live in a shared library
    const auto lib = std::filesystem::temp_directory_path() / ("gpt2_ir-" + std::to_string(::getpid()) + ".so");
    kiln::vm::export_library(ex, lib);
    ex = kiln::vm::load_module(lib);
    std::filesystem::remove(lib);  // a loaded library stays mapped
  }
  kiln::vm::virtual_machine machine(std::move(ex), {}, kiln::vm::kernel_registry());

  gpt2_ir::sequence seq(machine);  // create_kv_cache(): empty caches
  std::int64_t token = gpt2_ir::argmax(seq.step(prompt));  // the prefill
  for (std::int64_t i = 0; i < new_tokens; ++i) {
    std::cout << token << ' ' << std::flush;  // as they come
    if (i + 1 < new_tokens) token = gpt2_ir::argmax(seq.step(std::span(&token, 1)));
  }
  std::cout << "\n";
} catch (const std::exception& e) {
  std::cerr << "gpt2_ir: " << e.what() << "\n";
  return 1;
}
