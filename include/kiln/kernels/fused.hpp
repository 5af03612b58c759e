// SPDX-License-Identifier: Apache-2.0
/// \file
/// Fused elementwise kernels: a small expression over several input tensors (a tree of the
/// elementwise operators) evaluated in one pass over memory, with no intermediate tensors. The
/// compiler's operator fusion lowers to it. It comes in two forms over the same operators
/// (`ops.hpp`) and the same broadcasting rules:
///
/// **Compile time**, from a type: expression templates over `fx::arg<I>`, evaluated per SIMD
/// batch with everything inlined (no intermediate ever leaves the registers):
///
///     constexpr auto e = fx::exp(fx::arg<0>{} * fx::arg<1>{}) + fx::arg<2>{};
///     kernels::run_fused(e, {a, b, c}, out);           // or run_fused(e, {a, b, c}) -> tensor
///     using chain = decltype(e);                       // the type alone is the kernel:
///     kernels::run_fused(chain{}, {a, b, c}, out);     //   default-constructible when it has no constants
///
/// **Run time**, from a description: parsed from text or built node by node, compiled into a
/// short program over slots, and interpreted one tile (4 KB of each operand) at a time, so the
/// intermediates of a tile stay in L1 and memory is read and written once:
///
///     fused_expr e = fused_expr::parse("(add (exp (multiply x0 x1)) x2)");
///     e.run({a, b, c}, out);
///
/// **In a kernel's epilogue**: `fused_epilogue` applies a description to each block of a GEMM's
/// output while the block is still in L1 (x0 is the block, x1... the other operands), which is
/// how `matmul_fused` and `conv2d_fused` (`linalg.hpp`, `nn.hpp`) add a bias, an activation and a
/// residual at no extra pass over memory.
///
/// The text form is an s-expression: `(op operand...)` with the operator names of
/// `elementwise.hpp` (add subtract multiply divide power maximum minimum negative abs relu exp
/// log sqrt rsqrt tanh sigmoid erf gelu gelu_tanh, and `(clip x lo hi)` with number bounds),
/// inputs `x0`..`x7`, and numbers; a `;` starts a comment. All inputs share one floating-point dtype (float32 or
/// float64), which is the output's; inputs broadcast against each other as in numpy.
///
/// The three parts are headers of their own: `fx.hpp` (compile time), `fused_expr.hpp` (run time)
/// and `fused_epilogue.hpp` (in a kernel's epilogue); this one includes them all.
#pragma once

#include <kiln/kernels/fused_epilogue.hpp>
#include <kiln/kernels/fused_expr.hpp>
#include <kiln/kernels/fx.hpp>
