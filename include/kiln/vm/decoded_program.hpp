// SPDX-License-Identifier: Apache-2.0
/// \file
/// The program a `virtual_machine` runs: its bytecode decoded once, at load, into ops that hold
/// addresses instead of indices (`kiln::vm::decoded`).
///
/// An executable's instructions name functions, registers and constants by index and must be
/// looked up on every step. Decoding (vm/impl/decode.ipp) turns each instruction into an `op`:
///
///     a Call to a native       the native's entry point and state, and whether it reads its
///                              arguments from the op itself (`call_native_direct`)
///     a Call to bytecode       the callee's first op and frame size
///     a Call to compiled code  the function table index (the entry is in the `callee`)
///     Goto / If                the target op
///     every operand            a register's byte offset or a literal's address (`call_operand`)
///
/// so that the run loop (vm/impl/run_loop.ipp) does no decoding, no lookups and no allocation.
/// A `frame` is one bytecode or compiled function's activation; the registers it points to come
/// from a `register_stack` (vm/register_stack.hpp).
///
/// These types are the machine's internals: users meet them only when reading the VM.
#pragma once

#include <kiln/vm/executable.hpp>
#include <kiln/vm/native.hpp>
#include <kiln/vm/value.hpp>

#include <cstdint>

namespace kiln::vm::decoded {

/// The run loop's instructions. Calls come first (`virtual_machine::trace` relies on it). A native
/// with a direct entry reads its arguments from the op's operands itself; others get an array of
/// argument pointers, and a call with more than `inline_args` arguments has its own op so that
/// the common one keeps no spill buffer.
#define KILN_VM_INTERNAL_OPS(X) \
  X(call_native_direct) X(call_native) X(call_native_long) X(call_bytecode) X(call_compiled) X(ret) X(goto_) X(if_)
enum op_code : std::uint8_t {
#define KILN_VM_OP_ENUM(id) op_##id,
  KILN_VM_INTERNAL_OPS(KILN_VM_OP_ENUM)
#undef KILN_VM_OP_ENUM
};

/// Arguments of a native call gathered on the run loop's stack; more take `call_native_long`.
inline constexpr std::uint32_t inline_args = 16;

/// The register at byte offset `offset` of a frame.
inline value& slot(value* regs, std::uint32_t offset) noexcept {
  return *reinterpret_cast<value*>(reinterpret_cast<char*>(regs) + offset);
}
/// The byte offset of register `reg` in a frame.
constexpr std::uint32_t offset_of(std::int64_t reg) noexcept { return std::uint32_t(reg * std::int64_t(sizeof(value))); }

struct op;
struct native_target {
  union {
    native_function::fn_type fn;             ///< call_native, call_native_long
    native_function::direct_fn_type direct;  ///< call_native_direct
  };
  const void* state;
};
struct code_target {
  const op* entry;          ///< call_bytecode: the callee's first op; goto: target; if: false target
  std::uint32_t registers;  ///< call_bytecode: the callee's frame size (its registers and the sink)
};
/// One decoded instruction.
struct op {
  void* handler = nullptr;  ///< computed-goto mode: the plain run loop's handler (direct threading)
  op_code code;
  std::uint32_t nargs = 0;  ///< call: number of operands
  std::uint32_t a = 0;      ///< call: function index; ret: result register; if: condition register
  std::uint32_t dst = 0;    ///< call: destination register (a void destination is the frame's sink)
  // Registers in ops (a of ret and if, dst) are byte offsets into the frame: see `slot`.
  const call_operand* args = nullptr;
  union {
    native_target native;  ///< native calls
    code_target code;      ///< call_bytecode, goto, if
  } to{};
};

/// One entry of the function table, resolved at load.
struct callee {
  function_kind kind;
  std::uint32_t index = 0;  ///< in the function table
  native_function native;
  compiled_function compiled;
  const op* entry = nullptr;
  std::uint32_t registers = 0;  ///< frame size: the register file and one sink register
  const function_info* info = nullptr;
};

/// A bytecode or compiled function's activation. Frames live in one array allocated at load
/// (`max_call_depth` entries, committed by the OS only as deep as calls go), so they never move.
struct frame {
  value* regs;
  const op* return_ip;      ///< where the caller resumes (frames pushed by the run loop)
  value* return_dst;        ///< the caller's register receiving the result
  std::uint32_t registers;  ///< frame size, sink included
  std::uint32_t callee;     ///< function table index
  bool instrumented;        ///< entered through an instrumented call: report its return
};

}  // namespace kiln::vm::decoded
