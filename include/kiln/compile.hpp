// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::compile`: an IR module in, an executable the VM runs out (the design's `tvm.compile` /
/// `relax.build`).
///
/// \code
/// ir::ir_module m = ir::parse_module(text);
/// vm::executable ex = kiln::compile(m);                              // the default pipeline, opt level 2
/// vm::virtual_machine vm(ex, {}, kiln::vm::kernel_registry());
/// vm::value y = vm.invoke("main", x, w);
///
/// kiln::pass_context ctx(3);                                         // instruments see every pass
/// ctx.set_instruments({kiln::instrument(kiln::pass_timing{})});
/// kiln::pass_context_scope scope(ctx);
/// vm::executable ex2 = kiln::compile(m, {.pipeline = "my_pass,kiln.default"});
/// \endcode
///
/// Steps: the pipeline (the default one, `transform::default_pipeline`, unless a static pipeline
/// or pipeline text is given) runs on the module under the pass context — the current one, or a
/// context made with `options.opt_level`; then `codegen::vm_codegen` emits one bytecode function
/// per graph-level function. Errors: a pass's own (`lowering_error` lists every call that cannot
/// be lowered), a `pipeline_parse_error` for bad text, a `codegen_error` naming the function and
/// binding that code generation cannot handle.
#pragma once

#include <kiln/codegen/cpp_codegen.hpp>
#include <kiln/codegen/vm_codegen.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/support/config.hpp>
#include <kiln/transform/default_pipeline.hpp>
#include <kiln/vm/executable.hpp>
#include <kiln/vm/kernels.hpp>

#include <optional>
#include <string>

namespace kiln {

/// The design's execution modes: `bytecode`, interpreted by the VM, and `compiled`, where every
/// function becomes C++ (`codegen::cpp_codegen`) that `vm::export_library` builds into a shared
/// library and `vm::load_module` loads back (or that a program includes: `kiln-compile --emit-cpp`).
enum class exec_mode : std::uint8_t { bytecode, compiled };

struct compile_options {
  /// The opt level of the context `compile` makes when no context is current (unset: 2). Inside a
  /// `pass_context_scope` the context's opt level applies, as in TVM: asking here for another one
  /// is a `usage_error`. What each level runs: docs/compiler.md ("Opt levels").
  std::optional<int> opt_level = std::nullopt;
  /// A textual pipeline (`"legalize_ops,kiln.lower_to_vm"`) to run instead of the default one.
  std::optional<std::string> pipeline = std::nullopt;
  exec_mode mode = exec_mode::bytecode;
  codegen::vm_codegen_options codegen = {};  ///< for the bytecode mode
  codegen::cpp_codegen_options cpp = {};     ///< for the compiled mode
  /// When set, receives the module as the pipeline left it (what code generation read): its
  /// functions carry the memory plan's figures (`transform::memory_plan_of`).
  ir::ir_module* lowered = nullptr;
};

/// Compiles `m` with `pipeline`, a static pipeline or pass, under `ctx`; `lowered`, when set,
/// receives what the pipeline produced.
template <class Pipeline>
  requires pass_for<std::remove_cvref_t<Pipeline>, ir::ir_module>
vm::executable compile(const ir::ir_module& m, Pipeline&& pipeline, pass_context& ctx, codegen::vm_codegen_options codegen = {},
                       ir::ir_module* lowered = nullptr) {
  vm::kernel_registry();  // executables call kernels.*: make sure the default registry has them
  ir::ir_module out = kiln::run(pipeline, m, ctx);
  if (lowered) *lowered = out;
  return codegen::vm_codegen(out, codegen);
}

/// Compiles `m` with a run-time pipeline (`parse_pipeline`, `make_pipeline`, `get_pass`) under `ctx`.
KILN_DECL vm::executable compile(const ir::ir_module& m, const pass<ir::ir_module>& pipeline, pass_context& ctx,
                                 codegen::vm_codegen_options codegen = {}, ir::ir_module* lowered = nullptr);

namespace detail {
/// The context `compile` runs in: the current one when a scope is open (TVM's rule: the
/// PassContext decides the opt level), else `own`, made with `opt_level` (default 2). An opt level
/// asked for that differs from the open context's is a `usage_error` (from `who`), not ignored.
KILN_DECL pass_context& compile_context(std::optional<pass_context>& own, std::optional<int> opt_level, const char* who);
}  // namespace detail

/// Compiles `m` with the default pipeline, or the pipeline text of `options`, under the current
/// pass context or, when there is none, one of `options.opt_level`.
KILN_DECL vm::executable compile(const ir::ir_module& m, const compile_options& options = {});

}  // namespace kiln

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/impl/compile.ipp>
#endif
