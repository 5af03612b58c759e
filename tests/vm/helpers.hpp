// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the VM tests: a registry with a few test natives, and small programs.
#pragma once

#include <kiln/vm/vm.hpp>

#include <memory>

namespace kiln_test {

using namespace kiln::vm;

/// The built-ins plus "test.add", "test.sub", "test.mul", "test.less", "test.noop" and "test.fail".
inline function_registry& test_registry() {
  static function_registry* r = [] {
    auto* reg = new function_registry();
    register_builtins(*reg);
    // Wrapping arithmetic: deep recursions in the tests overflow, which must not be UB.
    reg->add("test.add", [](std::int64_t a, std::int64_t b) { return std::int64_t(std::uint64_t(a) + std::uint64_t(b)); });
    reg->add("test.sub", [](std::int64_t a, std::int64_t b) { return std::int64_t(std::uint64_t(a) - std::uint64_t(b)); });
    reg->add("test.mul", [](std::int64_t a, std::int64_t b) { return std::int64_t(std::uint64_t(a) * std::uint64_t(b)); });
    reg->add("test.less", [](std::int64_t a, std::int64_t b) { return a < b; });
    reg->add("test.noop", [] {});
    reg->add("test.fail", [](std::string_view why) -> value { throw kiln::error(std::string(why)); });
    return reg;
  }();
  return *r;
}

/// main(n): i = 0; s = 0; while (i < n) { s = s + i; i = i + 1 }; return s
inline executable sum_loop() {
  exec_builder b;
  b.begin_function("main", {"n"}, 4);
  auto loop = b.new_label(), done = b.new_label();
  b.emit_call("vm.builtin.copy", {b.imm(0)}, 1);  // i
  b.emit_call("vm.builtin.copy", {b.imm(0)}, 2);  // s
  b.bind(loop);
  b.emit_call("test.less", {b.r(1), b.r(0)}, 3);
  b.emit_if(3, done);
  b.emit_call("test.add", {b.r(2), b.r(1)}, 2);
  b.emit_call("test.add", {b.r(1), b.imm(1)}, 1);
  b.emit_goto(loop);
  b.bind(done);
  b.emit_ret(2);
  b.end_function();
  return b.get();
}

/// fact(n) = n < 2 ? 1 : n * fact(n - 1), recursively in bytecode; main(n) = fact(n).
inline executable factorial() {
  exec_builder b;
  b.declare_function("fact", function_kind::bytecode, 1);
  b.begin_function("main", {"n"}, 2);
  b.emit_call("fact", {b.r(0)}, 1);
  b.emit_ret(1);
  b.end_function();
  b.begin_function("fact", {"n"}, 4);
  auto recurse = b.new_label();
  b.emit_call("test.less", {b.r(0), b.imm(2)}, 1);
  b.emit_if(1, recurse);
  b.emit_call("vm.builtin.copy", {b.imm(1)}, 2);
  b.emit_ret(2);
  b.bind(recurse);
  b.emit_call("test.sub", {b.r(0), b.imm(1)}, 2);
  b.emit_call("fact", {b.r(2)}, 3);
  b.emit_call("test.mul", {b.r(0), b.r(3)}, 3);
  b.emit_ret(3);
  b.end_function();
  return b.get();
}

}  // namespace kiln_test
