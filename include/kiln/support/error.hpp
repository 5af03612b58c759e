// SPDX-License-Identifier: Apache-2.0
/// \file
/// kiln's exception hierarchy: every error kiln raises derives from `kiln::error`.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

/// Base of every exception kiln throws; `what()` is a complete sentence that says what and where.
class error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A programming error in the use of a kiln API (bad argument, call in the wrong state).
class usage_error : public error {
public:
  using error::error;
};

/// Malformed input bytes: an executable file, an `.npy` file. The message names the source, the
/// byte offset or section, and what was expected there.
class format_error : public error {
public:
  using error::error;
};

}  // namespace kiln
