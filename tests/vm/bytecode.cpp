// SPDX-License-Identifier: Apache-2.0
#include <kiln/vm/bytecode.hpp>

#include <doctest/doctest.h>

using namespace kiln::vm;

TEST_CASE("argument words round-trip every kind at the edges of the 56-bit range") {
  for (auto kind : {arg_kind::reg, arg_kind::immediate, arg_kind::const_idx, arg_kind::func_idx})
    for (std::int64_t v : {std::int64_t(0), std::int64_t(1), std::int64_t(-1), instr_arg::value_min, instr_arg::value_max,
                           instr_arg::value_min + 1, instr_arg::value_max - 1, std::int64_t(1) << 54, -(std::int64_t(1) << 54),
                           void_register, vm_register}) {
      const instr_arg a(kind, v);
      CHECK(a.kind() == kind);
      CHECK(a.value() == v);
      CHECK(instr_arg::from_word(a.word()) == a);
      CHECK(a.valid_kind());
    }
}

TEST_CASE("the kind sits in bits 63..56 and the value is sign-extended from bit 55") {
  CHECK(instr_arg::imm(-1).word() == exec_word(0x01FFFFFFFFFFFFFFULL));
  CHECK(instr_arg::func_idx(5).word() == exec_word(0x0300000000000005ULL));
  CHECK(instr_arg::reg(vm_register).word() == exec_word((std::uint64_t(1) << 54) + 1));
  CHECK(instr_arg::from_word(exec_word(0x0080000000000000ULL)).value() == instr_arg::value_min);
  CHECK_FALSE(instr_arg::from_word(exec_word(0x0400000000000000ULL)).valid_kind());
  CHECK(instr_arg::fits(instr_arg::value_max));
  CHECK_FALSE(instr_arg::fits(instr_arg::value_max + 1));
  CHECK_FALSE(instr_arg::fits(instr_arg::value_min - 1));
}

TEST_CASE("the opcode table gives numbers, names and field counts") {
  CHECK(exec_word(opcode::call) == 1);
  CHECK(exec_word(opcode::if_) == 4);
  CHECK(name(opcode::goto_) == "goto");
  CHECK(fixed_fields(opcode::call) == 3);
  CHECK(fixed_fields(opcode::if_) == 2);
  CHECK(to_opcode(2) == opcode::ret);
  CHECK_FALSE(to_opcode(0).has_value());
  CHECK_FALSE(to_opcode(5).has_value());
  CHECK(register_text(void_register) == "%void");
  CHECK(register_text(vm_register) == "%vm");
  CHECK(register_text(3) == "%3");
}
