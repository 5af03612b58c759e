// SPDX-License-Identifier: Apache-2.0
/// \file
/// kiln's version.
#pragma once

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

namespace kiln {
inline constexpr const char* version = "0.1.0";
}
