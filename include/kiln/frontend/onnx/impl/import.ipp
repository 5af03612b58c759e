// SPDX-License-Identifier: Apache-2.0
// The definitions of the importer's entry points (import.hpp): every converter instantiated.
// Included by that header, or, with KILN_SEPARATE_COMPILATION, once by kiln/frontend/onnx/src.hpp.
#pragma once

#include <kiln/frontend/onnx/import.hpp>
#include <kiln/frontend/onnx/mapped_model.hpp>
#include <kiln/support/file.hpp>
#include <kiln/support/mapped_file.hpp>
#include <kiln/support/strings.hpp>

#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <charconv>
#include <fstream>
#include <limits>
#include <system_error>

namespace kiln::frontend::onnx {

namespace detail {

/// Whether `path` is `root` or inside it (both canonical: absolute, no links, no dot parts).
inline bool is_within(const std::filesystem::path& path, const std::filesystem::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

/// Reads tensor `t`'s external data from its file under `dir` into its raw_data. The file must
/// be a regular file whose real path (links resolved) lies inside `dir`'s real path: a location
/// is a path relative to the model's folder, and a link out of that folder is refused as `..`
/// is (ONNX's checker refuses links for the same reason).
inline void load_external_tensor(::onnx::TensorProto& t, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const std::string what = "kiln::frontend::onnx: tensor '" + kiln::detail::printable(t.name()) + "'";
  std::string location;
  std::uint64_t offset = 0, length = 0;
  bool has_length = false;
  const auto number = [&](const std::string& key, const std::string& v) {
    std::uint64_t n = 0;
    const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size())
      throw import_error(what + ": external data " + key + " '" + kiln::detail::printable(v) + "' is not a number");
    return n;
  };
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    else if (e.key() == "offset") offset = number("offset", e.value());
    else if (e.key() == "length") length = number("length", e.value()), has_length = true;
  }
  if (location.empty()) throw import_error(what + ": its external data has no location");
  const std::string shown = "external data location '" + kiln::detail::printable(location) + "'";
  if (location.find('\0') != std::string::npos) throw import_error(what + ": " + shown + " holds a NUL byte");
  const fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_name())
    throw import_error(what + ": " + shown + " must be a path relative to the model's folder");
  for (const auto& part : rel)
    if (part == "..") throw import_error(what + ": " + shown + " leaves the model's folder");
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) throw import_error(what + ": the model's folder '" + dir.string() + "' cannot be resolved: " + ec.message());
  const fs::path file = dir / rel;
  const std::string file_shown = "'" + kiln::detail::printable(file.string(), 1024) + "'";
  const fs::path real = fs::canonical(file, ec);
  if (ec) throw import_error(what + ": cannot open its external data file " + file_shown + ": " + ec.message());
  if (!is_within(real, root))
    throw import_error(what + ": " + shown + " is a link to '" + kiln::detail::printable(real.string(), 1024) + "', outside the model's folder '" + kiln::detail::printable(root.string(), 1024) +
                       "'; external data is read only from inside the model's folder");
  const fs::file_status status = fs::status(real, ec);
  if (ec || !fs::is_regular_file(status))
    throw import_error(what + ": " + shown + " names " + (fs::is_directory(status) ? "a directory" : "something other than a regular file") +
                       " (" + file_shown + ")");
  std::ifstream in(real, std::ios::binary);
  if (!in) throw import_error(what + ": cannot open its external data file " + file_shown);
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  if (end < 0) throw import_error(what + ": cannot find the size of its external data file " + file_shown);
  const auto size = static_cast<std::uint64_t>(end);
  if (offset > size || (has_length && length > size - offset))
    throw import_error(what + ": external data " + file_shown + " has " + std::to_string(size) + " bytes, fewer than offset " +
                       std::to_string(offset) + (has_length ? " + length " + std::to_string(length) : std::string()));
  if (!has_length) length = size - offset;
  std::string bytes(static_cast<std::size_t>(length), '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(length));
  if (!in) throw import_error(what + ": cannot read " + std::to_string(length) + " bytes of " + file_shown);
  t.set_raw_data(std::move(bytes));
  t.clear_external_data();
  t.set_data_location(::onnx::TensorProto::DEFAULT);
}

inline void load_external_graph(::onnx::GraphProto& g, const std::filesystem::path& dir) {
  for (auto& t : *g.mutable_initializer())
    if (t.data_location() == ::onnx::TensorProto::EXTERNAL) load_external_tensor(t, dir);
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t() && a.t().data_location() == ::onnx::TensorProto::EXTERNAL) load_external_tensor(*a.mutable_t(), dir);
      for (auto& t : *a.mutable_tensors())
        if (t.data_location() == ::onnx::TensorProto::EXTERNAL) load_external_tensor(t, dir);
      if (a.has_g()) load_external_graph(*a.mutable_g(), dir);
      for (auto& sub : *a.mutable_graphs()) load_external_graph(sub, dir);
    }
}

/// The first tensor of `g` (or its subgraphs) still stored as external data, or null.
inline const ::onnx::TensorProto* find_external(const ::onnx::GraphProto& g) {
  for (const auto& t : g.initializer())
    if (t.data_location() == ::onnx::TensorProto::EXTERNAL) return &t;
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_t() && a.t().data_location() == ::onnx::TensorProto::EXTERNAL) return &a.t();
      for (const auto& t : a.tensors())
        if (t.data_location() == ::onnx::TensorProto::EXTERNAL) return &t;
      if (a.has_g())
        if (auto* t = find_external(a.g())) return t;
      for (const auto& sub : a.graphs())
        if (auto* t = find_external(sub)) return t;
    }
  return nullptr;
}

}  // namespace detail

KILN_DECL void load_external_data(::onnx::ModelProto& model, const std::filesystem::path& dir) {
  detail::load_external_graph(*model.mutable_graph(), dir);
}

namespace detail {
/// `model` imported; `owned` is the same model when the caller owns it and the importer may free
/// its initializers' data as it converts them.
inline ir::ir_module import_checked_model(const ::onnx::ModelProto& model, const import_options& options, ::onnx::ModelProto* owned = nullptr,
                                          const std::map<std::string, mapped_raw_data>* mapped = nullptr);
/// The model in `bytes`, parsed (`source` names it in errors).
inline ::onnx::ModelProto parse_model(std::span<const std::byte> bytes, const std::string& source);
/// `model`, which the caller gives up, with its external data read, imported.
inline ir::ir_module import_owned(::onnx::ModelProto&& model, const std::string& source, const import_options& options,
                                  const std::map<std::string, mapped_raw_data>* mapped = nullptr);
/// The model in file `path` with its large weights mapped (import_options::map_weights; `options`
/// name the folder external data is read from); nothing
/// when the file cannot be mapped or walked, or has no large weight (then it is read as it is).
inline std::optional<ir::ir_module> import_mapped(const std::filesystem::path& path, const std::string& source, const import_options& options);
}  // namespace detail

KILN_DECL ir::ir_module import_model(const ::onnx::ModelProto& model, const import_options& options) {
  try {
    return detail::import_checked_model(model, options);
  } catch (const import_error& e) {  // names from the file, shown without their control characters
    throw import_error(kiln::detail::escape_controls(e.what()));
  }
}

inline ir::ir_module detail::import_checked_model(const ::onnx::ModelProto& model, const import_options& options, ::onnx::ModelProto* owned,
                                                  const std::map<std::string, mapped_raw_data>* mapped) {
  // before ONNX's checker, which would look for the files relative to the working directory
  if (const auto* t = detail::find_external(model.graph()))
    throw import_error("kiln::frontend::onnx: tensor '" + t->name() +
                       "': its data is stored outside the model file (external data); import the model with import_file, or give "
                       "import_options::external_data_dir");
  // Operators older than kiln's converters: ONNX's version converter brings the model up. It runs
  // on models the checker accepts only (it assumes a well-formed graph).
  if (const int target = options.check_model ? detail::upgrade_opset(model, detail::converters_of(options)) : 0) {
    detail::check_model(model);
    std::string why;
    ::onnx::ModelProto upgraded;
    try {
      upgraded = ::onnx::version_conversion::ConvertVersion(model, target);
      detail::mend_upgraded(upgraded);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (why.empty()) return detail::importer(upgraded, options, {.owned = &upgraded, .mapped = mapped}).run();
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    const std::string from_to = "from opset " + std::to_string(detail::default_opset(model)) + " to " + std::to_string(target);
    return detail::importer(model, options,
                            {.checked = true, .upgrade_failure = "ONNX's version converter could not bring the model " + from_to + ": " + why, .mapped = mapped})
        .run();
  }
  return detail::importer(model, options, {.owned = owned, .mapped = mapped}).run();
}

inline ::onnx::ModelProto detail::parse_model(std::span<const std::byte> bytes, const std::string& source) {
  ::onnx::ModelProto model;
  if (bytes.size() > std::size_t(std::numeric_limits<int>::max()))
    throw import_error("kiln::frontend::onnx: " + source + " is larger than protobuf can parse (2 GiB)");
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    throw import_error("kiln::frontend::onnx: " + source + " is not an ONNX model (the protobuf does not parse: truncated or not ONNX)");
  if (!model.has_graph()) throw import_error("kiln::frontend::onnx: " + source + " has no graph");
  return model;
}

inline ir::ir_module detail::import_owned(::onnx::ModelProto&& model, const std::string& source, const import_options& options,
                                         const std::map<std::string, mapped_raw_data>* mapped) {
  try {
    if (!options.external_data_dir.empty()) load_external_data(model, options.external_data_dir);
    try {
      return detail::import_checked_model(model, options, &model, mapped);
    } catch (const import_error& e) {  // names from the file, shown without their control characters
      throw import_error(kiln::detail::escape_controls(e.what()));
    }
  } catch (const import_error& e) {
    throw import_error(std::string(e.what()).insert(std::string("kiln::frontend::onnx: ").size(), source + ": "));
  }
}

KILN_DECL ir::ir_module import_bytes(std::span<const std::byte> bytes, const std::string& source, const import_options& options) {
  return detail::import_owned(detail::parse_model(bytes, source), source, options);
}

inline std::optional<ir::ir_module> detail::import_mapped(const std::filesystem::path& path, const std::string& source,
                                                        const import_options& options) {
  constexpr std::size_t min_bytes = std::size_t(64) << 10;  // smaller weights are read: a page each would be mostly waste
  std::shared_ptr<const kiln::detail::mapped_file> file;
  try {
    file = kiln::detail::mapped_file::open(path, "kiln::frontend::onnx::import_file");
  } catch (const kiln::error&) {
    return std::nullopt;  // the read that follows says why
  }
  if (file->bytes().size() > std::size_t(std::numeric_limits<int>::max())) return std::nullopt;
  std::optional<model_skeleton> skeleton = skeleton_of(file->bytes(), min_bytes);
  file->evict();  // the pages the walk read
  if (!skeleton) return std::nullopt;
  std::map<std::string, mapped_raw_data> mapped;
  for (const auto& [name, bytes] : skeleton->raw_data) mapped.emplace(name, mapped_raw_data{file, bytes});
  ::onnx::ModelProto model = parse_model(std::as_bytes(std::span<const char>(skeleton->bytes)), source);
  std::string().swap(skeleton->bytes);
  return import_owned(std::move(model), source, options, &mapped);
}

KILN_DECL ir::ir_module import_file(const std::filesystem::path& path, const import_options& options) {
  const std::string source = kiln::detail::quote(path.string());
  import_options with_dir = options;  // external data is looked up beside the model unless told otherwise
  if (with_dir.external_data_dir.empty())
    with_dir.external_data_dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  if (options.map_weights)
    if (std::optional<ir::ir_module> m = detail::import_mapped(path, source, with_dir)) return std::move(*m);
  ::onnx::ModelProto model;
  {  // parsed as it is read, in blocks: the file's bytes are never held beside the model
    const kiln::detail::readable_file file(path, "kiln::frontend::onnx::import_file");
    if (file.size() > std::uint64_t(std::numeric_limits<int>::max()))
      throw import_error("kiln::frontend::onnx: " + source + " is larger than protobuf can parse (2 GiB)");
    google::protobuf::io::FileInputStream in(file.fd());
    const bool parsed = model.ParseFromZeroCopyStream(&in);
    if (in.GetErrno() != 0) file.fail_read(in.GetErrno());
    if (!parsed)
      throw import_error("kiln::frontend::onnx: " + source + " is not an ONNX model (the protobuf does not parse: truncated or not ONNX)");
    if (!model.has_graph()) throw import_error("kiln::frontend::onnx: " + source + " has no graph");
  }
  return detail::import_owned(std::move(model), source, with_dir);
}

}  // namespace kiln::frontend::onnx
