// SPDX-License-Identifier: Apache-2.0
// `message_of`: the message of the exception a callable throws, for checking error texts.
#pragma once

#include <kiln/support/error.hpp>

#include <doctest/doctest.h>

#include <string>

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
