// SPDX-License-Identifier: Apache-2.0
// `pool_threads`: the kernels' thread count for one scope, restored when it ends (also when a
// check throws), so a test that uses the pool leaves the next test the default.
#pragma once

#include <kiln/kernels/parallel.hpp>

#include <cstddef>

namespace kiln_test {

/// Sets `kernels::num_threads()` to `n` for the lifetime of the object.
class pool_threads {
 public:
  explicit pool_threads(std::size_t n) { kiln::kernels::set_num_threads(n); }
  ~pool_threads() { kiln::kernels::set_num_threads(saved_); }
  pool_threads(const pool_threads&) = delete;
  pool_threads& operator=(const pool_threads&) = delete;

 private:
  std::size_t saved_ = kiln::kernels::num_threads();
};

}  // namespace kiln_test
