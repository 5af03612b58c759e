// SPDX-License-Identifier: Apache-2.0
// Shared by the compile-failure tests: each .cpp must fail to compile with the message named on its
// `// expect:` line.
#pragma once
#include "../toy_ir.hpp"

#include <kiln/pass/make_pass.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

struct ok_pass {
  static constexpr std::string_view name = "ok_pass";
  toy::module operator()(const toy::module& m) const { return m; }
};
