// SPDX-License-Identifier: Apache-2.0
// The rounding error of a GPT-2 decoder's logits against the exact ones: the test model's
// reference (scripts/gpt2.py --reference) holds, beside PyTorch's float32 logits, the same logits
// computed in double precision (STEM.logits64_L.npy). An engine's largest error against those over
// a decoding must not exceed twice PyTorch's float32 one, the bound the model zoo's accuracy columns
// hold kiln to against ONNX Runtime (docs/performance.md).
#pragma once

#include <kiln/runtime/npy.hpp>
#include <kiln/runtime/tensor.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>

namespace kiln_test {

/// The largest errors of the engine's and of PyTorch's float32 logits against the exact ones, over
/// the steps of one decoding.
class gpt2_accuracy {
public:
  /// The reference of the prompt of `length` tokens under `stem`: PyTorch's float32 logits (STEM.logits_L.npy,
  /// already loaded by the test) and the exact ones (STEM.logits64_L.npy).
  gpt2_accuracy(const std::filesystem::path& stem, int length, const kiln::runtime::tensor& pytorch_logits)
      : pytorch_(pytorch_logits.contiguous()) {
    exact_ = kiln::runtime::load_npy(stem.string() + ".logits64_" + std::to_string(length) + ".npy").contiguous();
    REQUIRE(pytorch_.type() == kiln::dtype::float32);
    REQUIRE(exact_.type() == kiln::dtype::float64);
    REQUIRE(pytorch_.shape() == exact_.shape());
  }

  /// Takes the engine's logits of step `step` (float32, the last `vocab` elements of `got`).
  void add(std::int64_t step, const kiln::runtime::tensor& got) {
    const std::int64_t vocab = exact_.shape()[1];
    REQUIRE(step < exact_.shape()[0]);
    const kiln::runtime::tensor g = got.contiguous();
    REQUIRE(g.type() == kiln::dtype::float32);
    REQUIRE(g.numel() >= vocab);
    const float* e = g.data<float>() + (g.numel() - vocab);
    const float* p = pytorch_.data<float>() + step * vocab;
    const double* x = exact_.data<double>() + step * vocab;
    for (std::int64_t i = 0; i < vocab; ++i) {
      raise(engine_, std::abs(double(e[i]) - x[i]));
      raise(pytorch_error_, std::abs(double(p[i]) - x[i]));
    }
    ++steps_;
  }

  /// The engine's largest error is at most twice PyTorch's (both in float32, against float64).
  void check() const {
    CAPTURE(steps_);
    CAPTURE(engine_);
    CAPTURE(pytorch_error_);
    CHECK(steps_ > 0);
    CHECK(engine_ <= 2 * pytorch_error_);
  }

private:
  static void raise(double& largest, double d) {
    if (!(d <= largest)) largest = d;  // a NaN stays
  }

  kiln::runtime::tensor pytorch_, exact_;
  double engine_ = 0, pytorch_error_ = 0;
  std::int64_t steps_ = 0;
};

}  // namespace kiln_test
