// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/vm/virtual_machine.hpp>'s loading: devices, the frame array, the
// function pool (natives and compiled functions resolved in the registry), and the decoding of
// the bytecode into the ops of <kiln/vm/decoded_program.hpp>. Included by that header.
#pragma once

#include <kiln/vm/virtual_machine.hpp>

namespace kiln::vm {

inline void virtual_machine::init_devices() {
  if (options_.num_devices < 1) throw usage_error("kiln::vm::vm_options: num_devices must be at least 1 (device 0 is the CPU)");
  for (std::int64_t d = 0; d < options_.num_devices; ++d)
    allocators_.push_back(runtime::make_allocator(options_.allocator, runtime::cpu(std::int32_t(d))));
}

inline void virtual_machine::init_frames() {
  if (options_.max_call_depth < 1 || options_.max_call_depth > max_frames)
    throw usage_error("kiln::vm::vm_options: max_call_depth must be between 1 and " + std::to_string(max_frames) + ", got " +
                      std::to_string(options_.max_call_depth));
  // Entry 0 is the idle sentinel; uninitialised, so untouched pages are never committed.
  frames_.reset(new frame[options_.max_call_depth + 1]);
  top_ = frames_.get();
  frames_end_ = frames_.get() + options_.max_call_depth + 1;
}

inline void virtual_machine::init_function_pool(const function_registry& registry) {
  const auto& e = *exec_;
  literals_ = e.constants;  // the constant pool comes first in the literal table
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < e.functions.size(); ++i) {
    const auto& f = e.functions[i];
    callee c;
    c.kind = f.kind;
    c.index = std::uint32_t(i);
    c.info = &f;
    c.registers = std::uint32_t(f.register_file_size) + 1;
    auto clo = runtime::make_object<closure_obj>();
    clo->name = f.name;
    if (f.kind == function_kind::native) {
      if (auto n = registry.find(f.name)) {
        c.native = *n;
        clo->native = *n;
      } else {
        missing.push_back(f.name);
      }
    } else {
      clo->func_index = std::int64_t(i);
      clo->owner = exec_.get();
      if (f.kind == function_kind::compiled) {
        if (const compiled_function* own = e.code ? e.code->find(f.name) : nullptr) c.compiled = *own;
        else if (auto n = registry.find_compiled(f.name)) c.compiled = *n;
        else missing.push_back(std::string(function_registry::compiled_prefix) + f.name);
      }
    }
    callees_.push_back(std::move(c));
    literals_.push_back(value(object_ptr<const closure_obj>(std::move(clo))));
    index_.emplace(f.name, i);
  }
  if (!missing.empty()) {
    std::string msg = "kiln::vm::virtual_machine: the executable calls functions the registry does not have: ";
    for (std::size_t i = 0; i < missing.size(); ++i)
      msg.append(i ? ", '" : "'").append(missing[i]).append("'").append(kiln::detail::did_you_mean(missing[i], registry.names()));
    if (std::any_of(missing.begin(), missing.end(),
                    [](const std::string& n) { return n.starts_with(function_registry::compiled_prefix); }))
      msg.append(
          " (compiled functions come with the executable's generated code: build it with export_library and load it with "
          "vm::load_module, include the header kiln-compile --emit-cpp writes, or register them with add_compiled)");
    throw error(msg);
  }
  literals_.push_back(value(static_cast<vm_context*>(this)));  // %vm
  num_functions_ = callees_.size();
}

/// Translates the bytecode into `ops_`. Operands are first collected as literal-table indices
/// or register numbers, and become addresses once the literal table has stopped growing.
inline void virtual_machine::decode() {
  const auto& e = *exec_;
  const std::size_t vm_literal = e.constants.size() + e.functions.size();
  struct pending {
    std::size_t index;
    bool literal;
  };
  std::vector<pending> args;
  std::vector<std::size_t> first_arg(e.num_instructions(), 0);
  std::unordered_map<std::int64_t, std::size_t> immediates;
  ops_.resize(e.num_instructions());
  for (std::size_t fi = 0; fi < e.functions.size(); ++fi) {
    const function_info& fn = e.functions[fi];
    if (fn.kind != function_kind::bytecode) continue;
    callees_[fi].entry = ops_.data() + fn.start_instr;
    const auto sink = std::uint32_t(fn.register_file_size);
    for (auto pc = std::size_t(fn.start_instr); pc < std::size_t(fn.end_instr); ++pc) {
      const instruction in = e.at(pc);
      op& o = ops_[pc];
      switch (in.op) {
        case opcode::call: {
          const callee& c = callees_[std::size_t(in.func_idx)];
          if (c.kind == function_kind::native && c.native.arity >= 0 && std::size_t(c.native.arity) != in.args.size())
            throw error("kiln::vm::virtual_machine: " + detail::instr_where(fn, std::int64_t(pc), in.op) +
                        " calls native function '" + c.info->name + "' with " + std::to_string(in.args.size()) +
                        " arguments, it takes " + std::to_string(c.native.arity));
          o.nargs = std::uint32_t(in.args.size());
          o.a = std::uint32_t(in.func_idx);
          o.dst = decoded::offset_of(in.dst == void_register ? sink : in.dst);
          switch (c.kind) {
            case function_kind::native:
              o.to.native.state = c.native.state;
              if (c.native.direct && c.native.arity >= 0) {  // the arity was checked above
                o.code = decoded::op_call_native_direct;
                o.to.native.direct = c.native.direct;
              } else {
                o.code = o.nargs > decoded::inline_args ? decoded::op_call_native_long : decoded::op_call_native;
                o.to.native.fn = c.native.fn;
              }
              break;
            case function_kind::bytecode: o.code = decoded::op_call_bytecode; break;  // entry: below
            case function_kind::compiled: o.code = decoded::op_call_compiled; break;
          }
          first_arg[pc] = args.size();
          for (std::size_t i = 0; i < in.args.size(); ++i) {
            const instr_arg a = in.arg(i);
            const std::int64_t v = a.value();
            switch (a.kind()) {
              case arg_kind::reg:
                args.push_back(v == vm_register ? pending{vm_literal, true} : pending{std::size_t(v), false});
                break;
              case arg_kind::const_idx: args.push_back({std::size_t(v), true}); break;
              case arg_kind::func_idx: args.push_back({e.constants.size() + std::size_t(v), true}); break;
              case arg_kind::immediate: {
                auto [it, fresh] = immediates.emplace(v, literals_.size());
                if (fresh) literals_.push_back(value(v));
                args.push_back({it->second, true});
                break;
              }
            }
          }
          break;
        }
        case opcode::ret:
          o.code = decoded::op_ret;
          o.a = decoded::offset_of(in.result);
          break;
        case opcode::goto_:
          o.code = decoded::op_goto_;
          o.to.code = {ops_.data() + (std::int64_t(pc) + in.pc_offset), 0};
          break;
        case opcode::if_:
          o.code = decoded::op_if_;
          o.a = decoded::offset_of(in.cond);
          o.to.code = {ops_.data() + (std::int64_t(pc) + in.false_offset), 0};
          break;
      }
    }
  }
  // The literal table is complete: never resized again, so operands can hold addresses.
  literals_.shrink_to_fit();
  operands_.reserve(args.size());
  for (const pending& p : args)
    operands_.push_back(p.literal ? reinterpret_cast<call_operand>(&literals_[p.index]) | 1
                                  : call_operand(p.index * sizeof(value)));
  for (std::size_t pc = 0; pc < ops_.size(); ++pc) {
    op& o = ops_[pc];
    if (o.code > decoded::op_call_compiled) continue;
    o.args = operands_.data() + first_arg[pc];
    if (o.code == decoded::op_call_bytecode) o.to.code = {callees_[o.a].entry, callees_[o.a].registers};
  }
}

}  // namespace kiln::vm
