// SPDX-License-Identifier: Apache-2.0
/// \file
/// The kernels as VM native functions, so that bytecode can call them by name.
///
/// Every kernel is registered destination-passing, as compiled code calls it (the design's
/// `call_dps_packed`): the inputs, then any attributes, then the output tensor, which the
/// program allocates first (`vm.builtin.alloc_tensor`); the call returns null.
///
///     kernels.add(a, b, out)              kernels.exp(x, out)          kernels.where(c, x, y, out)
///     kernels.clip(x, lo, hi, out)        kernels.cast(x, out)         (out's dtype is the target)
///     kernels.fused("(add x0 (exp x1))", x0, x1, out)
///     kernels.sum(x, axes, keepdims, out)  (also mean, max, min, prod; axes a shape value, empty: all)
///     kernels.argmax(x, axis, keepdims, out)  (axis an int, or null for the flattened tensor)
///     kernels.softmax(x, axis, out)        kernels.log_softmax(x, axis, out)
///     kernels.layer_norm(x, gamma, beta, axes, epsilon, center, scale, out)
///     kernels.matmul(a, b, transpose_a, transpose_b, out)
///     kernels.attention(q, k, v, transpose_k, pre, post, mask_mode, fill, mask, operands..., out)
///         (softmax(post(where(mask, pre(q @ k^T), fill))) @ v: attention.hpp; pre and post fused
///         descriptions, "" for none; mask_mode 0 none (mask null), 1 keep where true, 2 where false)
///     kernels.copy(x, out)  kernels.broadcast_to(x, out)  kernels.reshape(x, out)  (element copies)
///     kernels.reshape_view(x, shape) -> tensor   (a view when the layout allows; returns it)
///     kernels.kv_cache_append(past, x, axis, capacity) -> tensor   (concat((past, x), axis), written
///         in place into past's capacity buffer when it can: runtime/kv_cache.hpp; returns it)
///     kernels.permute_dims(x, axes, out)   (axes a shape value; empty: reversed)
///     kernels.concat(tensors, axis, out)   kernels.split(x, axis, outs)   (tuples of tensors)
///     kernels.strided_slice(x, axes, begin, end, strides, out)   (shape values; strides may be empty)
///     kernels.take(x, indices, axis, out)  (axis an int, or null for the flattened tensor)
///     kernels.pad(x, pad_width, mode, value, out)   (mode "constant", "edge" or "reflect")
///     kernels.conv2d(x, w, bias, strides, padding, dilation, groups, out)   (bias a tensor or null;
///         strides and dilation shape values of 1 or 2 entries, padding of 1, 2 or 4)
///     kernels.max_pool2d(x, pool_size, strides, padding, dilation, ceil_mode, out)
///     kernels.avg_pool2d(x, pool_size, strides, padding, dilation, ceil_mode, count_include_pad, out)
///     kernels.adaptive_avg_pool2d(x, out)   kernels.global_avg_pool2d(x, out)
///
/// The names are those of `elementwise.hpp` with the prefix "kernels.". `kernels.fused` parses each
/// distinct description once and keeps it. `kernels::global_registry()` is the VM's global
/// registry with every kernel added, what `kiln::compile`d executables are run with by default.
///
/// Registering instantiates every kernel for every dtype, the heaviest code kiln has to compile.
/// Header-only by default; a program with many translation units reaching it can compile it once
/// instead (`support/config.hpp`: define `KILN_SEPARATE_COMPILATION`, include `<kiln/src.hpp>` in
/// one source file).
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/vm/native.hpp>

namespace kiln::kernels {

/// Registers every kernel in `r` under "kernels.<name>".
KILN_DECL void register_kernels(vm::function_registry& r);

/// The VM's process-wide registry (`vm::global_registry()`: the built-ins and whatever the program
/// added) with every kernel registered in it, once. A VM made with the default registry after this
/// call can run compiled programs.
KILN_DECL vm::function_registry& global_registry();

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/global_registry.ipp>
#include <kiln/kernels/impl/register.ipp>
#endif
