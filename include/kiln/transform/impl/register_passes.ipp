// SPDX-License-Identifier: Apache-2.0
// The definition of `transform::register_passes` (default_pipeline.hpp): every compiler pass
// instantiated as a run-time pass. Included by that header, or, with KILN_SEPARATE_COMPILATION,
// once by kiln/src.hpp.
#pragma once

#include <kiln/transform/default_pipeline.hpp>

namespace kiln::transform {

KILN_DECL void register_passes(pass_registry<ir::ir_module>& registry) {
  registry.add<canonicalize_bindings>()
      .add<fold_constant>()
      .add<simplify_ops>()
      .add<eliminate_common_subexpr>()
      .add<dead_code_elimination>()
      .add<simplify>()
      .add<fuse_attention>()
      .add<fuse_epilogue>()
      .add<fuse_elementwise>()
      .add<fuse>()
      .add<legalize_ops>()
      .add<prepack_weights>()
      .add<kv_cache_in_place>()
      .add<to_non_dataflow>()
      .add<call_tir_rewrite>()
      .add<static_plan_block_memory>()
      .add<kill_after_last_use>()
      .add<vm_builtin_lower>()
      .add<vm_shape_lower>()
      .add<lower_to_vm>()
      .add<default_pipeline>()
      .add<print_ir_pass>();
  // TVM's names (tvm.relax.transform.*) for the same passes. kiln fuses in one pipeline what TVM
  // splits in FuseOps (grouping) and FuseTIR (merging the groups' kernels).
  for (const auto& [tvm, kiln_name] : tvm_pass_names) registry.add_alias(std::string(tvm), std::string(kiln_name));
  // The passes' config options, so that a context can set them by name (set_config_from_text).
  (void)fold_constant_max_bytes();
  (void)concat_in_place_option();
  (void)winograd_max_tile_option();
}

KILN_DECL pass<ir::ir_module> get_pipeline(std::string_view name) {
  pass_registry<ir::ir_module>& registry = pass_registry<ir::ir_module>::global();
  register_passes(registry);
  if (name == "default") return registry.create(default_pipeline::name);
  if (name == "default_build") return parse_pipeline<ir::ir_module>("legalize_ops,kiln.lower_to_vm", registry, "default_build");
  if (name == "zero") return parse_pipeline<ir::ir_module>("legalize_ops,kiln.fuse,kiln.lower_to_vm", registry, "zero");
  throw usage_error("kiln::transform::get_pipeline: no pipeline is named '" + std::string(name) +
                    "' (kiln has 'default': the whole optimizing pipeline kiln::compile runs; 'zero': legalization, fusion "
                    "and lowering without graph simplification; 'default_build': legalization and lowering only)");
}

}  // namespace kiln::transform
