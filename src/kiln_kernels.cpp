// SPDX-License-Identifier: Apache-2.0
// kiln's own programs (the tests and the tools) are built with KILN_SEPARATE_COMPILATION, as a
// program with many source files would build kiln (support/config.hpp). <kiln/src.hpp>'s
// definitions are compiled here in two parts that build in parallel: this file, the kernels'
// registration (every kernel for every dtype), and kiln_compiler.cpp, the compiler.
#include <kiln/support/config.hpp>

#if !defined(KILN_SEPARATE_COMPILATION)
#error "src/kiln_kernels.cpp is compiled with KILN_SEPARATE_COMPILATION"
#endif

#include <kiln/kernels/impl/register.ipp>
