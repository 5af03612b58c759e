// SPDX-License-Identifier: Apache-2.0
/// \file
/// The VM's instruction set: four opcodes and the encoding of their arguments.
///
/// An argument word (`instr_arg`) is 64 bits:
///
///     63        56 55                                                   0
///     +----------+-----------------------------------------------------+
///     |   kind   |  value (56 bits, two's complement, sign-extended)   |
///     +----------+-----------------------------------------------------+
///     kind: 0 register, 1 immediate, 2 constant-pool index, 3 function-table index
///
/// Registers `void_register` (2^54: "no destination") and `vm_register` (2^54 + 1: the VM
/// itself, passed to closures and built-ins) are special.
///
/// Instructions are stored flat, one `exec_word` (int64) per field, with an offset table:
///
///     Call  dst func_idx num_args args[num_args]   call function func_idx; result into dst
///     Ret   result                                 return register result to the caller
///     Goto  pc_offset                              pc += pc_offset
///     If    cond false_offset                      pc += (cond register != 0) ? 1 : false_offset
///
/// `dst`, `result` and `cond` are plain register numbers; `args` are argument words; offsets are
/// counted in instructions, relative to the instruction itself.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kiln::vm {

using exec_word = std::int64_t;
using reg_name = std::int64_t;

inline constexpr reg_name special_register_begin = std::int64_t(1) << 54;
inline constexpr reg_name void_register = special_register_begin + 0;
inline constexpr reg_name vm_register = special_register_begin + 1;

/// The opcode table, the one source of opcode numbers, names and fixed field counts:
/// X(name, number, text, fields before the variable arguments).
#define KILN_VM_OPCODES(X) \
  X(call, 1, "call", 3)    \
  X(ret, 2, "ret", 1)      \
  X(goto_, 3, "goto", 1)   \
  X(if_, 4, "if", 2)

enum class opcode : std::int64_t {
#define KILN_VM_OPCODE_ENUM(id, num, text, fields) id = num,
  KILN_VM_OPCODES(KILN_VM_OPCODE_ENUM)
#undef KILN_VM_OPCODE_ENUM
};

constexpr std::string_view name(opcode op) noexcept {
  switch (op) {
#define KILN_VM_OPCODE_NAME(id, num, text, fields) \
  case opcode::id: return text;
    KILN_VM_OPCODES(KILN_VM_OPCODE_NAME)
#undef KILN_VM_OPCODE_NAME
  }
  return "?";
}

/// Number of fields after the opcode word, not counting Call's arguments.
constexpr int fixed_fields(opcode op) noexcept {
  switch (op) {
#define KILN_VM_OPCODE_FIELDS(id, num, text, fields) \
  case opcode::id: return fields;
    KILN_VM_OPCODES(KILN_VM_OPCODE_FIELDS)
#undef KILN_VM_OPCODE_FIELDS
  }
  return -1;
}

constexpr std::optional<opcode> to_opcode(exec_word w) noexcept {
#define KILN_VM_OPCODE_CHECK(id, num, text, fields) \
  if (w == num) return opcode::id;
  KILN_VM_OPCODES(KILN_VM_OPCODE_CHECK)
#undef KILN_VM_OPCODE_CHECK
  return std::nullopt;
}

enum class arg_kind : std::uint8_t { reg = 0, immediate = 1, const_idx = 2, func_idx = 3 };

constexpr std::string_view name(arg_kind k) noexcept {
  switch (k) {
    case arg_kind::reg: return "register";
    case arg_kind::immediate: return "immediate";
    case arg_kind::const_idx: return "constant index";
    case arg_kind::func_idx: return "function index";
  }
  return "?";
}

/// One encoded argument word.
class instr_arg {
public:
  static constexpr std::int64_t value_min = -(std::int64_t(1) << 55);
  static constexpr std::int64_t value_max = (std::int64_t(1) << 55) - 1;

  /// The void register (`%void`, "no value"), as TVM's default Instruction::Arg is.
  constexpr instr_arg() = default;
  /// Encodes `kind` and `v`; `v` must lie in [value_min, value_max] (check with `fits`).
  constexpr instr_arg(arg_kind kind, std::int64_t v) noexcept
      : word_(exec_word((std::uint64_t(kind) << 56) | (std::uint64_t(v) & value_mask))) {}
  static constexpr instr_arg from_word(exec_word w) noexcept {
    instr_arg a;
    a.word_ = w;
    return a;
  }
  static constexpr bool fits(std::int64_t v) noexcept { return v >= value_min && v <= value_max; }

  static constexpr instr_arg reg(reg_name r) noexcept { return {arg_kind::reg, r}; }
  static constexpr instr_arg imm(std::int64_t v) noexcept { return {arg_kind::immediate, v}; }
  static constexpr instr_arg const_idx(std::int64_t i) noexcept { return {arg_kind::const_idx, i}; }
  static constexpr instr_arg func_idx(std::int64_t i) noexcept { return {arg_kind::func_idx, i}; }

  /// The kind byte as stored; may be out of range in a corrupt word (see `valid_kind`).
  constexpr std::uint8_t kind_bits() const noexcept { return std::uint8_t(std::uint64_t(word_) >> 56); }
  constexpr bool valid_kind() const noexcept { return kind_bits() <= 3; }
  constexpr arg_kind kind() const noexcept { return arg_kind(kind_bits()); }
  /// The 56-bit value, sign-extended.
  constexpr std::int64_t value() const noexcept { return std::int64_t(std::uint64_t(word_) << 8) >> 8; }
  constexpr exec_word word() const noexcept { return word_; }

  friend constexpr bool operator==(instr_arg, instr_arg) = default;

private:
  static constexpr std::uint64_t value_mask = (std::uint64_t(1) << 56) - 1;
  exec_word word_ = exec_word((std::uint64_t(arg_kind::reg) << 56) | (std::uint64_t(void_register) & value_mask));
};

/// A decoded view of one instruction inside an executable's `instr_data`.
struct instruction {
  opcode op = opcode::ret;
  reg_name dst = 0;              ///< Call
  std::int64_t func_idx = 0;     ///< Call
  std::span<const exec_word> args;  ///< Call: the argument words
  reg_name result = 0;           ///< Ret
  std::int64_t pc_offset = 0;    ///< Goto
  reg_name cond = 0;             ///< If
  std::int64_t false_offset = 0; ///< If

  instr_arg arg(std::size_t i) const noexcept { return instr_arg::from_word(args[i]); }
};

/// "%3", "%void", "%vm".
inline std::string register_text(reg_name r) {
  if (r == void_register) return "%void";
  if (r == vm_register) return "%vm";
  std::string s = "%";  // appends: GCC 12 -O3 warns falsely (-Wrestrict) on "x" + string
  return s.append(std::to_string(r));
}

}  // namespace kiln::vm
