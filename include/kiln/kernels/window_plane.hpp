// SPDX-License-Identifier: Apache-2.0
/// \file
/// `detail::window_plane`: a zero- (or -inf-) padded copy of one image plane whose columns are
/// split by phase, so that a window's tap reads consecutive outputs from consecutive addresses
/// whatever the horizontal stride. Pooling, the depthwise convolution and the Winograd
/// convolution read their planes through it.
#pragma once

#include <kiln/kernels/common.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kiln::kernels::detail {

/// Copies the `w` elements of row `src` (`step` apart) to padded columns [left, left + w) of a row
/// split into `s` column phases: padded column q goes to dst[(q % s) * phase + q / s].
template <class T>
void split_row_by_phase(const T* src, std::int64_t w, std::int64_t step, std::int64_t s, std::int64_t left, T* dst, std::int64_t phase) {
  if (s == 1 && step == 1) {
    std::copy_n(src, w, dst + left);
  } else if (s == 2 && step == 1) {
    // Both phases in one loop over pairs of input columns, which compilers vectorise as a
    // deinterleave of two vectors (one phase at a time, with a stride of 2, they copy an element
    // at a time).
    T* __restrict d0 = dst + left % 2 * phase + left / 2;              // input columns 0, 2, 4, ...
    T* __restrict d1 = dst + (left + 1) % 2 * phase + (left + 1) / 2;  // input columns 1, 3, 5, ...
    const std::int64_t pairs = w / 2;
    for (std::int64_t m = 0; m < pairs; ++m) {
      d0[m] = src[2 * m];
      d1[m] = src[2 * m + 1];
    }
    if (w % 2) d0[pairs] = src[w - 1];
  } else {
    for (std::int64_t c0 = 0; c0 < std::min(s, w); ++c0) {  // the input columns of one phase
      T* d = dst + (left + c0) % s * phase + (left + c0) / s;
      const std::int64_t count = (w - c0 + s - 1) / s;
      for (std::int64_t m = 0; m < count; ++m) d[m] = src[(c0 + m * s) * step];
    }
  }
}

/// A padded copy of one input plane, laid out so that a window's tap reads consecutive output
/// columns from consecutive addresses whatever the horizontal stride `s`: padded column q of a
/// row is stored at (q % s) * phase + q / s. Output column x's tap at padded column x * s + t is
/// then at `tap(t) + x`. With s = 1 this is the plain padded plane.
template <class T>
class window_plane {
public:
  /// Copies plane `src` (h x w, strides sh, sw) to rows [top, top + h) and columns
  /// [left, left + w) of an hp x wp plane filled with `fill`.
  void build(const T* src, std::int64_t h, std::int64_t w, std::int64_t sh, std::int64_t sw, std::int64_t top, std::int64_t left,
             std::int64_t hp, std::int64_t wp, std::int64_t s, T fill) {
    s_ = s;
    phase_ = (wp + s - 1) / s;
    row_ = phase_ * s;
    grow(buf_, hp * row_ + slack);
    T* const b = buf_.data();
    if (s == 1) {  // only what the copy below leaves: the padding rows and columns, and the slack
      std::fill_n(b, top * row_, fill);
      for (std::int64_t i = 0; i < h; ++i) {
        std::fill_n(b + (top + i) * row_, left, fill);
        std::fill(b + (top + i) * row_ + left + w, b + (top + i + 1) * row_, fill);
      }
      std::fill(b + (top + h) * row_, b + hp * row_ + slack, fill);
    } else {
      std::fill_n(b, hp * row_ + slack, fill);
    }
    for (std::int64_t i = 0; i < h; ++i) split_row_by_phase(src + i * sh, w, sw, s, left, b + (top + i) * row_, phase_);
  }
  /// Elements past the last row, so that a vector loop may run over a row's end: whole vectors
  /// cover a ragged output row, and the lanes beyond it are dropped.
  static constexpr std::int64_t slack = 64;
  /// The first element of padded row r.
  const T* row(std::int64_t r) const { return buf_.data() + r * row_; }
  /// Where in a row output column 0 finds padded column `q`.
  std::int64_t tap(std::int64_t q) const { return q % s_ * phase_ + q / s_; }
  /// Where in a row output column 0 finds its taps: padded columns j * dilation for j < k.
  void taps(std::int64_t k, std::int64_t dilation, std::vector<std::int64_t>& out) const {
    out.resize(std::size_t(k));
    for (std::int64_t j = 0; j < k; ++j) out[std::size_t(j)] = tap(j * dilation);
  }

private:
  std::vector<T, xsimd::aligned_allocator<T, 64>> buf_;
  std::int64_t s_ = 1, phase_ = 0, row_ = 0;
};

}  // namespace kiln::kernels::detail
