// SPDX-License-Identifier: Apache-2.0
/// \file
/// Weights packed ahead of time: what the compiler's `prepack_weights` needs from the kernels to
/// turn a constant weight into the form a kernel reads in place — the layouts a packed weight is
/// stored in (which the compiler writes into the call beside the packed constant, so that an
/// executable built where vectors have another width still runs), the packing functions, and the
/// choices between the kernels a convolution may run on. The kernels that read packed weights
/// (`matmul_prepacked` in `linalg.hpp`; `conv2d_prepacked`, `conv2d_pointwise` and
/// `conv2d_winograd` in `nn.hpp`) and the GEMM (`gemm.hpp`) include it; the compiler includes
/// only it.
///
///     const kernels::packed_weight_layout l = kernels::native_weight_layout(dtype::float32, k, n);
///     tensor packed = kernels::prepack_weight(w);            // once, at compile time
///     kernels::matmul_prepacked(x, packed, l, out);          // on every call (linalg.hpp)
#pragma once

#include <kiln/runtime/tensor.hpp>
#include <kiln/support/config.hpp>
#include <kiln/support/dtype.hpp>

#include <cstdint>
#include <span>
#include <string_view>

namespace kiln::kernels {

using runtime::tensor;

// ---- the GEMM's B ---------------------------------------------------------------------------------

/// The layout of a B (K x N) packed ahead of time, as a constant weight is at compile time: K is
/// cut into blocks of `kc` rows (the last may be shorter), each block into panels of `nr`
/// columns (the last zero-padded), and each panel stored k-major — the panels `pack_b` writes,
/// all of them, one block after another. Element (p, j) of B is at `packed_b_index`. The GEMM
/// reads its panels in place (`gemm_prepacked`); a layout that is not this build's
/// (`native_packed_b_layout`: another vector width) is readable too, through `unpack_b`.
struct packed_b_layout {
  std::int64_t nr = 0, kc = 0;
  friend bool operator==(const packed_b_layout&, const packed_b_layout&) = default;
};

// ---- matmul: a K x N weight -----------------------------------------------------------------------

/// What a weight packed by `prepack_weight` holds: the K x N matrix B and the panel layout it is
/// stored in (`packed_b_layout`). The compiler records it beside the packed
/// constant, so that an executable built where vectors have another width still runs.
struct packed_weight_layout {
  std::int64_t k = 0, n = 0;
  packed_b_layout panels;
  friend bool operator==(const packed_weight_layout&, const packed_weight_layout&) = default;
};

/// A layout from its four numbers [K, N, nr, kc], as the compiler passes it to the kernels
/// (`kernels.matmul_prepacked`); checked where it is used.
KILN_DECL packed_weight_layout packed_layout(std::string_view op, std::span<const std::int64_t> v);

/// The layout `prepack_weight` writes in this build for a K x N weight of dtype `t` (float32 or
/// float64).
KILN_DECL packed_weight_layout native_weight_layout(dtype t, std::int64_t k, std::int64_t n);

/// `b` (2-D, float32 or float64; used transposed when `transpose_b`) packed for
/// `matmul_prepacked` in this build's layout (`native_weight_layout`): a 1-D tensor. Packing a
/// constant weight once, at compile time, saves the GEMM packing it on every call.
KILN_DECL tensor prepack_weight(const tensor& b, bool transpose_b = false);

// ---- conv2d: the direct kernel's order ------------------------------------------------------------

/// What a weight packed by `prepack_conv_weight` holds: the [O, C, KH, KW] weight of a one-group
/// convolution, in blocks of `ob` output channels (the direct kernel's order, see
/// `conv2d_direct`). The compiler records it beside the packed constant (`kernels.conv2d_prepacked`),
/// so that an executable built where vectors have another width still runs.
struct packed_conv_layout {
  std::int64_t o = 0, c = 0, kh = 0, kw = 0, ob = 0;
  friend bool operator==(const packed_conv_layout&, const packed_conv_layout&) = default;
};

/// A layout from its five numbers [O, C, KH, KW, ob], as the compiler passes it to the kernels;
/// checked where it is used.
KILN_DECL packed_conv_layout packed_conv_layout_of(std::string_view op, std::span<const std::int64_t> v);

/// The layout `prepack_conv_weight` writes in this build for an [O, C, KH, KW] weight of dtype
/// `t` (float32 or float64).
KILN_DECL packed_conv_layout native_conv_layout(dtype t, std::int64_t o, std::int64_t c, std::int64_t kh, std::int64_t kw);

/// `w` ([O, C, KH, KW], float32 or float64) packed for `conv2d_prepacked` in this build's layout
/// (`native_conv_layout`): a 1-D tensor. Packing a constant weight once, at compile time, lets
/// the direct kernel serve convolutions of any output size (it would otherwise reorder the
/// weight on every call, which pays only where each weight serves many output positions).
KILN_DECL tensor prepack_conv_weight(const tensor& w);

namespace detail {

/// Whether a convolution whose weight is a constant is better served by packing it ahead of
/// time for the direct kernel (`prepack_conv_weight`; the compiler's `prepack_weights` asks): the
/// kernel applies, and the output has at least 16 positions per image where that is known
/// (`positions` < 0: not known).
KILN_DECL bool prefer_prepacked_conv(std::int64_t kh, std::int64_t kw, std::int64_t groups, std::int64_t positions);

}  // namespace detail

// ---- conv2d: a 1 x 1 weight transposed, as a matmul's ------------------------------------------------

/// Whether a convolution is a plain 1 x 1 one that `conv2d_pointwise` can serve: a 1 x 1 window,
/// stride 1, no padding, one group.
KILN_DECL bool pointwise_applies(std::int64_t kh, std::int64_t kw, std::span<const std::int64_t> strides,
                                 std::span<const std::int64_t> padding, std::int64_t groups);

/// Whether `conv2d_pointwise` (X^T W^T, the output channels along the vectors) is the faster
/// form for a 1 x 1 convolution of `c` input and `o` output channels and an `oh` x `ow` output:
/// 16 to 400 positions (fewer make W X a matrix-vector or small-M product, which pads nothing),
/// W X computing at least 5 % more vector lanes (the positions rounded up to this build's column
/// panels) than X^T W^T (the channels rounded up), and enough input channels for that excess to
/// outweigh transposing the output and packing X^T (C x excess >= 100: at AVX-512, 327 channels
/// on 7 x 7, whose excess is 0.31, 700 on 14 x 14, 0.14). Measured call by call in the models on
/// Zen 5, one thread, against W X: on 7 x 7, 2048 -> 512 and 1152 -> 192 took 0.80-0.91x the
/// time, 960 -> 160 or 320 0.86x, 512 -> 2048 0.85-0.91x, 832 -> 32 to 384 0.93-1.11x; below the
/// bound, 192 -> 1152 0.93-1.00x and 160 -> 960 1.10-1.13x; on 14 x 14, 1024 -> 256 0.82-0.86x,
/// and below the bound 480 to 528 -> 32 to 256 0.95-1.25x.
KILN_DECL bool prefer_pointwise_conv(std::int64_t c, std::int64_t o, std::int64_t oh, std::int64_t ow);

/// An [O, C, 1, 1] weight (float32 or float64) packed for `conv2d_pointwise`: W^T, C x O, packed
/// as a matmul's right operand in this build's layout (`native_weight_layout(type, C, O)`): a 1-D
/// tensor. Done once, at compile time, by the compiler's `prepack_weights`.
KILN_DECL tensor prepack_conv_weight_pointwise(const tensor& w);

// ---- conv2d: Winograd's transformed weight --------------------------------------------------------

/// Whether the Winograd kernel (`winograd.hpp`) can serve a convolution: a 3 x 3 window, stride
/// 1, no dilation, one group (any padding, any image size, float32 or float64).
KILN_DECL bool winograd_applies(std::int64_t kh, std::int64_t kw, std::span<const std::int64_t> strides, std::span<const std::int64_t> dilation,
                                std::int64_t groups);

/// Whether the Winograd kernel is the faster one for a convolution it applies to, with `c` input
/// and `o` output channels and an `oh` x `ow` output: enough channels for the GEMMs to outweigh
/// the transforms (whose cost grows with C + O, the GEMMs' with C * O) — C * O of at least 4096
/// for F(2x2), 1024 for F(4x4), which saves more multiplications, and at least 16 in and 32 out —
/// and enough 2x2 tiles (32) to fill the GEMM's column panels. Measured on Zen 5, one thread,
/// against the direct kernel with its weight prepacked: ResNet-18's 3x3 stages of
/// 64 channels on 56², 128 on 28² (both F(4x4)) and 256 on 14² (F(2x2)) take 0.63x, 0.49x and
/// 0.65x its time, 512 channels on 7² (16 tiles) 1.18x; SqueezeNet's fire modules, 16 -> 64
/// channels on 55² and 32 -> 128 on 27² (F(4x4)), 0.89x and 0.65x, 48 -> 192 on 13² (F(2x2))
/// 0.86x; DenseNet's 128 -> 32 on 28² (F(4x4)) 0.75x, on 14² (F(2x2)) 0.92x (these with relu
/// fused). `max_tile` bounds the tile (`winograd_tile_size`) the kernel would then use: 2 asks
/// whether F(2x2) alone is the faster one.
KILN_DECL bool prefer_winograd_conv(std::int64_t c, std::int64_t o, std::int64_t oh, std::int64_t ow, std::int64_t max_tile = 4);

/// The output tile size m of F(m x m, 3x3) for an `oh` x `ow` output: 4 where its 4x4 tiles are
/// enough to fill the GEMM's column panels, else 2.
KILN_DECL std::int64_t winograd_tile_size(std::int64_t oh, std::int64_t ow);

/// What a weight packed by `prepack_conv_weight_winograd` holds: U = G g G^T of an [O, C, 3, 3]
/// weight g for F(m x m, 3x3), as (m+2)² O x C matrices, each stored as the GEMM's A panels
/// (`native_packed_a_layout`): panels of `mr` output channels (the last zero-padded), in blocks
/// of `kc` input channels. `mr` and `kc` are this build's (`native_winograd_layout`); a weight
/// packed in another build's (another vector width) is read too, repacked on each call.
struct winograd_conv_layout {
  std::int64_t o = 0, c = 0, m = 2, mr = 0, kc = 0;
  friend bool operator==(const winograd_conv_layout&, const winograd_conv_layout&) = default;
};

/// The layout `prepack_conv_weight_winograd` writes in this build for an [O, C, 3, 3] weight of
/// dtype `t` (float32 or float64) and output tiles of m x m.
KILN_DECL winograd_conv_layout native_winograd_layout(dtype t, std::int64_t o, std::int64_t c, std::int64_t m);

/// A layout from its five numbers [O, C, m, mr, kc], as the compiler passes it to the kernels;
/// checked where it is used.
KILN_DECL winograd_conv_layout winograd_conv_layout_of(std::string_view op, std::span<const std::int64_t> v);

namespace detail {

/// The number of elements a weight transformed in layout `l` holds; fails on a layout no weight has.
KILN_DECL std::int64_t winograd_weight_size(std::string_view op, const winograd_conv_layout& l);

}  // namespace detail

/// The [O, C, 3, 3] weight `w` (float32 or float64) transformed for `conv2d_winograd` with
/// output tiles of m x m (2 or 4), in this build's layout (`native_winograd_layout`): a 1-D
/// tensor of (m+2)² C O' elements, O' = O rounded up to whole panels. Done once, at compile
/// time, by the compiler's `prepack_weights`.
KILN_DECL tensor prepack_conv_weight_winograd(const tensor& w, std::int64_t m = 2);

}  // namespace kiln::kernels
