// SPDX-License-Identifier: Apache-2.0
// The definitions of the importer's entry points (import.hpp): every converter instantiated.
// Included by that header, or, with KILN_SEPARATE_COMPILATION, once by kiln/frontend/onnx/src.hpp.
#pragma once

#include <kiln/frontend/onnx/import.hpp>
#include <kiln/support/strings.hpp>

namespace kiln::frontend::onnx {

KILN_DECL ir::ir_module import_model(const ::onnx::ModelProto& model, const import_options& options) {
  return detail::importer(model, options).run();
}

KILN_DECL ir::ir_module import_bytes(std::span<const std::byte> bytes, const std::string& source, const import_options& options) {
  ::onnx::ModelProto model;
  if (bytes.size() > std::size_t(std::numeric_limits<int>::max()))
    throw import_error("kiln::frontend::onnx: " + source + " is larger than protobuf can parse (2 GiB)");
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    throw import_error("kiln::frontend::onnx: " + source + " is not an ONNX model (the protobuf does not parse: truncated or not ONNX)");
  if (!model.has_graph()) throw import_error("kiln::frontend::onnx: " + source + " has no graph");
  try {
    return import_model(model, options);
  } catch (const import_error& e) {
    throw import_error(std::string(e.what()).insert(std::string("kiln::frontend::onnx: ").size(), source + ": "));
  }
}

KILN_DECL ir::ir_module import_file(const std::filesystem::path& path, const import_options& options) {
  const auto bytes = kiln::detail::read_file(path, "kiln::frontend::onnx::import_file");
  return import_bytes(bytes, kiln::detail::quote(path.string()), options);
}

}  // namespace kiln::frontend::onnx
