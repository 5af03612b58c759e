// SPDX-License-Identifier: Apache-2.0
/// \file
/// `support/thread_pool.hpp`'s process-wide state, compiled once (`<kiln/impl/runtime.ipp>`).
#pragma once

#include <kiln/support/thread_pool.hpp>

namespace kiln::support::detail {

KILN_DECL bool& inside_task_flag() noexcept {
  thread_local bool inside = false;
  return inside;
}

}  // namespace kiln::support::detail
