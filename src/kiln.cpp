// SPDX-License-Identifier: Apache-2.0
// kiln's own programs (the tests and the tools) are built with KILN_SEPARATE_COMPILATION, as a
// program with many source files would build kiln (support/config.hpp): this is the one source
// file that holds the heavy definitions, compiled once and linked into each of them.
#include <kiln/src.hpp>
