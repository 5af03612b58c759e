// SPDX-License-Identifier: Apache-2.0
// ONNX external data: a model whose initializer is stored outside it, with the location, offset
// and length the fuzzer chooses, in a folder that holds a data file, a subfolder, a link inside
// the folder and links out of it. An import either fails with a kiln error or read its bytes from a
// regular file inside the folder; nothing outside the folder is ever read.
//
// Input: location '\n' offset '\n' length '\n' data-file bytes.
#include <kiln/frontend/onnx/import.hpp>

#include "fuzz.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace {

/// The folder the model lives in, made once: data.bin (written per input), sub/, sub/inner.bin,
/// inside -> data.bin, out -> /etc/passwd, up -> .., abs -> the folder itself by absolute path.
const fs::path& folder() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("kiln-fuzz-external-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d / "model" / "sub");
    std::ofstream(d / "model" / "sub" / "inner.bin", std::ios::binary) << std::string(64, 'i');
    std::ofstream(d / "secret.bin", std::ios::binary) << std::string(64, 's');  // beside the folder, not in it
    fs::create_symlink("data.bin", d / "model" / "inside");
    fs::create_symlink("/etc/passwd", d / "model" / "out");
    fs::create_symlink("../secret.bin", d / "model" / "up");
    fs::create_symlink(d / "secret.bin", d / "model" / "abs");
    return d / "model";
  }();
  return dir;
}

std::string next_line(std::string_view& in) {
  const auto nl = in.find('\n');
  std::string line(in.substr(0, nl));
  in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  std::string_view in = kiln_fuzz::text(data, size);
  const std::string location = next_line(in), offset = next_line(in), length = next_line(in);
  const fs::path& dir = folder();
  std::ofstream(dir / "data.bin", std::ios::binary | std::ios::trunc) << in;

  ::onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  auto* g = model.mutable_graph();
  g->set_name("g");
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(::onnx::TensorProto::UINT8);
  t->add_dims(std::int64_t(in.size() < 16 ? in.size() : 16));
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : {std::pair{"location", location}, {"offset", offset}, {"length", length}})
    if (!v.empty()) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  auto* out = g->add_output();
  out->set_name("w");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::UINT8);

  kiln::frontend::onnx::import_options options;
  options.external_data_dir = dir;
  bool imported = false;
  kiln_fuzz::guarded([&] {
    const std::string bytes = model.SerializeAsString();
    (void)kiln::frontend::onnx::import_bytes(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), "model",
                                             options);
    imported = true;
  });
  if (imported) {
    std::error_code ec;
    const fs::path real = fs::canonical(dir / location, ec);
    kiln_fuzz::fuzz_check(!ec && fs::is_regular_file(real), "external data came from a regular file");
    const fs::path root = fs::canonical(dir);
    const auto rel = real.lexically_relative(root);
    kiln_fuzz::fuzz_check(!rel.empty() && *rel.begin() != "..", "external data came from inside the model's folder");
  }
  return 0;
}
