// SPDX-License-Identifier: Apache-2.0
// The definitions of `kiln::compile`'s run-time forms (compile.hpp): the default pipeline and
// code generation instantiated. Included by that header, or, with KILN_SEPARATE_COMPILATION, once
// by kiln/src.hpp.
#pragma once

#include <kiln/compile.hpp>

namespace kiln {

namespace detail {
KILN_DECL pass_context& compile_context(std::optional<pass_context>& own, std::optional<int> opt_level, const char* who) {
  if (pass_context::in_scope()) {
    pass_context& ctx = pass_context::current();
    if (opt_level && *opt_level != ctx.opt_level())
      throw usage_error(std::string(who) + ": opt level " + std::to_string(*opt_level) + " was asked for, but the current pass context has opt level " +
                        std::to_string(ctx.opt_level()) + ", and the context's applies (as in TVM); set the opt level on the context, or do not ask for one");
    return ctx;
  }
  if (opt_level && *opt_level < 0) throw usage_error(std::string(who) + ": opt level must be 0 or more, not " + std::to_string(*opt_level));
  own.emplace(opt_level.value_or(2));
  return *own;
}
inline void register_compiler_passes_once() {
  static const bool done = [] {
    transform::register_passes();
    return true;
  }();
  (void)done;
}
}  // namespace detail

KILN_DECL vm::executable compile(const ir::ir_module& m, const pass<ir::ir_module>& pipeline, pass_context& ctx,
                                 codegen::vm_codegen_options codegen, ir::ir_module* lowered) {
  vm::kernel_registry();
  ir::ir_module out = pipeline(m, ctx);
  if (lowered) *lowered = out;
  return codegen::vm_codegen(out, codegen);
}

KILN_DECL vm::executable compile(const ir::ir_module& m, const compile_options& options) {
  detail::register_compiler_passes_once();
  vm::kernel_registry();
  std::optional<pass_context> own;
  pass_context& ctx = detail::compile_context(own, options.opt_level, "kiln::compile");
  ir::ir_module out = options.pipeline ? parse_pipeline<ir::ir_module>(*options.pipeline)(m, ctx) : kiln::run(transform::default_pipeline{}, m, ctx);
  if (options.lowered) *options.lowered = out;
  switch (options.mode) {
    case exec_mode::bytecode: break;
    case exec_mode::compiled: return codegen::cpp_codegen(out, options.cpp);
  }
  return codegen::vm_codegen(out, options.codegen);
}

}  // namespace kiln
