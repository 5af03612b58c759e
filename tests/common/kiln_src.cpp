// SPDX-License-Identifier: Apache-2.0
// kiln's separately compiled definitions, once for every test executable (support/config.hpp).
#include <kiln/src.hpp>
