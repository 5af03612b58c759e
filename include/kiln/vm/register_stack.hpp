// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::vm::detail::register_stack`: the register files of a `virtual_machine`'s frames.
///
/// Register files are allocated last-in first-out from chunks that never move, so pointers into
/// them stay valid while natives call back into the VM (a reentrant call pushes on top; a chunk
/// too small for a frame gets a successor, never a reallocation). Every register above the top
/// is null: a call constructs its arguments in place, and `pop` resets what a frame leaves.
#pragma once

#include <kiln/vm/value.hpp>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <vector>

namespace kiln::vm::detail {

class register_stack {
public:
  /// `n` null registers on top of the stack.
  value* push(std::size_t n) {
    if (std::size_t(limit_ - top_) < n) [[unlikely]]
      return push_slow(n);
    value* p = top_;
    top_ += n;
    return p;
  }
  /// Resets and releases the `n` registers at `p`, the most recent push.
  void pop(value* p, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) p[i].reset();
    top_ = p;
    if (p == begin_ && current_ > 0) [[unlikely]]
      pop_chunk();
  }

private:
  struct chunk {
    std::unique_ptr<value[]> data;
    std::size_t size = 0;
    value* saved_top = nullptr;  ///< the top when a later chunk took over
  };
  __attribute__((noinline)) value* push_slow(std::size_t n) {
    std::size_t next = chunks_.empty() || top_ == begin_ ? current_ : current_ + 1;
    while (next < chunks_.size() && chunks_[next].size < n) chunks_.erase(chunks_.begin() + std::ptrdiff_t(next));
    if (next == chunks_.size()) {
      const std::size_t size = std::max<std::size_t>(n, 16384);
      chunks_.push_back(chunk{std::make_unique<value[]>(size), size, nullptr});
    }
    if (next != current_) chunks_[current_].saved_top = top_;
    current_ = next;
    begin_ = chunks_[next].data.get();
    limit_ = begin_ + chunks_[next].size;
    top_ = begin_ + n;
    return begin_;
  }
  void pop_chunk() noexcept {
    --current_;
    begin_ = chunks_[current_].data.get();
    limit_ = begin_ + chunks_[current_].size;
    top_ = chunks_[current_].saved_top;
  }
  std::vector<chunk> chunks_;
  std::size_t current_ = 0;
  value* begin_ = nullptr;
  value* top_ = nullptr;
  value* limit_ = nullptr;
};

}  // namespace kiln::vm::detail
