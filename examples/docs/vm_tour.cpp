// SPDX-License-Identifier: Apache-2.0
// docs/vm.md shows the region "tour" of this program (tests/docs/check_snippets.py); CTest builds
// and runs it: a loop in bytecode counting to 10.
#include <kiln/vm/vm.hpp>

#include <cstdio>
#include <iostream>

int main() {
  // [tour]
  using namespace kiln::vm;

  global_registry().add("less", [](std::int64_t a, std::int64_t b) { return a < b; });  // typed natives
  global_registry().add("inc", [](std::int64_t a) { return a + 1; });
  exec_builder b;                                        // the design's ExecBuilder, with labels
  b.begin_function("main", {"n"}, 3);                    // argument n in register 0; 3 registers
  auto loop = b.new_label(), done = b.new_label();
  b.emit_call("vm.builtin.copy", {b.imm(0)}, 1);        // %1 = 0
  b.bind(loop);
  b.emit_call("less", {b.r(1), b.r(0)}, 2);              // %2 = less(%1, %0)
  b.emit_if(2, done);                                    // if not %2: goto done
  b.emit_call("inc", {b.r(1)}, 1);                       // %1 = inc(%1)
  b.emit_goto(loop);
  b.bind(done);
  b.emit_ret(1);
  b.end_function();
  save_executable(b.get(), "prog.kvm");                  // magic 0xD225DE2F4214151E, documented format
  virtual_machine vm(load_executable("prog.kvm"));       // validated before use
  value r = vm.invoke("main", 10);                       // 10
  // [tour]
  std::remove("prog.kvm");
  std::cout << r.as_int() << "\n";
  return r.as_int() == 10 ? 0 : 1;
}
