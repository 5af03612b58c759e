// SPDX-License-Identifier: Apache-2.0
/// \file
/// Autoregressive generation with a decoder that carries its own key/value cache: the loop a
/// person serving a language model writes around the VM, written once.
///
/// A *decoder with past* is the form Hugging Face Optimum and ONNX Runtime's transformer tools
/// export (`scripts/gpt2.py` writes one): a function
///
///     main(input_ids      [batch, sequence],
///          attention_mask [batch, past + sequence],   (optional; 1 = attend, 0 = padding)
///          position_ids   [batch, sequence],          (optional)
///          past_*         [batch, ..., past, ...]     (one per cache tensor, any number)
///     ) -> (logits [batch, sequence, vocab], present_* [batch, ..., past + sequence, ...])
///
/// whose results after the logits are the caches grown by the new positions, in the order of the
/// `past_*` parameters. The parameters are found by name (as the ONNX importer spells them:
/// `past_key_values.0.key` arrives as `past_key_values_0_key`), the cache's growing axis from its
/// type: the one symbolic dimension after the batch. One executable serves every prompt length
/// and every step.
///
/// `decoder::generate` runs one *prefill* over the prompts, then one *decode step* per token,
/// feeding each step's caches to the next. Prompts of different lengths are padded on the left
/// with the attention mask, and positions count the real tokens only (Hugging Face's
/// convention), so each row decodes as it would alone. Tokens are chosen greedily or sampled
/// (temperature, top-k, top-p) from a seeded generator whose draws do not depend on the standard
/// library, and are handed to `on_token` as they come. When the executable appends its caches in
/// place (`kernels.kv_cache_append`, from the pass `kv_cache_in_place`), the first caches are
/// empty buffers with room for the whole generation (`runtime::kv_cache_reserve`), so that no
/// step copies the cache or allocates memory for it.
#pragma once

#include <kiln/kernels/calling_convention.hpp>
#include <kiln/runtime/kv_cache.hpp>
#include <kiln/runtime/tensor.hpp>
#include <kiln/support/error.hpp>
#include <kiln/vm/virtual_machine.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::vm {

/// How `decoder::generate` chooses and stops.
struct generate_options {
  std::int64_t max_new_tokens = 64;        ///< tokens generated per prompt at most
  std::optional<std::int64_t> stop_token{};///< a row ends after generating it (kept in its output)
  std::int64_t pad_token = 0;              ///< fed where a prompt is padded or a row has ended
  /// 0 chooses the most likely token (greedy; the first of equals, as argmax). Above 0, tokens are
  /// sampled from softmax(logits / temperature), restricted by top_k and top_p.
  double temperature = 0;
  std::int64_t top_k = 0;  ///< sample among the k most likely tokens only (0: all)
  double top_p = 1;        ///< sample among the fewest most likely tokens whose probability reaches p (1: all)
  std::uint64_t seed = 0;  ///< the sampler's seed: the same seed, the same tokens
  /// Called with each row's token as soon as it is chosen (rows that have ended are not reported).
  std::function<void(std::size_t row, std::int64_t token)> on_token{};
  /// Called after each step, before the tokens are chosen, with its logits [batch, sequence, vocab]
  /// (the prompts' positions at the first step, one position after).
  std::function<void(const runtime::tensor& logits)> on_logits{};
};

/// What `decoder` found in the function's signature.
struct decoder_layout {
  std::size_t num_params = 0;
  std::size_t input_ids = 0;
  std::optional<std::size_t> attention_mask, position_ids;
  dtype ids_dt = dtype::int64, mask_dt = dtype::int64, positions_dt = dtype::int64;
  struct cache {
    std::size_t param;       ///< the parameter's index
    std::string name;
    dtype dt;
    std::vector<std::int64_t> dims;  ///< its static dimensions (-1: batch, or the growing axis)
    std::size_t axis;                ///< the axis that grows by the new positions
  };
  std::vector<cache> caches;
};

class decoder {
public:
  /// A decoder over function `function` of `vm`'s executable. Throws `usage_error` naming what is
  /// missing when the function is not a decoder with past.
  explicit decoder(virtual_machine& vm, std::string_view function = "main") : vm_(&vm), function_(function) {
    const auto index = vm.exec().find_function(function);
    if (!index) fail("the executable has no function '" + function_ + "'");
    const function_info& f = vm.exec().functions[*index];
    if (f.param_names.size() != std::size_t(f.num_args) || f.param_types.size() != f.param_names.size())
      fail("'" + function_ + "' does not record its parameters' names and types");
    layout_.num_params = f.param_names.size();
    std::optional<std::size_t> ids;
    for (std::size_t i = 0; i < f.param_names.size(); ++i) {
      const std::string& n = f.param_names[i];
      const type_signature& t = f.param_types[i];
      const auto integer = [&](const char* what) {
        if (t.kind != signature_kind::tensor || t.ndim != 2 || (t.dt != dtype::int64 && t.dt != dtype::int32))
          fail("parameter '" + n + "' (" + what + ") must be a 2-d int64 or int32 tensor, is " + t.text());
        return t.dt;
      };
      if (n == "input_ids") {
        ids = i;
        layout_.ids_dt = integer("the tokens");
      } else if (n == "attention_mask") {
        layout_.attention_mask = i;
        layout_.mask_dt = integer("the attention mask");
      } else if (n == "position_ids") {
        layout_.position_ids = i;
        layout_.positions_dt = integer("the positions");
      } else if (n.rfind("past", 0) == 0) {
        layout_.caches.push_back(cache_of(n, i, t));
      } else {
        fail("parameter '" + n + "' is none of input_ids, attention_mask, position_ids or a past_* cache");
      }
    }
    if (!ids) fail("'" + function_ + "' has no parameter 'input_ids'");
    layout_.input_ids = *ids;
  }

  const decoder_layout& layout() const noexcept { return layout_; }

  /// Generates up to `options.max_new_tokens` tokens after each prompt (one row of the batch
  /// each): the new tokens of each row, ending with the stop token when one was generated.
  std::vector<std::vector<std::int64_t>> generate(const std::vector<std::vector<std::int64_t>>& prompts,
                                                  const generate_options& options = {}) {
    if (prompts.empty()) return {};
    if (options.max_new_tokens < 0) fail("max_new_tokens is negative");
    if (options.temperature < 0 || !std::isfinite(options.temperature)) fail("temperature must be 0 (greedy) or positive");
    if (options.top_k < 0) fail("top_k is negative");
    if (!(options.top_p > 0 && options.top_p <= 1)) fail("top_p must be in (0, 1]");
    const std::int64_t batch = std::int64_t(prompts.size());
    std::size_t longest = 0;
    for (std::size_t r = 0; r < prompts.size(); ++r) {
      if (prompts[r].empty()) fail("prompt " + std::to_string(r) + " is empty");
      longest = std::max(longest, prompts[r].size());
    }
    if (!layout_.attention_mask && std::any_of(prompts.begin(), prompts.end(), [&](auto& p) { return p.size() != longest; }))
      fail("prompts of different lengths need an attention_mask parameter to pad them");

    std::vector<std::vector<std::int64_t>> out(prompts.size());
    if (options.max_new_tokens == 0) return out;
    std::mt19937_64 rng(options.seed);
    std::vector<char> done(prompts.size(), 0);
    std::vector<std::int64_t> mask;      // [batch, total], row-major, grown by one column per step
    std::vector<std::int64_t> next_pos(prompts.size());

    // Prefill: the prompts, padded on the left.
    const std::int64_t len = std::int64_t(longest);
    std::vector<std::int64_t> ids(std::size_t(batch * len), options.pad_token), pos(ids.size(), 0);
    mask.assign(ids.size(), 0);
    for (std::size_t r = 0; r < prompts.size(); ++r) {
      const std::int64_t pad = len - std::int64_t(prompts[r].size());
      for (std::int64_t j = 0; j < std::int64_t(prompts[r].size()); ++j) {
        const std::size_t at = std::size_t(std::int64_t(r) * len + pad + j);
        ids[at] = prompts[r][std::size_t(j)];
        mask[at] = 1;
        pos[at] = j;
      }
      next_pos[r] = std::int64_t(prompts[r].size());
    }
    std::vector<value> args(layout_.num_params);
    // The context the last step sees; an executable that appends its caches in place
    // (kv_cache_in_place) gets buffers with room for all of it, so no step allocates cache memory.
    const std::int64_t context = len + options.max_new_tokens - 1;
    const bool in_place = std::any_of(vm_->exec().functions.begin(), vm_->exec().functions.end(),
                                      [](const function_info& f) { return f.name == kernels::abi::kv_cache_append::name; });
    for (const auto& c : layout_.caches) args[c.param] = empty_cache(c, batch, in_place ? context : -1);
    std::int64_t total = len;
    const function_handle call = vm_->get_function(function_);
    for (std::int64_t step = 0;; ++step) {
      const std::int64_t t = step == 0 ? len : 1;
      args[layout_.input_ids] = integers(ids, {batch, t}, layout_.ids_dt);
      if (layout_.attention_mask) args[*layout_.attention_mask] = integers(mask, {batch, total}, layout_.mask_dt);
      if (layout_.position_ids) args[*layout_.position_ids] = integers(pos, {batch, t}, layout_.positions_dt);
      const value result = call.call(args);
      if (!result.is_tuple() || result.as_tuple().size() != layout_.caches.size() + 1)
        fail("'" + function_ + "' must return the logits and one present cache per past_* parameter (" +
             std::to_string(layout_.caches.size() + 1) + " values)");
      const auto results = result.as_tuple();
      const runtime::tensor logits = results[0].as_tensor();
      if (logits.ndim() != 3 || logits.shape()[0] != batch || logits.shape()[1] != t || logits.type() != dtype::float32)
        fail("the logits must be float32 [batch, sequence, vocab], are " + std::string(name(logits.type())) + " of shape " +
             runtime::shape_to_string(logits.shape()));
      for (std::size_t k = 0; k < layout_.caches.size(); ++k) args[layout_.caches[k].param] = results[k + 1];
      if (options.on_logits) options.on_logits(logits);

      // Choose each row's token from its last position's logits.
      const std::int64_t vocab = logits.shape()[2];
      const runtime::tensor dense = logits.contiguous();
      ids.assign(std::size_t(batch), options.pad_token);
      bool all_done = true;
      for (std::size_t r = 0; r < prompts.size(); ++r) {
        if (done[r]) continue;
        const float* p = dense.data<float>() + (std::int64_t(r) * t + t - 1) * vocab;
        const std::int64_t token = choose(std::span<const float>(p, std::size_t(vocab)), options, rng);
        out[r].push_back(token);
        ids[r] = token;
        if (options.on_token) options.on_token(r, token);
        if ((options.stop_token && token == *options.stop_token) || std::int64_t(out[r].size()) >= options.max_new_tokens) done[r] = 1;
        all_done &= done[r] != 0;
      }
      if (all_done) break;
      // The next step: one position per row, attending to everything so far.
      std::vector<std::int64_t> grown(std::size_t(batch * (total + 1)));
      for (std::int64_t r = 0; r < batch; ++r) {
        std::copy_n(mask.begin() + r * total, total, grown.begin() + r * (total + 1));
        grown[std::size_t(r * (total + 1) + total)] = 1;
      }
      mask = std::move(grown);
      ++total;
      pos.assign(std::size_t(batch), 0);
      for (std::size_t r = 0; r < prompts.size(); ++r) pos[r] = next_pos[r]++;
    }
    return out;
  }

  /// The token `options` choose from one position's `logits` (exposed for tests).
  static std::int64_t choose(std::span<const float> logits, const generate_options& options, std::mt19937_64& rng) {
    if (logits.empty()) throw usage_error("kiln::vm::decoder: the vocabulary is empty");
    if (options.temperature == 0) return std::int64_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    // Candidates by decreasing logit (ties by index), cut to top_k.
    std::vector<std::int64_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    const auto by_logit = [&](std::int64_t a, std::int64_t b) {
      return logits[std::size_t(a)] > logits[std::size_t(b)] || (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
    };
    std::size_t keep = order.size();
    if (options.top_k > 0 && std::size_t(options.top_k) < keep) {
      keep = std::size_t(options.top_k);
      std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), by_logit);
    } else {
      std::sort(order.begin(), order.end(), by_logit);
    }
    std::vector<double> prob(keep);
    const double top = double(logits[std::size_t(order[0])]);
    double sum = 0;
    for (std::size_t i = 0; i < keep; ++i) sum += prob[i] = std::exp((double(logits[std::size_t(order[i])]) - top) / options.temperature);
    // top_p: the fewest leading candidates whose probability reaches p.
    if (options.top_p < 1) {
      double acc = 0;
      for (std::size_t i = 0; i < keep; ++i)
        if ((acc += prob[i] / sum) >= options.top_p) {
          keep = i + 1;
          break;
        }
      sum = std::accumulate(prob.begin(), prob.begin() + std::ptrdiff_t(keep), 0.0);
    }
    // A uniform draw from the generator's raw 64 bits: the same on every standard library.
    const double u = double(rng() >> 11) * 0x1.0p-53 * sum;
    double acc = 0;
    for (std::size_t i = 0; i < keep; ++i)
      if (u < (acc += prob[i])) return order[i];
    return order[keep - 1];
  }

private:
  [[noreturn]] void fail(const std::string& msg) const { throw usage_error("kiln::vm::decoder: " + msg); }

  decoder_layout::cache cache_of(const std::string& n, std::size_t i, const type_signature& t) const {
    if (t.kind != signature_kind::tensor || !t.dims || t.ndim < 2)
      fail("cache parameter '" + n + "' must be a tensor of rank 2 or more with known dimensions, is " + t.text());
    decoder_layout::cache c{i, n, t.dt, {}, 0};
    std::optional<std::size_t> axis;
    for (std::size_t d = 0; d < t.dims->size(); ++d) {
      const dim_signature& dim = (*t.dims)[d];
      c.dims.push_back(dim.is_static() ? dim.size : -1);
      if (d == 0 || dim.is_static()) continue;
      if (axis) fail("cache parameter '" + n + "' has more than one symbolic dimension after the batch: " + t.text());
      axis = d;
    }
    if (!axis) fail("cache parameter '" + n + "' has no symbolic dimension after the batch to grow along: " + t.text());
    c.axis = *axis;
    return c;
  }

  /// A cache of no positions: with room for `capacity` of them (runtime::kv_cache_reserve) when
  /// that is not negative.
  static value empty_cache(const decoder_layout::cache& c, std::int64_t batch, std::int64_t capacity) {
    runtime::shape_vector shape;
    for (std::size_t d = 0; d < c.dims.size(); ++d) shape.push_back(d == 0 ? batch : d == c.axis ? 0 : c.dims[d]);
    if (capacity >= 0) return value(runtime::kv_cache_reserve(std::move(shape), std::int64_t(c.axis), capacity, c.dt));
    return value(runtime::tensor::empty(std::move(shape), c.dt));
  }

  static value integers(const std::vector<std::int64_t>& v, runtime::shape_vector shape, dtype dt) {
    if (dt == dtype::int64) return value(runtime::tensor::from_values<std::int64_t>(std::move(shape), std::span<const std::int64_t>(v)));
    std::vector<std::int32_t> narrow(v.begin(), v.end());
    return value(runtime::tensor::from_values<std::int32_t>(std::move(shape), std::span<const std::int32_t>(narrow)));
  }

  virtual_machine* vm_;
  std::string function_;
  decoder_layout layout_;
};

}  // namespace kiln::vm
