// SPDX-License-Identifier: Apache-2.0
/// \file
/// The kernels as VM native functions, so that bytecode can call them by name: the bridge between
/// the VM and the kernel library, which knows nothing of the VM.
///
/// Each kernel is registered under the name and with the arguments its signature in
/// `kernels/calling_convention.hpp` states — the same signature the compiler emits its calls
/// through, so the two cannot disagree. Most are destination-passing, as compiled code calls them
/// (the design's `call_dps_packed`): the inputs, then any attributes, then the output tensor,
/// which the program allocates first (`vm.builtin.alloc_tensor`); the call returns null.
///
///     kernels.add(a, b, out)              kernels.exp(x, out)          kernels.where(c, x, y, out)
///     kernels.softmax(x, axis, out)       kernels.fused("(add x0 (exp x1))", x0, x1, out)
///     kernels.conv2d(x, w, bias, strides, padding, dilation, groups, out)   (bias a tensor or null)
///     kernels.reshape_view(x, shape) -> tensor   (a view when the layout allows; returns it)
///
/// `kernels.fused` and the other fused kernels parse each distinct description once and keep it.
/// `vm::kernel_registry()` is the VM's global registry with every kernel added, what
/// `kiln::compile`d executables are run with by default.
///
/// Registering instantiates every kernel for every dtype, the heaviest code kiln has to compile.
/// Header-only by default; a program with many translation units reaching it can compile it once
/// instead (`support/config.hpp`: define `KILN_SEPARATE_COMPILATION`, include `<kiln/src.hpp>` in
/// one source file).
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/calling_convention.hpp>
#include <kiln/vm/native.hpp>

namespace kiln::vm {

/// Registers every kernel in `r` under its name ("kernels.<name>").
KILN_DECL void register_kernels(function_registry& r);

/// The VM's process-wide registry (`vm::global_registry()`: the built-ins and whatever the program
/// added) with every kernel registered in it, once. A VM made with the default registry after this
/// call can run compiled programs.
KILN_DECL function_registry& kernel_registry();

}  // namespace kiln::vm

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/vm/impl/kernel_registry.ipp>
#include <kiln/vm/impl/kernels.ipp>
#endif
