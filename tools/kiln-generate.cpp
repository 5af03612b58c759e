// SPDX-License-Identifier: Apache-2.0
// kiln-generate: generates tokens with a decoder that carries its key/value cache (an ONNX
// "decoder with past", as Hugging Face Optimum exports it, or the same function in kiln's IR or an
// executable), from prompts of token ids.
//
//   kiln-generate gpt2.onnx --prompt 464,2068,7586 --max-new-tokens 32 --temperature 0.8 --top-p 0.95
//
// Prints each prompt's tokens as they are generated (one line per prompt when the batch has
// several; with --no-stream at the end), then the prefill's time and the decode steps' tokens per
// second on stderr. kiln::vm::decoder (kiln/vm/generate.hpp) does the work.
#include "common.hpp"

#include <kiln/kernels/parallel.hpp>
#include <kiln/vm/generate.hpp>
#include <kiln/vm/vm.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <thread>

namespace {

using namespace kiln_tools;

std::vector<std::int64_t> parse_prompt(const std::string& text) {
  std::vector<std::int64_t> ids;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const auto v = non_negative(item);
    if (!v) throw tool_error("--prompt '" + text + "': expected token ids (non-negative integers) separated by commas, got '" + item + "'");
    ids.push_back(*v);
    pos = comma + 1;
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Generates tokens with a decoder that carries its key/value cache: an ONNX decoder with past (input_ids, attention_mask, "
               "position_ids, past_key_values.* -> logits, present.*), or the same function as IR text or an executable.",
               "kiln-generate"};
  std::string input, function = "main";
  std::vector<std::string> prompts_text, bound_options;
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  std::size_t threads = cores;
  kiln::vm::generate_options options;
  long long stop_token = -1;
  bool no_stream = false;
  app.add_option("MODEL", input, "An .onnx file, IR text, a compiled executable, or a shared library from kiln-compile --exec-mode compiled")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-p,--prompt", prompts_text, "A prompt as token ids, e.g. 464,2068,7586 (repeat for a batch)")->required()->allow_extra_args(false);
  app.add_option("-n,--max-new-tokens", options.max_new_tokens, "Tokens to generate per prompt at most (default 64)")->check(CLI::Range(0, 1 << 24));
  app.add_option("--stop-token", stop_token, "A prompt's generation ends after this token");
  app.add_option("--pad-token", options.pad_token, "The token fed where a prompt is padded or has ended (default 0)");
  app.add_option("--temperature", options.temperature, "0 chooses the most likely token (greedy, the default); above 0, samples")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--top-k", options.top_k, "Sample among the k most likely tokens only (0: all)")->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  app.add_option("--top-p", options.top_p, "Sample among the fewest most likely tokens whose probability reaches p (1: all)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", options.seed, "The sampler's seed");
  app.add_option("--upper-bound", bound_options,
                 "Bound an ONNX model's symbolic dimension: NAME=N (repeatable), e.g. past_sequence_length=1023: memory is planned "
                 "once for the longest context");
  app.add_option("-f,--function", function, "The function to run");
  app.add_option("-t,--threads", threads, "Threads for the kernels (default: this machine's cores, " + std::to_string(cores) + ")")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--no-stream", no_stream, "Print the tokens at the end, not as they come");
  add_version(app, "kiln-generate");
  KILN_TOOL_PARSE(app, argc, argv);

  return guarded("kiln-generate", [&] {
    namespace vm = kiln::vm;
    kiln::kernels::set_num_threads(threads);
    std::vector<std::vector<std::int64_t>> prompts;
    for (auto& p : prompts_text) prompts.push_back(parse_prompt(p));
    if (stop_token >= 0) options.stop_token = stop_token;
    std::map<std::string, std::int64_t> bounds;
    for (auto& b : bound_options) bounds.insert(parse_bound_option(b));
    vm::virtual_machine machine(load_model(input, {}, bounds), {}, kiln::vm::kernel_registry());
    vm::decoder dec(machine, function);

    // Timing: the prefill is the first step; each later step decodes one token per row.
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    clock::time_point first{}, last{};
    std::int64_t steps = 0;
    options.on_logits = [&](const kiln::runtime::tensor&) {
      last = clock::now();
      if (steps++ == 0) first = last;
    };
    const bool stream = !no_stream && prompts.size() == 1;
    if (stream)
      options.on_token = [](std::size_t, std::int64_t token) {
        std::cout << token << ' ' << std::flush;
      };
    const auto out = dec.generate(prompts, options);
    if (stream) {
      std::cout << "\n";
    } else {
      for (const auto& row : out) {
        for (std::size_t i = 0; i < row.size(); ++i) std::cout << (i ? " " : "") << row[i];
        std::cout << "\n";
      }
    }
    std::cout.flush();  // the tokens before the figures
    const double prefill_ms = std::chrono::duration<double, std::milli>(first - start).count();
    std::fprintf(stderr, "kiln-generate: prefill of %zu x %zu tokens %.2f ms", prompts.size(),
                 std::max_element(prompts.begin(), prompts.end(), [](auto& a, auto& b) { return a.size() < b.size(); })->size(), prefill_ms);
    if (steps > 1) {
      const double decode_s = std::chrono::duration<double>(last - first).count();
      std::fprintf(stderr, "; %lld decode steps %.2f ms each, %.1f tokens/s per prompt", static_cast<long long>(steps - 1),
                   1e3 * decode_s / double(steps - 1), double(steps - 1) / decode_s);
    }
    std::fprintf(stderr, " (%zu thread%s, kernels %s)\n", threads, threads == 1 ? "" : "s", std::string(kiln::kernels::isa()).c_str());
    return 0;
  });
}
