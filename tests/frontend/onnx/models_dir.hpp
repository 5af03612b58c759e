// SPDX-License-Identifier: Apache-2.0
// Where CTest's export fixture (scripts/export_models.py, scripts/gpt2.py) wrote the models the
// ONNX tests compare with PyTorch.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

namespace kiln_test {

inline std::filesystem::path onnx_models_dir() {
  const char* d = std::getenv("KILN_ONNX_MODELS");
  REQUIRE_MESSAGE(d != nullptr, "set KILN_ONNX_MODELS to the directory the export fixture wrote");
  return d;
}

}  // namespace kiln_test
