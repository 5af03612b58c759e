// SPDX-License-Identifier: Apache-2.0
// Models exported from PyTorch (scripts/export_models.py: an MLP, ResNet-18, SqueezeNet 1.1,
// DenseNet-121, a transformer encoder layer and a GPT-style decoder block, both also with a dynamic
// batch and sequence, a recurrent classifier of LSTM and GRU layers; random weights) imported,
// compiled at opt level 0 and 2, run, and compared with PyTorch's output at atol = rtol = 1e-4. The
// directory of exported models comes from the environment (KILN_ONNX_MODELS); CTest's fixture
// writes it first.
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/runtime/compare.hpp>
#include <kiln/runtime/npy.hpp>
#include <kiln/vm/vm.hpp>

#include "models_dir.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

using namespace kiln;
namespace kx = kiln::frontend::onnx;
namespace fs = std::filesystem;

namespace {

fs::path models_dir() { return kiln_test::onnx_models_dir(); }

/// Imports model `name`, compiles it at opt levels 0 and 2, and runs it on each of `cases`
/// (the stems of an input and its output: "input" and "output", "input2" and "output2").
void check_model(const std::string& name, const std::vector<std::pair<std::string, std::string>>& cases = {{"input", "output"}}) {
  const fs::path dir = models_dir();
  const ir::ir_module m = kx::import_file(dir / (name + ".onnx"));
  for (int opt : {0, 2}) {
    CAPTURE(opt);
    kiln::pass_context ctx(opt);
    kiln::pass_context_scope scope(ctx);
    vm::virtual_machine machine(kiln::compile(m), {}, vm::kernel_registry());
    for (const auto& data : cases) {
      const std::string& input = data.first;
      const std::string& output = data.second;
      CAPTURE(input);
      const runtime::tensor x = runtime::load_npy(dir / (name + "." + input + ".npy"));
      const runtime::tensor want = runtime::load_npy(dir / (name + "." + output + ".npy"));
      const runtime::tensor got = machine.invoke("main", x).as_tensor();
      REQUIRE(got.shape() == want.shape());
      const runtime::closeness c = runtime::compare_close(got, want, 1e-4, 1e-4);
      CHECK_MESSAGE(c.ok(), name << ": " << c.describe());
    }
  }
}

}  // namespace

TEST_CASE("PyTorch's MLP (784-512-512-10) through ONNX") { check_model("mlp"); }
TEST_CASE("PyTorch's ResNet-18 through ONNX") { check_model("resnet18"); }
TEST_CASE("PyTorch's transformer encoder layer through ONNX") { check_model("encoder"); }
// Their concatenations run in place: each fire module's two expansions, each dense block's features.
TEST_CASE("torchvision's SqueezeNet 1.1 through ONNX") { check_model("squeezenet1_1"); }
TEST_CASE("torchvision's DenseNet-121 through ONNX") { check_model("densenet121"); }
TEST_CASE("a GPT-style decoder block from PyTorch through ONNX") { check_model("gpt_block"); }
TEST_CASE("PyTorch's LSTM (two bidirectional layers) and GRU through ONNX") { check_model("recurrent"); }
TEST_CASE("the encoder layer exported with a dynamic batch and sequence runs at (1, 128) and (2, 50)") {
  check_model("encoder_dynamic", {{"input", "output"}, {"input2", "output2"}});
}
TEST_CASE("the GPT block exported with a dynamic batch and sequence (its causal mask cut to the sequence) runs at (1, 64) and (2, 50)") {
  check_model("gpt_block_dynamic", {{"input", "output"}, {"input2", "output2"}});
}
