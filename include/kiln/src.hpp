// SPDX-License-Identifier: Apache-2.0
/// \file
/// The definitions a program built with `KILN_SEPARATE_COMPILATION` compiles once: include this
/// header in exactly one of its source files (see `support/config.hpp`).
#pragma once

#include <kiln/support/config.hpp>

#if !defined(KILN_SEPARATE_COMPILATION)
#error "kiln/src.hpp is for programs built with KILN_SEPARATE_COMPILATION; header-only programs need not include it"
#endif

#include <kiln/impl/compile.ipp>
#include <kiln/impl/runtime.ipp>
#include <kiln/transform/impl/register_passes.ipp>
#include <kiln/vm/impl/kernels.ipp>
