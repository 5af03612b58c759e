// SPDX-License-Identifier: Apache-2.0
/// \file
/// `runtime/allocator.hpp`'s process-wide state, compiled once (`<kiln/impl/runtime.ipp>`).
#pragma once

#include <kiln/runtime/allocator.hpp>

namespace kiln::runtime {

KILN_DECL allocator& default_allocator() {
  static const object_ptr<allocator> instance = make_object<pooled_allocator>(cpu());
  return *instance;
}

}  // namespace kiln::runtime
