// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kernels::global_registry()`: process-wide state, compiled once (`<kiln/impl/runtime.ipp>`),
/// with whichever instruction set's `register_kernels` the program runs.
#pragma once

#include <kiln/kernels/register.hpp>
#include <kiln/vm/builtins.hpp>

namespace kiln::kernels {

KILN_DECL vm::function_registry& global_registry() {
  static vm::function_registry* r = [] {
    vm::function_registry* reg = &vm::global_registry();
    register_kernels(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace kiln::kernels
