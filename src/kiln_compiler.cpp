// SPDX-License-Identifier: Apache-2.0
// The other part of <kiln/src.hpp> for kiln's own programs (see kiln_kernels.cpp): `kiln::compile`
// with the default pipeline and both code generators, and the passes registered by name. The two
// share the passes' code, so they stay in one file.
#include <kiln/support/config.hpp>

#if !defined(KILN_SEPARATE_COMPILATION)
#error "src/kiln_compiler.cpp is compiled with KILN_SEPARATE_COMPILATION"
#endif

#include <kiln/impl/compile.ipp>
#include <kiln/transform/impl/register_passes.ipp>
