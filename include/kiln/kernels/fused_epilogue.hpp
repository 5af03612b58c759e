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
#include <kiln/kernels/register_epilogue.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <type_traits>
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

  /// The expression as a GEMM's micro-kernels apply it to their accumulators
  /// (`register_epilogue`), where it is relu, clip or nothing of x0, or of x0 plus an operand of
  /// one value per row (a convolution's bias). Nothing otherwise.
  std::optional<register_epilogue<T>> in_register() const {
    using act = fused_expr::activation_form::act;
    const std::optional<form>& f = e_->program_->form;
    if (!f || (f->shape != form::sum::x0 && f->shape != form::sum::x0_a)) return std::nullopt;
    register_epilogue<T> r;
    if (f->shape == form::sum::x0_a) {
      const epilogue_operand<T>& a = operands_[f->operands[0] - 1u];
      if (a.col_stride != 0) return std::nullopt;
      r.bias = a.data, r.bias_stride = a.row_stride;
    }
    switch (f->activation) {
      case act::none: return r;
      case act::relu: r.lo = 0; return r;
      case act::clip: r.lo = f->lo, r.hi = f->hi; return r;
      default: return std::nullopt;
    }
  }

  /// Moves operand `k` by `delta` elements (to the next matrix of a batch).
  void shift(std::size_t k, std::int64_t delta) { operands_[k].data += delta; }
  const epilogue_operand<T>& operand(std::size_t k) const { return operands_[k]; }

  /// Applies the expression to the `m` x `n` block whose first element, (row0, col0) of the
  /// matrix, is at `c`; `rs` and `cs` are the block's strides. A block of one column (a
  /// matrix-vector product's, or a convolution's of one position) is taken as the row it is in
  /// the transposed matrix, with the operands' strides exchanged: one pass along it, not one call
  /// per element.
  void operator()(T* c, std::int64_t rs, std::int64_t cs, std::int64_t row0, std::int64_t col0, std::int64_t m, std::int64_t n) const {
    if (n == 1 && m > 1) {
      std::array<epilogue_operand<T>, detail::max_fused_inputs> t;
      for (std::size_t k = 0; k < operands_.size(); ++k) t[k] = {operands_[k].data, operands_[k].col_stride, operands_[k].row_stride};
      apply(operand_list(t.data(), operands_.size()), c, cs, rs, col0, row0, 1, m);
      return;
    }
    apply(operands_, c, rs, cs, row0, col0, m, n);
  }

private:
  using form = fused_expr::activation_form;
  using operand_list = std::span<const epilogue_operand<T>>;

  /// `operator()` with these operands: `operands_`, or their transposition.
  void apply(operand_list operands, T* c, std::int64_t rs, std::int64_t cs, std::int64_t row0, std::int64_t col0, std::int64_t m, std::int64_t n) const {
    using program = fused_expr::program;
    if (const std::optional<fused_expr::activation_form>& f = e_->program_->form; f && cs == 1 && one_pass(operands, *f)) {
      apply_form(operands, *f, c, rs, row0, col0, m, n);
      return;
    }
    constexpr std::int64_t W = std::int64_t(batch<T>::size), chunk = 256;
    static_assert(chunk % W == 0);
    const program& p = *e_->program_;
    const std::size_t slots = p.first_temp() + p.temps;
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> scratch;
    constexpr std::size_t pitch = std::size_t(chunk) + 64 / sizeof(T);  // apart by an odd number of lines (see evaluate)
    detail::grow(scratch, std::int64_t(slots * pitch));
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
      for (std::size_t k = 0; k < operands.size(); ++k) {
        const epilogue_operand<T>& o = operands[k];
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

  /// Whether `f`'s operands are each read per element along a row or one value per row, as
  /// `apply_form` reads them.
  static bool one_pass(operand_list operands, const form& f) {
    for (int k = 0; k < operand_count(f.shape); ++k) {
      const std::int64_t cs = operands[f.operands[std::size_t(k)] - 1u].col_stride;
      if (cs != 0 && cs != 1) return false;
    }
    return true;
  }

  /// The operands a sum of `shape` adds to x0.
  static constexpr int operand_count(form::sum shape) {
    switch (shape) {
      case form::sum::x0: return 0;
      case form::sum::x0_a: return 1;
      case form::sum::x0_a_b: return 2;
      case form::sum::x0_a_bc: return 3;
    }
    return 0;
  }
  template <form::sum S>
  using sum_shape = std::integral_constant<form::sum, S>;
  /// Calls `f(sum_shape<shape>{})`: the shape a compile-time constant in the loops `f` runs.
  template <class F>
  static void with_shape(form::sum shape, const F& f) {
    switch (shape) {
      case form::sum::x0: return f(sum_shape<form::sum::x0>{});
      case form::sum::x0_a: return f(sum_shape<form::sum::x0_a>{});
      case form::sum::x0_a_b: return f(sum_shape<form::sum::x0_a_b>{});
      case form::sum::x0_a_bc: return f(sum_shape<form::sum::x0_a_bc>{});
    }
  }
  /// x0 plus the operands, added in the expression's order: `operand(k)` is operand k's vector.
  template <form::sum S, class V, class Operand>
  __attribute__((always_inline)) static V add_operands(sum_shape<S>, V x0, const Operand& operand) {
    if constexpr (S == form::sum::x0) return x0;
    else if constexpr (S == form::sum::x0_a) return ops::add{}(x0, operand(0));
    else if constexpr (S == form::sum::x0_a_b) return ops::add{}(ops::add{}(x0, operand(0)), operand(1));
    else return ops::add{}(ops::add{}(x0, operand(0)), ops::add{}(operand(1), operand(2)));
  }

  /// Keeps the compiler from fusing the multiply that made `v` into the add that uses it: the
  /// interpreter rounds between the two (GCC contracts across statements by default).
  template <class V>
  __attribute__((always_inline)) static V rounded(V v) {
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
    __asm__("" : "+v"(v.data));
#elif defined(__GNUC__) && !defined(__clang__) && defined(__aarch64__)
    __asm__("" : "+w"(v.data));
#endif
    return v;
  }

  /// `f` over the m x n block at `c` (rows `rs` apart, contiguous columns) in one pass: each
  /// vector is loaded, summed with the operands, activated and stored while in registers. The
  /// activations made of exp, erf or tanh (sigmoid, tanh, gelu, gelu_tanh, SiLU) are the
  /// interpreter's own step function instead (the expression's, resolved where it was built; for
  /// SiLU its sigmoid and product in one step), run over the sums of whole rows, up to 2,048
  /// elements at a time: compiled here, they could be inlined and contracted differently, or for
  /// another instruction set, and the two would differ in the last bit.
  void apply_form(operand_list operands, const form& f, T* c, std::int64_t rs, std::int64_t row0, std::int64_t col0, std::int64_t m, std::int64_t n) const {
    using act = form::act;
    const auto staged = [&](fused_expr::exec_fn<T> fn) { form_rows(operands, f, identity{}, fn, c, rs, row0, col0, m, n); };
    switch (f.activation) {
      case act::none: return form_rows(operands, f, identity{}, nullptr, c, rs, row0, col0, m, n);
      case act::relu: return form_rows(operands, f, ops::relu{}, nullptr, c, rs, row0, col0, m, n);
      case act::clip: return form_rows(operands, f, ops::clip{f.lo, f.hi}, nullptr, c, rs, row0, col0, m, n);
      case act::hard_sigmoid: return form_rows(operands, f, hard_sigmoid{T(f.alpha), T(f.beta), ops::clip{f.lo, f.hi}}, nullptr, c, rs, row0, col0, m, n);
      case act::hard_swish:
        return form_rows(operands, f, hard_swish{hard_sigmoid{T(f.alpha), T(f.beta), ops::clip{f.lo, f.hi}}}, nullptr, c, rs, row0, col0, m, n);
      case act::sigmoid:
      case act::tanh:
      case act::gelu:
      case act::gelu_tanh: return staged(e_->program_->template steps<T>()[f.instruction].fn);
      case act::silu: return staged(e_->program_->template silu<T>());
    }
  }
  struct identity {
    template <class V>
    V operator()(const V& v) const { return v; }
  };
  struct hard_sigmoid {
    T alpha, beta;
    ops::clip clip;
    template <class V>
    V operator()(const V& s) const { return clip(ops::add{}(rounded(ops::multiply{}(s, V(alpha))), V(beta))); }
  };
  struct hard_swish {
    hard_sigmoid h;
    template <class V>
    V operator()(const V& s) const { return ops::multiply{}(s, h(s)); }
  };

  /// The rows of `apply_form`: `act` of each sum, or, with `staged`, that step function over the
  /// sums. The staged sums of several rows go one after another into one buffer of up to `span`
  /// elements, so that the step function runs over long stretches whatever the rows' length (a
  /// 14 x 14 plane is 196).
  template <class Act>
  void form_rows(operand_list operands, const form& f, const Act& act, fused_expr::exec_fn<T> staged, T* c, std::int64_t rs, std::int64_t row0,
                 std::int64_t col0, std::int64_t m, std::int64_t n) const {
    using V = batch<T>;
    constexpr std::int64_t W = std::int64_t(V::size), span = 2048;
    const int count = operand_count(f.shape);
    const fused_expr::step<T> st{staged, false, false, T(0), T(0), 0, 0, 0, {}};
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> sums, out;
    // Rows per buffer: at least one, whole rows (a row longer than `span` is taken in parts).
    const std::int64_t part = std::min(n, span), per_buffer = std::max<std::int64_t>(1, span / std::max<std::int64_t>(n, 1));
    if (staged) {
      detail::grow(sums, per_buffer * part + W);
      detail::grow(out, per_buffer * part + W);
    }
    // Applies the step function to the `len` sums in the buffer, and writes the result to the
    // rows [first, first + rows) (columns [j0, j0 + width) of each) they came from.
    // Where the rows are one after another, the result goes straight to them, whole vectors at
    // least.
    const auto flush = [&](std::int64_t first, std::int64_t rows, std::int64_t j0, std::int64_t width) {
      const std::int64_t len = rows * width, padded = (len + W - 1) / W * W, whole = len / W * W;
      T* const dst = c + first * rs + j0;
      std::fill(sums.data() + len, sums.data() + padded, T(0));
      if (rows == 1 || rs == width) {  // the rows one after another: the whole vectors straight to them
        if (whole > 0) staged(st, dst, sums.data(), nullptr, whole);
        if (whole < len) {
          staged(st, out.data(), sums.data() + whole, nullptr, W);
          std::copy_n(out.data(), len - whole, dst + whole);
        }
        return;
      }
      staged(st, out.data(), sums.data(), nullptr, padded);
      for (std::int64_t r = 0; r < rows; ++r) std::copy_n(out.data() + r * width, width, c + (first + r) * rs + j0);
    };
    for (std::int64_t j0 = 0; j0 < n; j0 += part) {
      const std::int64_t width = std::min(part, n - j0);
      std::int64_t first = 0;  // the first row whose sums are in the buffer
      for (std::int64_t i = 0; i < m; ++i) {
        // Operand k of the row: `at[k]`, advanced by `step[k]` (1 along the row; 0 for one value
        // per row, read from `splat[k]`, W copies of it).
        alignas(64) T splat[3][W];
        const T* at[3] = {splat[0], splat[1], splat[2]};
        std::int64_t step[3] = {0, 0, 0};
        for (int k = 0; k < count; ++k) {
          const epilogue_operand<T>& o = operands[f.operands[std::size_t(k)] - 1u];
          const T* p = o.data + (row0 + i) * o.row_stride + (col0 + j0) * o.col_stride;
          if (o.col_stride == 0) std::fill_n(splat[k], W, *p);
          else at[k] = p, step[k] = 1;
        }
        // The sum at element j of the row part (x0 there, plus the operands'), or, `tail`, of
        // the len < W elements from j.
        const T* const x = c + i * rs + j0;
        T* const to = staged ? sums.data() + (i - first) * width : c + i * rs + j0;  // where the row's results go
        with_shape(f.shape, [&](auto shape) {
          const auto sum = [&](std::int64_t j) __attribute__((always_inline)) {
            return add_operands(shape, V::load_unaligned(x + j),
                                [&](int k) __attribute__((always_inline)) { return V::load_unaligned(at[k] + j * step[k]); });
          };
          const auto tail = [&](std::int64_t j, std::int64_t len) {
            alignas(64) T part_x[W] = {}, part_op[3][W] = {};
            std::copy_n(x + j, len, part_x);
            for (int k = 0; k < count; ++k) std::copy_n(step[k] == 1 ? at[k] + j : splat[k], step[k] == 1 ? len : W, part_op[k]);
            return add_operands(shape, V::load_aligned(part_x), [&](int k) { return V::load_aligned(part_op[k]); });
          };
          // The activation into the row, or (staged: `act` is the identity) the sums into the
          // buffer for the step function.
          std::int64_t j = 0;
          for (; j + W <= width; j += W) act(sum(j)).store_unaligned(to + j);
          if (j < width) {
            alignas(64) T r[W];
            act(tail(j, width - j)).store_aligned(r);
            std::copy_n(r, width - j, to + j);
          }
        });
        if (!staged) continue;
        if (i + 1 - first == per_buffer || i + 1 == m) {
          flush(first, i + 1 - first, j0, width);
          first = i + 1;
        }
      }
    }
  }

  const fused_expr* e_ = nullptr;
  std::vector<epilogue_operand<T>> operands_;
};

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/fused_epilogue.ipp>
#endif
