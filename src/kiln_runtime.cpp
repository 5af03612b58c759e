// SPDX-License-Identifier: Apache-2.0
// The process-wide part of <kiln/src.hpp> (see kiln_kernels.cpp): the VM's built-ins and global
// registry, the kernels' thread pool, the default allocator. Compiled once, for the baseline, and
// shared by the kernels of every instruction-set level.
#include <kiln/support/config.hpp>

#if !defined(KILN_SEPARATE_COMPILATION)
#error "src/kiln_runtime.cpp is compiled with KILN_SEPARATE_COMPILATION"
#endif

#include <kiln/impl/runtime.ipp>
