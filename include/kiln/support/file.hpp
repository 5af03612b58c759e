// SPDX-License-Identifier: Apache-2.0
/// \file
/// Whole-file binary reads and writes for kiln's file formats (`.npy`, executables).
#pragma once

#include <kiln/support/error.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <system_error>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

/// The bytes of the file at `path`; `who` (the API reading it) names the failure.
/// A regular file is read in one call into a buffer of its size (a model's weights are tens of
/// megabytes: reading them a character at a time into a growing buffer took longer than compiling
/// ResNet-18); a pipe or a file that grows is read on, each chunk as large as what was read so far.
inline std::vector<std::byte> read_file(const std::filesystem::path& path, std::string_view who) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(std::string(who) + ": cannot open '" + path.string() + "'");
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::is_regular_file(path, ec) ? std::filesystem::file_size(path, ec) : 0;
  std::size_t chunk = ec || size == 0 ? std::size_t(1) << 16 : std::size_t(size) + 1;  // + 1: the end is seen in the same read
  std::vector<std::byte> out;
  for (;;) {
    const std::size_t at = out.size();
    out.resize(at + chunk);
    in.read(reinterpret_cast<char*>(out.data() + at), std::streamsize(chunk));
    const std::size_t got = std::size_t(in.gcount());
    out.resize(at + got);
    if (got < chunk) break;
    chunk = out.size();
  }
  if (in.bad()) throw error(std::string(who) + ": cannot read '" + path.string() + "'");
  return out;
}

/// Replaces the file at `path` with `bytes`; `who` names the failure.
inline void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes, std::string_view who) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) throw error(std::string(who) + ": cannot write '" + path.string() + "'");
}

}  // namespace kiln::detail
