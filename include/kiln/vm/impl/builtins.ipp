// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/vm/builtins.hpp>'s registration. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/src.hpp> (through <kiln/impl/runtime.ipp>; kiln's own
// build: src/kiln_runtime.cpp).
#pragma once

#include <kiln/vm/builtins.hpp>

namespace kiln::vm {

KILN_DECL void register_builtins(function_registry& r) {
#define KILN_VM_REGISTER_BUILTIN(name) r.add("vm.builtin." #name, &builtin::name);
  KILN_VM_BUILTINS(KILN_VM_REGISTER_BUILTIN)
#undef KILN_VM_REGISTER_BUILTIN
  r.add("runtime.Tuple", &builtin::make_tuple);
}

KILN_DECL function_registry& global_registry() {
  static function_registry* r = [] {
    auto* reg = new function_registry();  // never destroyed: VMs may run during static destruction
    register_builtins(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace kiln::vm
