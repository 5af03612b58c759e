// SPDX-License-Identifier: Apache-2.0
// Shared by kiln's fuzz targets (libFuzzer). A target feeds its bytes to one reader; a kiln::error
// is the reader refusing bad input, which is fine; anything else escaping — another exception, a
// crash, a sanitizer report, a broken round trip (`fuzz_check`) — is a bug the fuzzer reports.
#pragma once

#include <kiln/support/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

namespace kiln_fuzz {

inline std::string_view text(const std::uint8_t* data, std::size_t size) { return {reinterpret_cast<const char*>(data), size}; }
inline std::span<const std::byte> bytes(const std::uint8_t* data, std::size_t size) { return {reinterpret_cast<const std::byte*>(data), size}; }

/// Aborts (a finding) when a property of a reader that accepted its input does not hold.
inline void fuzz_check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "kiln fuzz: property failed: %s\n", what);
    std::abort();
  }
}

/// Runs `f`; a kiln::error is a clean rejection.
template <class F>
int guarded(F&& f) {
  try {
    f();
  } catch (const kiln::error&) {
  }
  return 0;
}

}  // namespace kiln_fuzz
