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
      .add<eliminate_common_subexpr>()
      .add<dead_code_elimination>()
      .add<simplify>()
      .add<fuse_epilogue>()
      .add<fuse_elementwise>()
      .add<fuse>()
      .add<legalize_ops>()
      .add<prepack_weights>()
      .add<to_non_dataflow>()
      .add<call_tir_rewrite>()
      .add<static_plan_block_memory>()
      .add<kill_after_last_use>()
      .add<vm_builtin_lower>()
      .add<vm_shape_lower>()
      .add<lower_to_vm>()
      .add<default_pipeline>()
      .add<print_ir_pass>();
}

}  // namespace kiln::transform
