// SPDX-License-Identifier: Apache-2.0
// Test helpers shared by the IR tests, and the corpus of modules.
#pragma once

#include "../common/message_of.hpp"
#include "models.hpp"

#include <doctest/doctest.h>

namespace kiln_test {

/// A variable of type `t`, as an operand.
inline ir::expr v(const char* name, ir::type t) { return ir::make_var(name, std::move(t)); }
/// The printed type of `e`.
inline std::string type_of(const ir::expr& e) { return ir::to_string(e->checked_type); }

}  // namespace kiln_test
