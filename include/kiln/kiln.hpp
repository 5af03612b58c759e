// SPDX-License-Identifier: Apache-2.0
/// \file
/// Everything kiln offers, in one include: the IR, the pass infrastructure, the compiler (its
/// passes, code generation, `kiln::compile`, the reference evaluator), the VM and its run time,
/// and the CPU kernels with their VM registration. Heavy to compile (the kernels and the IR's
/// parser take most of it); the per-subsystem headers are lighter.
#pragma once

#include <kiln/compile.hpp>
#include <kiln/interpreter/reference_evaluator.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/kernels/kernels.hpp>
#include <kiln/pass/pass.hpp>
#include <kiln/runtime/allocator.hpp>
#include <kiln/runtime/compare.hpp>
#include <kiln/runtime/npy.hpp>
#include <kiln/runtime/tensor.hpp>
#include <kiln/support/dtype.hpp>
#include <kiln/support/error.hpp>
#include <kiln/transform/default_pipeline.hpp>
#include <kiln/version.hpp>
#include <kiln/vm/compiled_fused.hpp>
#include <kiln/vm/kernels.hpp>
#include <kiln/vm/vm.hpp>
