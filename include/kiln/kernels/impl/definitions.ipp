// SPDX-License-Identifier: Apache-2.0
/// \file
/// The kernels' out-of-line definitions, all of them: each kernel header includes its own when
/// kiln is header-only; with `KILN_SEPARATE_COMPILATION` they are compiled once per instruction-set
/// level in the kernel library's one source file, with the VM's registration that calls them
/// (`vm/impl/kernels.ipp`, `kernels/isa.hpp`).
#pragma once

#include <kiln/kernels/impl/attention.ipp>
#include <kiln/kernels/impl/elementwise.ipp>
#include <kiln/kernels/impl/fused_epilogue.ipp>
#include <kiln/kernels/impl/fused_expr.ipp>
#include <kiln/kernels/impl/fx.ipp>
#include <kiln/kernels/impl/isa.ipp>
#include <kiln/kernels/impl/linalg.ipp>
#include <kiln/kernels/impl/nn.ipp>
#include <kiln/kernels/impl/pool2d.ipp>
#include <kiln/kernels/impl/reduce.ipp>
#include <kiln/kernels/impl/resize.ipp>
#include <kiln/kernels/impl/transform.ipp>
#include <kiln/kernels/impl/window_params.ipp>
