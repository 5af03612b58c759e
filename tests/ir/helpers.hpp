// SPDX-License-Identifier: Apache-2.0
// Test helpers shared by the IR tests, and the corpus of modules.
#pragma once

#include "models.hpp"

#include <doctest/doctest.h>

namespace kiln_test {

/// The message of the exception `f` throws (failing the test if it throws nothing).
template <class Exception = kiln::error, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Exception& e) {
    return e.what();
  }
  FAIL("expected an exception, but none was thrown");
  return {};
}

}  // namespace kiln_test
