// SPDX-License-Identifier: Apache-2.0
/// \file
/// A fused expression as a kernel's epilogue (`fused.hpp` has the whole picture):
/// `fused_epilogue` applies a `fused_expr` to each block of a GEMM's output while the block is
/// still in L1 (x0 is the block, x1... the other operands). This is how `matmul_fused` and
/// `conv2d_fused` (`linalg.hpp`, `nn.hpp`) add a bias, an activation and a residual at no extra
/// pass over memory.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/fused_expr.hpp>

#include <optional>
#include <span>
#include <vector>

namespace kiln::kernels {

/// An operand of an epilogue, addressed by the coordinates (i, j) of the matrix the kernel
/// produces: element (i, j) is `data[i * row_stride + j * col_stride]` (a stride of 0 repeats the
/// operand along that axis: a bias per column has row stride 0).
template <class T>
struct epilogue_operand {
  const T* data = nullptr;
  std::int64_t row_stride = 0, col_stride = 0;
};

namespace detail {

/// The strides with which `t` is read at each index of `shape` (0 along the axes it is broadcast
/// over, numpy's rule), or nothing when `t` does not broadcast to `shape`.
KILN_DECL std::optional<std::vector<std::int64_t>> broadcast_strides(const tensor& t, std::span<const std::int64_t> shape);

/// Checks the operands of a kernel's fused epilogue against its output `out`, and returns each
/// operand's strides along the output's axes (0 where it is broadcast).
KILN_DECL std::vector<std::vector<std::int64_t>> check_epilogue(std::string_view op, const fused_expr& e, std::span<const tensor> operands, const tensor& out);

}  // namespace detail

/// A fused expression applied to the blocks of a matrix as a kernel writes them (a GEMM's
/// epilogue): x0 is the block's value, x1... are the operands, and the result replaces the block.
/// The kernel calls it once per finished block, while the block is still in L1; rows are taken
/// 256 elements at a time. Thread-safe (each thread has its own buffers); holds a pointer to
/// the expression, which must outlive it.
///
///     const fused_expr e = fused_expr::parse("(relu (add x0 x1))");
///     const epilogue_operand<float> bias{b, 0, 1};       // one value per column
///     fused_epilogue<float> epi(e, {&bias, 1});
///     epi(c, ldc, 1, 0, 0, m, n);                        // the m x n block at (0, 0)
template <class T>
class fused_epilogue {
public:
  /// No epilogue: `operator bool` is false, and applying it is an error.
  fused_epilogue() = default;
  fused_epilogue(const fused_expr& e, std::span<const epilogue_operand<T>> operands) : e_(&e), operands_(operands.begin(), operands.end()) {
    if (operands.size() + 1 < e.num_inputs())
      fail("fused", kiln::detail::concat("the epilogue reads ", e.num_inputs(), " inputs (x0 is the product), ", operands.size() + 1, " given"));
    if (operands.size() + 1 > detail::max_fused_inputs)
      fail("fused", kiln::detail::concat("an epilogue takes at most ", detail::max_fused_inputs - 1, " operands, ", operands.size(), " given"));
  }
  explicit operator bool() const noexcept { return e_ != nullptr; }

  /// Moves operand `k` by `delta` elements (to the next matrix of a batch).
  void shift(std::size_t k, std::int64_t delta) { operands_[k].data += delta; }
  const epilogue_operand<T>& operand(std::size_t k) const { return operands_[k]; }

  /// Applies the expression to the `m` x `n` block whose first element, (row0, col0) of the
  /// matrix, is at `c`; `rs` and `cs` are the block's strides.
  void operator()(T* c, std::int64_t rs, std::int64_t cs, std::int64_t row0, std::int64_t col0, std::int64_t m, std::int64_t n) const {
    using program = fused_expr::program;
    constexpr std::int64_t W = std::int64_t(batch<T>::size), chunk = 256;
    static_assert(chunk % W == 0);
    const program& p = *e_->program_;
    const std::size_t slots = p.first_temp() + p.temps;
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> scratch;
    constexpr std::size_t pitch = std::size_t(chunk) + 64 / sizeof(T);  // apart by an odd number of lines (see evaluate)
    if (scratch.size() < slots * pitch) scratch.resize(slots * pitch);
    auto buffer = [&](std::size_t slot) { return scratch.data() + slot * pitch; };
    thread_local std::vector<const T*> src;
    src.assign(slots, nullptr);
    for (const std::uint32_t slot : p.buffered_constants) {
      std::fill_n(buffer(slot), chunk, T(p.constant(slot)));
      src[slot] = buffer(slot);
    }
    const std::vector<fused_expr::step<T>>& steps = p.template steps<T>();
    // Gathers `len` elements `stride` apart into `b`, padding to whole vectors.
    auto gather = [&](T* b, const T* from, std::int64_t stride, std::int64_t len, std::int64_t padded) {
      if (stride == 0) std::fill_n(b, padded, *from);
      else {
        for (std::int64_t j = 0; j < len; ++j) b[j] = from[j * stride];
        std::fill(b + len, b + padded, b[0]);
      }
      return b;
    };
    // Elements [j0, j0 + len) of row i: in place when they are whole vectors of a row with
    // contiguous columns, else gathered into a buffer and written back.
    auto run = [&](std::int64_t i, std::int64_t j0, std::int64_t len) {
      const std::int64_t padded = (len + W - 1) / W * W;
      const bool whole = len == padded;
      T* row = c + i * rs + j0 * cs;
      const bool direct = whole && cs == 1;
      src[0] = direct ? row : gather(buffer(0), row, cs, len, padded);
      for (std::size_t k = 0; k < operands_.size(); ++k) {
        const epilogue_operand<T>& o = operands_[k];
        const T* at = o.data + (row0 + i) * o.row_stride + (col0 + j0) * o.col_stride;
        src[k + 1] = whole && o.col_stride == 1 ? at : gather(buffer(k + 1), at, o.col_stride, len, padded);
      }
      for (std::size_t s = 0; s < p.code.size(); ++s) {
        const fused_expr::instr& in = p.code[s];
        const bool last = s + 1 == p.code.size();
        T* d = last && direct ? row : buffer(in.dst);
        const auto& st = steps[s];
        st.fn(st, d, st.ka ? nullptr : src[in.a], st.kb ? nullptr : src[in.b], padded);
        if (!last) src[in.dst] = d;
      }
      if (!direct) {
        const T* r = buffer(p.code.back().dst);
        for (std::int64_t j = 0; j < len; ++j) row[j * cs] = r[j];
      }
    };
    for (std::int64_t j0 = 0; j0 < n; j0 += chunk) {
      const std::int64_t len = std::min(chunk, n - j0);
      // With contiguous columns, the whole vectors in place and only the rest through a buffer
      // (a 7 x 7 plane is 3 vectors and one element).
      const std::int64_t body = cs == 1 ? len / W * W : 0;
      for (std::int64_t i = 0; i < m; ++i) {
        if (body > 0) run(i, j0, body);
        if (body < len) run(i, j0 + body, len - body);
      }
    }
  }

private:
  const fused_expr* e_ = nullptr;
  std::vector<epilogue_operand<T>> operands_;
};

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/fused_epilogue.ipp>
#endif
