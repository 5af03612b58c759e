// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

using namespace kiln;
using namespace kiln::vm;
using kiln_test::message_of;

TEST_CASE("the builder lays out functions, instructions and constants as the design describes") {
  const executable e = kiln_test::sum_loop();
  REQUIRE(e.functions.size() == 4);  // main, then the natives in order of first use
  CHECK(e.functions[0].name == "main");
  CHECK(e.functions[0].kind == function_kind::bytecode);
  CHECK(e.functions[0].num_args == 1);
  CHECK(e.functions[0].register_file_size == 4);
  CHECK(e.functions[0].param_names == std::vector<std::string>{"n"});
  CHECK(e.functions[1].name == "vm.builtin.copy");
  CHECK(e.functions[1].kind == function_kind::native);
  CHECK(e.num_instructions() == 8);
  // Call dst func_idx num_args args...
  const instruction call = e.at(0);
  CHECK(call.op == opcode::call);
  CHECK(call.dst == 1);
  CHECK(call.func_idx == 1);
  CHECK(call.args.size() == 1);
  CHECK(call.arg(0) == instr_arg::imm(0));
  // Labels became relative offsets.
  CHECK(e.at(3).op == opcode::if_);
  CHECK(e.at(3).false_offset == 4);
  CHECK(e.at(6).op == opcode::goto_);
  CHECK(e.at(6).pc_offset == -4);
  CHECK(e.instr_offset[1] == 5);
}

TEST_CASE("as_text, as_python and stats render the program") {
  const executable e = kiln_test::sum_loop();
  const std::string text = e.as_text();
  CHECK(text.find("@main(n):  # 1 args, 4 registers") != std::string::npos);
  CHECK(text.find("0   call  vm.builtin.copy          in: i0  dst: %1") != std::string::npos);
  CHECK(text.find("3   if    %3, +4  (else to 7)") != std::string::npos);
  CHECK(text.find("6   goto  -4  (to 2)") != std::string::npos);
  CHECK(text.find("7   ret   %2") != std::string::npos);
  const std::string py = e.as_python();
  CHECK(py.find("with ib.function(\"main\", num_inputs=1, params=[\"n\"]):") != std::string::npos);
  CHECK(py.find("ib.emit_call(\"test.less\", args=[ib.r(1), ib.r(0)], dst=ib.r(3))") != std::string::npos);
  CHECK(py.find("ib.emit_if(ib.r(3), 4)") != std::string::npos);
  CHECK(py.find("ib.emit_ret(ib.r(2))") != std::string::npos);
  const std::string st = e.stats();
  CHECK(st.find("Globals (#4): [main, vm.builtin.copy, test.less, test.add]") != std::string::npos);
  CHECK(st.find("Instructions (#8): call 5 ret 1 goto 1 if 1") != std::string::npos);
}

TEST_CASE("constants are pooled, equal scalars share a slot, tensors do not") {
  exec_builder b;
  CHECK(b.add_constant(value(3)) == 0);
  CHECK(b.add_constant(value("s")) == 1);
  CHECK(b.add_constant(value(3)) == 0);
  auto t = tensor::zeros({2}, dtype::float32);
  CHECK(b.add_constant(value(t)) == 2);
  CHECK(b.add_constant(value(t)) == 3);
  b.set_memory_scope(2, "global");
  CHECK(message_of([&] { b.add_constant(value(object_ptr<const closure_obj>(kiln::runtime::make_object<closure_obj>()))); }) ==
        "kiln::vm::exec_builder: a closure cannot be a constant");
  CHECK(b.add_constant(value::shape({1, 2})) == 4);
  CHECK(message_of([&] { b.set_memory_scope(9, "global"); }) == "kiln::vm::exec_builder: set_memory_scope: no constant 9");
}

TEST_CASE("emit checks registers, indices and arities, and takes a bad instruction back") {
  exec_builder b;
  b.declare_function("two", function_kind::bytecode, 2);
  b.begin_function("main", {"x"}, 2);
  CHECK(message_of([&] { b.emit_call("vm.builtin.copy", {b.r(2)}, 1); }) ==
        "kiln::vm::exec_builder: function 'main', instruction 0 (call): argument 0 register %2 is outside the register file of 2 registers");
  CHECK(message_of([&] { b.emit_call("vm.builtin.copy", {b.r(0)}, 5); }) ==
        "kiln::vm::exec_builder: function 'main', instruction 0 (call): destination %5 is outside the register file of 2 registers");
  CHECK(message_of([&] { b.emit_call("vm.builtin.copy", {b.c(0)}, 1); }) ==
        "kiln::vm::exec_builder: function 'main', instruction 0 (call): argument 0 refers to constant 0, the pool has 0");
  CHECK(message_of([&] { b.emit_call(std::int64_t(99), {}, 1); }) ==
        "kiln::vm::exec_builder: function 'main', instruction 0 (call): function index 99 is outside the function table of 3");
  CHECK(message_of([&] { b.emit_call("two", {b.r(0)}, 1); }) ==
        "kiln::vm::exec_builder: function 'main', instruction 0 (call): calls 'two' with 1 arguments, it takes 2");
  CHECK(message_of([&] { b.emit_ret(7); }) ==
        "kiln::vm::exec_builder: function 'main', instruction 0 (ret): result %7 is outside the register file of 2 registers");
  CHECK(message_of([&] { b.imm(instr_arg::value_max + 1); }).find("does not fit in 56 bits") != std::string::npos);
  CHECK(b.next_pc() == 0);  // nothing was kept
  b.emit_call("vm.builtin.copy", {b.imm(instr_arg::value_max)}, 1);
  b.emit_ret(1);
  b.end_function();
  b.begin_function("two", {"a", "b"}, 2);
  b.emit_ret(1);
  b.end_function();
  CHECK(b.get().num_instructions() == 3);
}

TEST_CASE("end_function checks control flow and drops a function that breaks it") {
  exec_builder b;
  b.begin_function("runs_off", {}, 1);
  b.emit_call("vm.builtin.null_value", {}, 0);
  CHECK(message_of([&] { b.end_function(); }) ==
        "kiln::vm::exec_builder: function 'runs_off', instruction 0 (call): the next instruction leads to instruction 1, "
        "outside the function's 1 instructions (the function is dropped)");
  b.begin_function("jumps_out", {}, 1);
  b.emit_goto(5);
  CHECK(message_of([&] { b.end_function(); }).find("the jump leads to instruction 5") != std::string::npos);
  b.begin_function("unbound", {}, 1);
  auto l = b.new_label();
  b.emit_goto(l);
  CHECK(message_of([&] { b.end_function(); }).find("label 0 is used but never bound") != std::string::npos);
  b.begin_function("empty", {}, 1);
  CHECK(message_of([&] { b.end_function(); }).find("has no instructions") != std::string::npos);
  b.begin_function("self_loop", {}, 1);
  CHECK(message_of([&] { b.emit_goto(0); }).find("a jump by 0 loops forever") != std::string::npos);
  b.emit_ret(0);
  b.end_function();
  // The dropped functions left nothing behind.
  const executable e = b.get();
  REQUIRE(e.functions.size() == 1);
  CHECK(e.functions[0].name == "self_loop");
  CHECK(e.num_instructions() == 1);
}

TEST_CASE("the builder refuses calls in the wrong state and undefined declarations") {
  exec_builder b;
  CHECK(message_of([&] { b.emit_ret(0); }) == "kiln::vm::exec_builder: emit ret: no function is open (call begin_function)");
  CHECK(message_of([&] { b.end_function(); }) == "kiln::vm::exec_builder: end_function: no function is open");
  b.declare_function("later", function_kind::bytecode, 0);
  CHECK(message_of([&] { b.get(); }) == "kiln::vm::exec_builder: get: bytecode function 'later' is declared but never defined");
  b.begin_function("f", {}, 1);
  CHECK(message_of([&] { b.begin_function("g", {}, 1); }) == "kiln::vm::exec_builder: begin_function('g'): function 'f' is still open");
  CHECK(message_of([&] { b.get(); }) == "kiln::vm::exec_builder: get: function 'f' is still open");
  CHECK(message_of([&] { b.declare_function("vm.builtin.copy", function_kind::native); b.declare_function("vm.builtin.copy", function_kind::bytecode, 1); }) ==
        "kiln::vm::exec_builder: 'vm.builtin.copy' is already declared as a native function");
  CHECK(message_of([] { exec_builder x; x.begin_function("big", {}, max_register_file_size + 1); }).find("at most 1048576") !=
        std::string::npos);
}
