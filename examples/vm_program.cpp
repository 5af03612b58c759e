// SPDX-License-Identifier: Apache-2.0
// Builds a small bytecode program with the executable builder — a loop that calls a native
// function — prints it, serializes it, loads it back, runs it, and prints the instrument trace.
#include <kiln/vm/vm.hpp>

#include <cstdio>
#include <filesystem>

using namespace kiln::vm;

int main() {
  // A native function the bytecode calls by name: typed C++ in, register values out.
  function_registry& registry = global_registry();
  registry.add("demo.less", [](std::int64_t a, std::int64_t b) { return a < b; });
  registry.add("demo.axpy", [](std::int64_t a, std::int64_t x, std::int64_t y) { return a * x + y; });

  // main(n): i = 0; acc = 1; while (i < n) { acc = 3 * acc + i; i = i + 1 }; return (acc, shape)
  exec_builder b;
  b.begin_function("main", {"n"}, 5);
  auto loop = b.new_label(), done = b.new_label();
  b.emit_call("vm.builtin.copy", {b.imm(0)}, 1);
  b.emit_call("vm.builtin.copy", {b.imm(1)}, 2);
  b.bind(loop);
  b.emit_call("demo.less", {b.r(1), b.r(0)}, 3);
  b.emit_if(3, done);
  b.emit_call("demo.axpy", {b.imm(3), b.r(2), b.r(1)}, 2);
  b.emit_call("demo.axpy", {b.imm(1), b.r(1), b.imm(1)}, 1);
  b.emit_goto(loop);
  b.bind(done);
  b.emit_call("vm.builtin.make_tuple", {b.r(2), b.c(b.add_constant(value::shape({2, 3})))}, 4);
  b.emit_ret(4);
  b.end_function();
  const executable built = b.get();

  std::printf("%s", built.as_text().c_str());
  std::printf("%s\n", built.stats().c_str());

  // Serialize, load back (validated), and run.
  const auto path = std::filesystem::temp_directory_path() / "kiln_vm_program.kvm";
  save_executable(built, path);
  virtual_machine vm(load_executable(path));
  std::printf("wrote and reloaded %s (%ju bytes)\n", path.string().c_str(), std::uintmax_t(std::filesystem::file_size(path)));

  vm.set_instrument([](const value&, std::string_view symbol, bool before, const value& ret, call_args args) {
    std::string line = std::string(before ? "  -> " : "  <- ") + std::string(symbol) + "(";
    for (std::size_t i = 0; i < args.size(); ++i) line += (i ? ", " : "") + to_string(args[i]);
    line += ")";
    if (!before) line += " = " + to_string(ret);
    std::printf("%s\n", line.c_str());
    return instrument_action::no_op;
  });
  std::printf("instrument trace of main(2):\n");
  const value result = vm.invoke("main", 2);
  std::printf("main(2) = %s\n", to_string(result).c_str());

  vm.set_instrument(nullptr);
  std::printf("main(10) = %s\n", to_string(vm.invoke("main", 10)).c_str());
  return equal(vm.invoke("main", 2).as_tuple()[0], value(10)) ? 0 : 1;  // acc: 1 -> 3 -> 10
}
