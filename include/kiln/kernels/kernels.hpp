// SPDX-License-Identifier: Apache-2.0
/// \file
/// The CPU kernels, all of them. (Their registration as VM natives is `vm/kernels.hpp`.)
#pragma once

#include <kiln/kernels/attention.hpp>
#include <kiln/kernels/calling_convention.hpp>
#include <kiln/kernels/common.hpp>
#include <kiln/kernels/cpu_caches.hpp>
#include <kiln/kernels/depthwise_conv2d.hpp>
#include <kiln/kernels/elementwise.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/fused_epilogue.hpp>
#include <kiln/kernels/fused_expr.hpp>
#include <kiln/kernels/fx.hpp>
#include <kiln/kernels/gemm.hpp>
#include <kiln/kernels/isa.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/nn.hpp>
#include <kiln/kernels/ops.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/pool2d.hpp>
#include <kiln/kernels/reduce.hpp>
#include <kiln/kernels/register_epilogue.hpp>
#include <kiln/kernels/resize.hpp>
#include <kiln/kernels/transform.hpp>
#include <kiln/kernels/window_params.hpp>
#include <kiln/kernels/window_plane.hpp>
#include <kiln/kernels/winograd.hpp>
