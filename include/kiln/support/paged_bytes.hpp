// SPDX-License-Identifier: Apache-2.0
/// \file
/// `paged_bytes`: read-only bytes whose pages the operating system can drop and read again (a
/// file mapped into memory, `mapped_file`): what an `ir::ndarray` over them gives back once read.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace kiln::detail {

class paged_bytes {
public:
  virtual ~paged_bytes() = default;
  /// All the bytes.
  virtual std::span<const std::byte> bytes() const noexcept = 0;
  /// A hint: the pages of `range` (a part of `bytes()`) will not be read soon. They leave the
  /// process's resident set, and a read brings them back.
  virtual void evict(std::span<const std::byte> range) const noexcept = 0;
  /// Throws a `kiln::error`, beginning with `who`, when the bytes may no longer be those first
  /// seen (the file was written in place or truncated).
  virtual void check_unchanged(std::string_view who) const = 0;
  /// What they are, for messages ("'model.onnx'").
  virtual std::string_view name() const noexcept = 0;
};

}  // namespace kiln::detail
