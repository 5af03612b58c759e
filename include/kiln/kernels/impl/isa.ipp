// SPDX-License-Identifier: Apache-2.0
/// \file
/// The definitions behind `kernels/isa.hpp`. `isa()` is compiled with the kernels, so it names the
/// level of the kernels that run; with run-time dispatch `isa_report()` is defined where the level
/// is chosen (`src/kiln_dispatch.cpp`).
#pragma once

#include <kiln/kernels/isa.hpp>

namespace kiln::kernels {

KILN_DECL std::string_view isa() { return compiled_isa(); }

#if !defined(KILN_KERNELS_DISPATCH_LEVEL)
KILN_DECL std::string isa_report() { return detail::isa_report_text(isa(), "compiled in"); }
#endif

}  // namespace kiln::kernels
