// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::vm::executable`: everything a VM needs to run a program — the function table, the
/// constant pool and the bytecode (the design's `VMExecutable`).
///
/// An executable is plain data; `exec_builder` makes valid ones and `deserialize` checks the ones
/// it reads with `validate`, the one checker of the bytecode's rules:
/// - every function has a unique name; bytecode functions own disjoint, non-empty instruction
///   ranges; their register files hold at most `max_register_file_size` registers and at least
///   their arguments;
/// - every instruction decodes (known opcode, fields inside `instr_data`, offsets consistent);
/// - registers lie in the enclosing function's register file (`%vm` only as a Call argument,
///   `%void` only as a Call destination); constant and function indices lie in their tables;
///   a call to a bytecode or compiled function passes exactly its number of arguments;
/// - control stays inside the function: jump targets, and the instruction after a Call or a
///   non-taken If, lie inside its range. So the interpreter needs no bounds checks.
///
/// Threads: an executable is not changed by running it. Once built or loaded, any number of
/// virtual machines on any number of threads may share one (`std::shared_ptr<const executable>`,
/// as `virtual_machine` takes it); only building or editing it must not overlap with its use.
#pragma once

#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/vm/bytecode.hpp>
#include <kiln/vm/native.hpp>
#include <kiln/vm/signature.hpp>
#include <kiln/vm/value.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::vm {

/// The design's three function kinds (`VMFuncInfo::FuncKind`).
enum class function_kind : std::uint8_t {
  native = 0,    ///< kPackedFunc: a C++ function found by name in a `function_registry`
  bytecode = 1,  ///< kVMFunc: interpreted by the VM's run loop
  compiled = 2,  ///< kVMTIRFunc: generated code registered as "__vmtir__<name>", given the register file
};

constexpr std::string_view name(function_kind k) noexcept {
  switch (k) {
    case function_kind::native: return "native";
    case function_kind::bytecode: return "bytecode";
    case function_kind::compiled: return "compiled";
  }
  return "?";
}

/// Limits `validate` enforces, so that no executable can make the VM allocate absurd amounts.
inline constexpr std::int64_t max_register_file_size = std::int64_t(1) << 20;

struct function_info {
  function_kind kind = function_kind::bytecode;
  std::string name;
  std::int64_t start_instr = 0;  ///< first instruction (bytecode functions)
  std::int64_t end_instr = 0;    ///< one past the last instruction
  std::int64_t num_args = 0;     ///< -1 for native functions taking any number
  std::int64_t register_file_size = 0;
  std::vector<std::string> param_names;
  std::vector<type_signature> param_types;  ///< one per argument, or none (hand-assembled code)
  type_signature ret_type;                  ///< `R.Object` when unknown

  /// `(x: R.Tensor((n, 784), "float32"), ...) -> R.Tensor((n, 10), "float32")`, with whatever
  /// names and types the function carries.
  std::string signature_text() const;

  friend bool operator==(const function_info&, const function_info&) = default;
};

class executable {
public:
  std::vector<function_info> functions;  ///< the function table (func_table)
  std::vector<value> constants;          ///< the constant pool
  std::vector<std::pair<std::int64_t, std::string>> memory_scopes;  ///< constant index -> memory scope
  std::vector<std::int64_t> instr_offset;  ///< where each instruction starts in instr_data
  std::vector<exec_word> instr_data;       ///< the instruction words

  /// The generated code of compiled functions, when the executable carries it (`load_module`, a
  /// header from `kiln-compile --emit-cpp`); the VM looks compiled functions up here first, then
  /// in its registry. Not serialized.
  std::shared_ptr<const native_code> code;
  /// For an executable compiled with `exec_mode::compiled`: the C++ source of its compiled
  /// functions (`codegen::cpp_codegen`), what `export_library` builds. Not serialized.
  std::string generated_source;

  std::size_t num_instructions() const noexcept { return instr_offset.size(); }

  /// The index of the function called `name`, if any.
  std::optional<std::size_t> find_function(std::string_view name) const noexcept {
    for (std::size_t i = 0; i < functions.size(); ++i)
      if (functions[i].name == name) return i;
    return std::nullopt;
  }

  /// Instruction `i` decoded (the executable must be valid).
  instruction at(std::size_t i) const noexcept {
    const exec_word* w = instr_data.data() + instr_offset[i];
    instruction in;
    in.op = opcode(w[0]);
    switch (in.op) {
      case opcode::call:
        in.dst = w[1];
        in.func_idx = w[2];
        in.args = std::span<const exec_word>(w + 4, std::size_t(w[3]));
        break;
      case opcode::ret: in.result = w[1]; break;
      case opcode::goto_: in.pc_offset = w[1]; break;
      case opcode::if_:
        in.cond = w[1];
        in.false_offset = w[2];
        break;
    }
    return in;
  }

  std::string as_text() const;
  std::string as_python() const;
  std::string stats() const;
};

// ---- validation ---------------------------------------------------------------------------------

namespace detail {

inline std::string instr_where(const function_info& f, std::int64_t pc, opcode op) {
  return "function '" + kiln::detail::printable(f.name) + "', instruction " + std::to_string(pc - f.start_instr) + " (" +
         std::string(name(op)) + ")";
}

/// Problems of instruction `pc` of `f` — registers, indices, argument counts and, when
/// `check_targets`, where control goes next. Empty when there are none.
inline std::optional<std::string> check_instruction(const executable& e, const function_info& f, std::int64_t pc,
                                                    bool check_targets = true) {
  const instruction in = e.at(std::size_t(pc));
  const std::string where = instr_where(f, pc, in.op);
  const std::int64_t rf = f.register_file_size;
  auto bad_reg = [&](std::string_view role, reg_name r) -> std::optional<std::string> {
    return where + ": " + std::string(role) + " " + register_text(r) + " is outside the register file of " +
           std::to_string(rf) + " registers";
  };
  auto target = [&](std::string_view role, std::int64_t to) -> std::optional<std::string> {
    if (!check_targets || (to >= f.start_instr && to < f.end_instr)) return std::nullopt;
    return where + ": " + std::string(role) + " leads to instruction " + std::to_string(to - f.start_instr) +
           ", outside the function's " + std::to_string(f.end_instr - f.start_instr) + " instructions";
  };
  switch (in.op) {
    case opcode::call: {
      if (in.dst != void_register && (in.dst < 0 || in.dst >= rf)) return bad_reg("destination", in.dst);
      if (in.func_idx < 0 || std::size_t(in.func_idx) >= e.functions.size())
        return where + ": function index " + std::to_string(in.func_idx) + " is outside the function table of " +
               std::to_string(e.functions.size());
      const function_info& callee = e.functions[std::size_t(in.func_idx)];
      if (callee.kind != function_kind::native && std::int64_t(in.args.size()) != callee.num_args)
        return where + ": calls '" + kiln::detail::printable(callee.name) + "' with " + std::to_string(in.args.size()) + " arguments, it takes " +
               std::to_string(callee.num_args);
      for (std::size_t i = 0; i < in.args.size(); ++i) {
        const instr_arg a = in.arg(i);
        const std::string arg = "argument " + std::to_string(i);
        if (!a.valid_kind()) return where + ": " + arg + " has unknown kind " + std::to_string(a.kind_bits());
        const std::int64_t v = a.value();
        switch (a.kind()) {
          case arg_kind::reg:
            if (v != vm_register && (v < 0 || v >= rf)) return bad_reg(arg + " register", v);
            break;
          case arg_kind::immediate: break;
          case arg_kind::const_idx:
            if (v < 0 || std::size_t(v) >= e.constants.size())
              return where + ": " + arg + " refers to constant " + std::to_string(v) + ", the pool has " +
                     std::to_string(e.constants.size());
            break;
          case arg_kind::func_idx:
            if (v < 0 || std::size_t(v) >= e.functions.size())
              return where + ": " + arg + " refers to function " + std::to_string(v) + ", the table has " +
                     std::to_string(e.functions.size());
            break;
        }
      }
      return target("the next instruction", pc + 1);
    }
    case opcode::ret:
      if (in.result < 0 || in.result >= rf) return bad_reg("result", in.result);
      return std::nullopt;
    case opcode::goto_:
      if (in.pc_offset == 0) return where + ": a jump by 0 loops forever";
      return target("the jump", pc + in.pc_offset);
    case opcode::if_:
      if (in.cond < 0 || in.cond >= rf) return bad_reg("condition", in.cond);
      if (auto t = target("the false branch", pc + in.false_offset)) return t;
      return target("the true branch (the next instruction)", pc + 1);
  }
  return std::nullopt;
}

/// Problems of the function table entry `f` alone (with its instruction range when `check_range`).
inline std::optional<std::string> check_function(const executable& e, const function_info& f, bool check_range = true) {
  const std::string where = "function '" + kiln::detail::printable(f.name) + "'";
  if (f.name.empty()) return std::string("a function has an empty name");
  switch (f.kind) {
    case function_kind::native:
      if (f.num_args < -1) return where + ": " + std::to_string(f.num_args) + " arguments";
      return std::nullopt;
    case function_kind::bytecode:
      if (check_range && (f.start_instr < 0 || f.start_instr >= f.end_instr || f.end_instr > std::int64_t(e.num_instructions())))
        return where + ": instruction range [" + std::to_string(f.start_instr) + ", " + std::to_string(f.end_instr) +
               ") is empty or outside the " + std::to_string(e.num_instructions()) + " instructions";
      [[fallthrough]];
    case function_kind::compiled:
      if (f.num_args < 0 || f.register_file_size < f.num_args || f.register_file_size > max_register_file_size)
        return where + ": " + std::to_string(f.num_args) + " arguments in a register file of " +
               std::to_string(f.register_file_size) + " (at most " + std::to_string(max_register_file_size) + ")";
      if (!f.param_names.empty() && std::int64_t(f.param_names.size()) != f.num_args)
        return where + ": " + std::to_string(f.param_names.size()) + " parameter names for " +
               std::to_string(f.num_args) + " arguments";
      if (!f.param_types.empty() && std::int64_t(f.param_types.size()) != f.num_args)
        return where + ": " + std::to_string(f.param_types.size()) + " parameter types for " +
               std::to_string(f.num_args) + " arguments";
      for (std::size_t i = 0; i < f.param_types.size(); ++i)
        if (auto msg = check_signature(f.param_types[i])) return where + ", parameter " + std::to_string(i) + ": " + *msg;
      if (auto msg = check_signature(f.ret_type)) return where + ", result: " + *msg;
      return std::nullopt;
  }
  return where + ": unknown function kind " + std::to_string(int(f.kind));
}

}  // namespace detail

namespace detail {
/// Where the parts of an executable were in the bytes it was read from (`deserialize`), so that
/// `validate` can say where a problem is: the byte offset of each function table entry and
/// memory scope, of the instruction offset table and of the first bytecode word.
struct byte_layout {
  std::vector<std::size_t> functions, memory_scopes;
  std::size_t instr_offsets = 0, instr_data = 0;
};
}  // namespace detail

/// Checks every rule in this header's comment; throws `format_error` ("<source>: <what, where>").
/// With the `layout` of the bytes `e` was read from, each message also names the section and
/// byte offset of what it is about, as the reader's own errors do.
inline void validate(const executable& e, std::string_view source = "executable", const detail::byte_layout* layout = nullptr) {
  auto fail = [&](const std::string& msg, const char* section = nullptr, std::size_t offset = 0) {
    std::string text = "kiln::vm: " + std::string(source) + ": " + msg;
    if (layout && section) text += " (section '" + std::string(section) + "', byte " + std::to_string(offset) + ")";
    throw format_error(text);
  };
  auto word_at = [&](std::int64_t w) { return layout ? layout->instr_data + 8 * std::size_t(w) : 0; };
  auto function_at = [&](const function_info& f) { return layout ? layout->functions[std::size_t(&f - e.functions.data())] : 0; };
  // The instruction stream decodes, and the offsets match.
  const auto n = e.instr_offset.size();
  std::int64_t expect = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string where = "instruction " + std::to_string(i);
    if (e.instr_offset[i] != expect)
      fail(where + " starts at word " + std::to_string(e.instr_offset[i]) + ", expected " + std::to_string(expect), "bytecode",
           layout ? layout->instr_offsets + 8 * i : 0);
    const std::size_t left = e.instr_data.size() - std::size_t(expect);
    if (left == 0) fail(where + " starts past the end of the bytecode", "bytecode", word_at(expect));
    const auto op = to_opcode(e.instr_data[std::size_t(expect)]);
    if (!op) fail(where + " has unknown opcode " + std::to_string(e.instr_data[std::size_t(expect)]), "bytecode", word_at(expect));
    std::size_t len = 1 + std::size_t(fixed_fields(*op));
    if (len > left) fail(where + " (" + std::string(name(*op)) + ") is cut off by the end of the bytecode", "bytecode", word_at(expect));
    if (*op == opcode::call) {
      const exec_word nargs = e.instr_data[std::size_t(expect) + 3];
      if (nargs < 0 || std::size_t(nargs) > left - len)
        fail(where + " (call) has " + std::to_string(nargs) + " arguments but " + std::to_string(left - len) +
                 " words remain",
             "bytecode", word_at(expect + 3));
      len += std::size_t(nargs);
    }
    expect += std::int64_t(len);
  }
  if (std::size_t(expect) != e.instr_data.size())
    fail(std::to_string(e.instr_data.size() - std::size_t(expect)) + " bytecode words follow the last instruction", "bytecode", word_at(expect));

  // The function table.
  std::vector<std::pair<std::int64_t, const function_info*>> ranges;
  for (std::size_t i = 0; i < e.functions.size(); ++i) {
    const auto& f = e.functions[i];
    if (auto msg = detail::check_function(e, f)) fail(*msg, "globals", function_at(f));
    for (std::size_t j = 0; j < i; ++j)
      if (e.functions[j].name == f.name)
        fail("function '" + kiln::detail::printable(f.name) + "' appears twice in the function table", "globals", function_at(f));
    if (f.kind == function_kind::bytecode) ranges.emplace_back(f.start_instr, &f);
  }
  std::sort(ranges.begin(), ranges.end());
  std::int64_t covered = 0;
  for (auto& [start, f] : ranges) {
    if (start != covered)
      fail(start < covered ? "functions '" + kiln::detail::printable(f->name) + "' and another share instructions"
                           : "instructions " + std::to_string(covered) + " to " + std::to_string(start - 1) + " belong to no function",
           "globals", function_at(*f));
    covered = f->end_instr;
  }
  if (covered != std::int64_t(n))
    fail("instructions from " + std::to_string(covered) + " on belong to no function", "bytecode",
         layout ? layout->instr_offsets + 8 * std::size_t(covered) : 0);

  // Every instruction, in its function.
  for (auto& [start, f] : ranges)
    for (std::int64_t pc = f->start_instr; pc < f->end_instr; ++pc)
      if (auto msg = detail::check_instruction(e, *f, pc)) fail(*msg, "bytecode", word_at(e.instr_offset[std::size_t(pc)]));

  for (std::size_t k = 0; k < e.memory_scopes.size(); ++k) {
    const auto& [index, scope] = e.memory_scopes[k];
    if (index < 0 || std::size_t(index) >= e.constants.size())
      fail("memory scope '" + kiln::detail::printable(scope) + "' names constant " + std::to_string(index) + ", the pool has " +
               std::to_string(e.constants.size()),
           "memory scopes", layout ? layout->memory_scopes[k] : 0);
  }
}

// ---- renderings ---------------------------------------------------------------------------------

namespace detail {

inline std::string arg_text(const executable& e, instr_arg a) {
  switch (a.kind()) {
    case arg_kind::reg: return register_text(a.value());
    case arg_kind::immediate: return "i" + std::to_string(a.value());
    case arg_kind::const_idx: return "c[" + std::to_string(a.value()) + "]";
    case arg_kind::func_idx: return "f[" + e.functions[std::size_t(a.value())].name + "]";
  }
  return "?";
}

inline std::string arg_python(const executable& e, instr_arg a) {
  switch (a.kind()) {
    case arg_kind::reg: return a.value() == vm_register ? "ib.r(vm)" : "ib.r(" + std::to_string(a.value()) + ")";
    case arg_kind::immediate: return "ib.imm(" + std::to_string(a.value()) + ")";
    case arg_kind::const_idx: return "ib.c(" + std::to_string(a.value()) + ")";
    case arg_kind::func_idx: return "ib.f(\"" + e.functions[std::size_t(a.value())].name + "\")";
  }
  return "?";
}

inline std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace detail

inline std::string function_info::signature_text() const {
  std::string s = "(";
  for (std::size_t i = 0; i < std::size_t(std::max<std::int64_t>(num_args, 0)); ++i) {
    s.append(i ? ", " : "").append(i < param_names.size() ? param_names[i] : register_text(reg_name(i)));
    if (i < param_types.size()) s.append(": ").append(param_types[i].text());
  }
  s.append(")");
  if (!param_types.empty() || ret_type.kind != signature_kind::object) s.append(" -> ").append(ret_type.text());
  return s;
}

/// One block per bytecode function, one line per instruction:
///
///     @main(x: R.Tensor((n,), "float32"), n: R.Prim("int64")) -> R.Tensor((n,), "float32"):  # 2 args, 6 registers
///       0  call  vm.builtin.copy  in: %0, i3  dst: %2
///       1  if    %2, +3  (to 4)
inline std::string executable::as_text() const {
  std::string s;
  for (const auto& f : functions) {
    if (f.kind != function_kind::bytecode) continue;
    s.append("@").append(f.name).append(f.signature_text());
    s.append(":  # ").append(std::to_string(f.num_args)).append(" args, ");
    s.append(std::to_string(f.register_file_size)).append(" registers\n");
    for (std::int64_t pc = f.start_instr; pc < f.end_instr; ++pc) {
      const instruction in = at(std::size_t(pc));
      std::string line = "  ";  // appends: GCC 12 -O3 warns falsely (-Wrestrict) on "x" + string
      line.append(detail::pad(std::to_string(pc - f.start_instr), 4)).append(detail::pad(std::string(name(in.op)), 6));
      switch (in.op) {
        case opcode::call: {
          line.append(detail::pad(functions[std::size_t(in.func_idx)].name, 24)).append(" in: ");
          for (std::size_t i = 0; i < in.args.size(); ++i) line.append(i ? ", " : "").append(detail::arg_text(*this, in.arg(i)));
          line.append("  dst: ").append(register_text(in.dst));
          break;
        }
        case opcode::ret: line.append(register_text(in.result)); break;
        case opcode::goto_:
          line.append(in.pc_offset > 0 ? "+" : "").append(std::to_string(in.pc_offset));
          line.append("  (to ").append(std::to_string(pc + in.pc_offset - f.start_instr)).append(")");
          break;
        case opcode::if_:
          line.append(register_text(in.cond)).append(", ").append(in.false_offset > 0 ? "+" : "");
          line.append(std::to_string(in.false_offset)).append("  (else to ");
          line.append(std::to_string(pc + in.false_offset - f.start_instr)).append(")");
          break;
      }
      s.append(line).append("\n");
    }
    s.append("\n");
  }
  return s;
}

/// The program as calls on the design's Python instruction builder (`rx.Builder`).
inline std::string executable::as_python() const {
  std::string s = "ib = rx.Builder()\n";
  for (const auto& f : functions) {
    if (f.kind != function_kind::bytecode) continue;
    s.append("with ib.function(\"").append(f.name).append("\", num_inputs=").append(std::to_string(f.num_args));
    if (!f.param_names.empty()) {
      s.append(", params=[");
      for (std::size_t i = 0; i < f.param_names.size(); ++i) s.append(i ? ", " : "").append("\"" + f.param_names[i] + "\"");
      s.append("]");
    }
    s.append("):\n");
    for (std::int64_t pc = f.start_instr; pc < f.end_instr; ++pc) {
      const instruction in = at(std::size_t(pc));
      switch (in.op) {
        case opcode::call:
          s.append("    ib.emit_call(\"").append(functions[std::size_t(in.func_idx)].name).append("\", args=[");
          for (std::size_t i = 0; i < in.args.size(); ++i) s.append(i ? ", " : "").append(detail::arg_python(*this, in.arg(i)));
          s.append("]");
          if (in.dst != void_register) s.append(", dst=ib.r(").append(std::to_string(in.dst)).append(")");
          s.append(")\n");
          break;
        case opcode::ret: s.append("    ib.emit_ret(ib.r(").append(std::to_string(in.result)).append("))\n"); break;
        case opcode::goto_: s.append("    ib.emit_goto(").append(std::to_string(in.pc_offset)).append(")\n"); break;
        case opcode::if_:
          s.append("    ib.emit_if(ib.r(").append(std::to_string(in.cond)).append("), ");
          s.append(std::to_string(in.false_offset)).append(")\n");
          break;
      }
    }
  }
  return s;
}

/// A summary: the constant pool, the function table and instruction counts by opcode.
inline std::string executable::stats() const {
  std::string s = "kiln VM executable statistics:\n  Constant pool (# " + std::to_string(constants.size()) + "): [";
  for (std::size_t i = 0; i < constants.size(); ++i) s.append(i ? ", " : "").append(to_string(constants[i]));
  s.append("]\n  Globals (#").append(std::to_string(functions.size())).append("): [");
  for (std::size_t i = 0; i < functions.size(); ++i) s.append(i ? ", " : "").append(functions[i].name);
  s.append("]\n");
  std::array<std::size_t, 5> count{};
  for (std::size_t i = 0; i < num_instructions(); ++i) ++count[std::size_t(at(i).op)];
  s.append("  Instructions (#").append(std::to_string(num_instructions())).append("):");
#define KILN_VM_OPCODE_COUNT(id, num, text, fields) s.append(" " text " ").append(std::to_string(count[num]));
  KILN_VM_OPCODES(KILN_VM_OPCODE_COUNT)
#undef KILN_VM_OPCODE_COUNT
  s.append("\n  Bytecode: ").append(std::to_string(instr_data.size())).append(" words (");
  s.append(std::to_string(instr_data.size() * sizeof(exec_word))).append(" bytes)\n");
  return s;
}

}  // namespace kiln::vm
