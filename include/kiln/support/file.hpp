// SPDX-License-Identifier: Apache-2.0
/// \file
/// Whole-file binary reads and writes for kiln's file formats (`.npy`, executables).
#pragma once

#include <kiln/support/error.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

/// The bytes of the file at `path`; `who` (the API reading it) names the failure.
inline std::vector<std::byte> read_file(const std::filesystem::path& path, std::string_view who) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(std::string(who) + ": cannot open '" + path.string() + "'");
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bytes = std::as_bytes(std::span(raw));
  return {bytes.begin(), bytes.end()};
}

/// Replaces the file at `path` with `bytes`; `who` names the failure.
inline void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes, std::string_view who) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) throw error(std::string(who) + ": cannot write '" + path.string() + "'");
}

}  // namespace kiln::detail
