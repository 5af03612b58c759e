// SPDX-License-Identifier: Apache-2.0
/// \file
/// kiln's default compilation pipeline, in one place, and the registration of every compiler pass
/// by name (for textual pipelines and `kiln-opt`).
///
/// \code
/// using pipeline = kiln::transform::default_pipeline;
/// std::cout << pipeline::element_text();   // kiln.default(kiln.simplify(...),kiln.fuse(...),legalize_ops,...)
/// \endcode
///
/// Graph-level passes come first; fusion passes slot in before `legalize_ops`, which is where the
/// IR stops being operators and starts being kernel calls; kernel-level rewrites (constant
/// weights packed for the GEMM) follow it. From there each step establishes what
/// the next needs (see `properties.hpp`): a user pipeline that reorders them does not compile.
#pragma once

#include <kiln/ir/pass_traits.hpp>
#include <kiln/pass/pipeline.hpp>
#include <kiln/pass/print_ir_pass.hpp>
#include <kiln/pass/registry.hpp>
#include <kiln/pass/sequential.hpp>
#include <kiln/support/config.hpp>
#include <kiln/transform/call_tir_rewrite.hpp>
#include <kiln/transform/canonicalize_bindings.hpp>
#include <kiln/transform/dead_code_elimination.hpp>
#include <kiln/transform/eliminate_common_subexpr.hpp>
#include <kiln/transform/fold_constant.hpp>
#include <kiln/transform/fuse_attention.hpp>
#include <kiln/transform/fuse_elementwise.hpp>
#include <kiln/transform/fuse_epilogue.hpp>
#include <kiln/transform/kill_after_last_use.hpp>
#include <kiln/transform/kv_cache_in_place.hpp>
#include <kiln/transform/legalize_ops.hpp>
#include <kiln/transform/prepack_weights.hpp>
#include <kiln/transform/simplify_ops.hpp>
#include <kiln/transform/static_plan_block_memory.hpp>
#include <kiln/transform/to_non_dataflow.hpp>
#include <kiln/transform/vm_builtin_lower.hpp>
#include <kiln/transform/vm_shape_lower.hpp>

#include <string_view>
#include <utility>

namespace kiln::transform {

/// Graph-level simplification (opt level 1 and up, but canonicalization): constants folded,
/// operators that do nothing removed and average pools moved ahead of 1x1 convolutions, common
/// values shared, renamings and dead code removed.
using simplify = named_sequential<"kiln.simplify", 0, canonicalize_bindings, fold_constant, simplify_ops, eliminate_common_subexpr,
                                  canonicalize_bindings, dead_code_elimination>;

/// Operator fusion (opt level 1 and up): attention (matmul, scale, mask, softmax, matmul) becomes
/// one kernel, matmul and conv2d take the elementwise operators after them into their kernel
/// (with transposed operands read in place), then the remaining elementwise chains become fused
/// kernels. Each pass can be disabled by name.
using fuse = named_sequential<"kiln.fuse", 1, fuse_attention, fuse_epilogue, fuse_elementwise>;

/// Lowering from kernel calls to what the VM runs: explicit outputs, memory planning, built-ins,
/// shapes.
using lower_to_vm = named_sequential<"kiln.lower_to_vm", 0, to_non_dataflow, call_tir_rewrite, static_plan_block_memory,
                                     kill_after_last_use, vm_builtin_lower, vm_shape_lower>;

/// The whole pipeline `kiln::compile` runs by default. `prepack_weights` (opt level 1) packs
/// constant matmul weights for the GEMM once the operators are kernel calls; `kv_cache_in_place`
/// (opt level 1) turns a returned concat(parameter, new) — a decoder's cache — into an append.
using default_pipeline = named_sequential<"kiln.default", 0, simplify, fuse, legalize_ops, prepack_weights, kv_cache_in_place, lower_to_vm>;

/// TVM's name for each compiler pass (`tvm.relax.transform.FoldConstant`, ...), and kiln's.
/// `register_passes` registers them as aliases, so `get_pass("FoldConstant")` and the pipeline
/// text `FoldConstant,DeadCodeElimination` work. FuseOps and FuseTIR both name kiln's fusion
/// pipeline, which groups operators and merges their kernels in one go.
inline constexpr std::pair<std::string_view, std::string_view> tvm_pass_names[] = {
    {"CanonicalizeBindings", "canonicalize_bindings"},
    {"FoldConstant", "fold_constant"},
    {"EliminateCommonSubexpr", "eliminate_common_subexpr"},
    {"DeadCodeElimination", "dead_code_elimination"},
    {"FuseOps", "kiln.fuse"},
    {"FuseTIR", "kiln.fuse"},
    {"LegalizeOps", "legalize_ops"},
    {"ToNonDataflow", "to_non_dataflow"},
    {"CallTIRRewrite", "call_tir_rewrite"},
    {"StaticPlanBlockMemory", "static_plan_block_memory"},
    {"KillAfterLastUse", "kill_after_last_use"},
    {"VMBuiltinLower", "vm_builtin_lower"},
    {"LowerRuntimeBuiltin", "vm_builtin_lower"},
    {"VMShapeLower", "vm_shape_lower"},
};

/// Registers every compiler pass, the pipelines, and `PrintIR` (print_ir_pass), by name in
/// `registry`, and TVM's names of the passes as aliases (idempotent).
KILN_DECL void register_passes(pass_registry<ir::ir_module>& registry = pass_registry<ir::ir_module>::global());

/// TVM's `relax.get_pipeline(name)`: "default" (`default_pipeline`, what `kiln::compile` runs),
/// "zero" (legalization, fusion and lowering, no graph simplification) or "default_build"
/// (legalization and lowering only). Registers the passes first. Another name is a `usage_error`
/// that lists these.
KILN_DECL pass<ir::ir_module> get_pipeline(std::string_view name);

}  // namespace kiln::transform

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/transform/impl/register_passes.ipp>
#endif
