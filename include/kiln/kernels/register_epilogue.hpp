// SPDX-License-Identifier: Apache-2.0
/// \file
/// An epilogue in the form a GEMM's micro-kernels apply to their accumulators before they store
/// them: a bias per row of C, then a clip (which is also relu, and no activation at all). A 1x1
/// convolution's bias and ReLU6 then cost no pass over its output: the block is written once,
/// finished. `gemm_packed` (`gemm.hpp`) takes it from an epilogue that offers one
/// (`register_form()`); `fused_epilogue` and the convolutions' epilogues build it.
///
/// The operations are the elementwise operators' own (`ops.hpp`), in the order the interpreter
/// runs them, (x + bias) and then the clip. relu(x) and clip(x, 0, inf) are the same selects, and
/// clip(x, -inf, inf) gives x back for every x (NaN and -0 too): one form, one compiled store
/// sequence per micro-kernel, and the bits of the same steps run one after another.
#pragma once

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/ops.hpp>

#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>

namespace kiln::kernels {

/// What an epilogue does to element (i, j) of a GEMM's C, x: y = x + bias[i * bias_stride] (when
/// `bias`), then clip(y, lo, hi).
template <class T>
struct register_epilogue {
  const T* bias = nullptr;  ///< row i's value at bias[i * bias_stride]; none when null
  std::int64_t bias_stride = 0;
  double lo = -std::numeric_limits<double>::infinity();  ///< relu: 0
  double hi = std::numeric_limits<double>::infinity();

  /// The same epilogue for the rows from `row` on (its bias moved along).
  register_epilogue from_row(std::int64_t row) const {
    register_epilogue e = *this;
    if (e.bias) e.bias += row * bias_stride;
    return e;
  }
  /// Whether the clip can change a value (else it is left out).
  bool clips() const noexcept { return lo > -std::numeric_limits<double>::infinity() || hi < std::numeric_limits<double>::infinity(); }
  /// Row i's vector `v` finished (V a batch of T).
  template <class V>
  __attribute__((always_inline)) V operator()(V v, std::int64_t i) const {
    return ops::clip{lo, hi}(with_bias(v, i));
  }
  /// Row i's vector `v` with its bias, unclipped.
  template <class V>
  __attribute__((always_inline)) V with_bias(V v, std::int64_t i) const {
    if (bias) v = ops::add{}(v, V(bias[i * bias_stride]));
    return v;
  }
};

/// Calls `store(finish)`, a micro-kernel's store sequence, with what finishes each of its
/// vectors, `finish(v, i)` for row i: `*fused` (bias and clip), the bias alone where the clip
/// changes nothing, or (`Fused` false; `fused` unused) nothing at all.
template <bool Fused, class T, class Store>
__attribute__((always_inline)) inline void finish_stores(const register_epilogue<T>* fused, const Store& store) {
  if constexpr (Fused) {
    if (fused->clips()) store(*fused);
    else store([fused](auto v, std::int64_t i) __attribute__((always_inline)) { return fused->with_bias(v, i); });
  } else {
    store([](auto v, std::int64_t) __attribute__((always_inline)) { return v; });
  }
}

/// Whether epilogue type `E` may offer its work as a `register_epilogue<T>`: `e.register_form()`
/// returns a pointer to one, or null when this epilogue cannot be put so (then it is called on
/// the stored blocks as usual).
template <class E, class T>
concept offers_register_form = requires(const E& e) {
  { e.register_form() } -> std::convertible_to<const register_epilogue<T>*>;
};

/// Whether a convolution's epilogue `A` may offer image n's work as a `register_epilogue<T>`
/// (`a.register_form(n)`: one, or nothing when it cannot be put so).
template <class A, class T>
concept offers_image_register_form = requires(const A& a, std::int64_t n) {
  { a.register_form(n) } -> std::same_as<std::optional<register_epilogue<T>>>;
};

}  // namespace kiln::kernels
