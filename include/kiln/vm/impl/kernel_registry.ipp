// SPDX-License-Identifier: Apache-2.0
/// \file
/// `vm::kernel_registry()`: process-wide state, compiled once (`<kiln/impl/runtime.ipp>`), with
/// whichever instruction set's `register_kernels` the program runs.
#pragma once

#include <kiln/vm/builtins.hpp>
#include <kiln/vm/kernels.hpp>

namespace kiln::vm {

KILN_DECL function_registry& kernel_registry() {
  static function_registry* r = [] {
    function_registry* reg = &global_registry();
    register_kernels(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace kiln::vm
