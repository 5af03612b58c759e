// SPDX-License-Identifier: Apache-2.0
/// \file
/// The ONNX importer's separately compiled definitions, for programs built with
/// `KILN_SEPARATE_COMPILATION` (see `support/config.hpp`): include this header, beside
/// `kiln/src.hpp`, in exactly one of their source files.
#pragma once

#include <kiln/support/config.hpp>

#if !defined(KILN_SEPARATE_COMPILATION)
#error "kiln/frontend/onnx/src.hpp is for programs built with KILN_SEPARATE_COMPILATION; header-only programs need not include it"
#endif

#include <kiln/frontend/onnx/impl/import.ipp>
