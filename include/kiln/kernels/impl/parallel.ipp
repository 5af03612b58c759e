// SPDX-License-Identifier: Apache-2.0
/// \file
/// The kernels' thread pool (`kernels/parallel.hpp`): process-wide state, compiled once, with
/// the rest of it (`<kiln/impl/runtime.ipp>`), not with each instruction set's kernels.
#pragma once

#include <kiln/kernels/parallel.hpp>

namespace kiln::kernels::detail {

KILN_DECL support::thread_pool& pool() {
  static support::thread_pool instance;
  return instance;
}

}  // namespace kiln::kernels::detail
