// SPDX-License-Identifier: Apache-2.0
// kiln's own programs (the tests, the tools, the Python module) are built with
// KILN_SEPARATE_COMPILATION, as a program with many source files would build kiln
// (support/config.hpp). <kiln/src.hpp>'s definitions are compiled in three parts that build in
// parallel: this file, the kernels and their registration (every kernel for every dtype);
// kiln_runtime.cpp, the process-wide state; kiln_compiler.cpp, the compiler.
//
// With run-time dispatch (CMake's KILN_DISPATCH, kernels/isa.hpp) this file is compiled once per
// instruction-set level, with KILN_KERNELS_DISPATCH_LEVEL naming it, and every copy but its table
// of entry points is made private to its object (cmake/kiln-isa-objects.cmake); kiln_dispatch.cpp
// picks one when the program starts.
#include <kiln/support/config.hpp>

#if !defined(KILN_SEPARATE_COMPILATION)
#error "src/kiln_kernels.cpp is compiled with KILN_SEPARATE_COMPILATION"
#endif

#include <kiln/vm/impl/kernels.ipp>
