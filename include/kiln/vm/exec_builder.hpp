// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::vm::exec_builder`: writes executables instruction by instruction (the design's
/// `ExecBuilder`), checking as it goes.
///
///     exec_builder b;
///     b.begin_function("main", {"n"}, 4);           // 1 argument (register 0), 4 registers
///     auto loop = b.new_label(), done = b.new_label();
///     b.emit_call("vm.builtin.copy", {b.imm(0)}, 1);   // %1 = 0
///     b.bind(loop);
///     b.emit_call("less", {b.r(1), b.r(0)}, 2);        // %2 = %1 < %0
///     b.emit_if(2, done);                              // if not %2: goto done
///     b.emit_call("add", {b.r(1), b.imm(1)}, 1);       // %1 = %1 + 1
///     b.emit_goto(loop);
///     b.bind(done);
///     b.emit_ret(1);
///     b.end_function();
///     executable e = b.get();
///
/// Each `emit_*` checks its registers against the declared register file and its constant and
/// function indices; `end_function` resolves labels and checks that every jump stays inside the
/// function and that control cannot run off its end; `get` checks that every declared bytecode
/// function was defined. A failed check throws `usage_error` and leaves the builder as it was
/// before the call (a failed `end_function` drops the whole function).
/// Calling an unknown name declares it a native function, as the design's builder does.
#pragma once

#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/vm/executable.hpp>

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::vm {

class exec_builder {
public:
  /// A jump target inside the current function, bound with `bind`.
  struct label {
    std::size_t id;
  };

  // ---- functions ------------------------------------------------------------------------------

  /// Declares a function before its definition or use; returns its function index. Natives
  /// take any number of arguments unless `num_args` says; compiled functions also need their
  /// register file size.
  std::int64_t declare_function(std::string name, function_kind kind, std::int64_t num_args = -1,
                                std::int64_t register_file_size = 0) {
    if (auto i = exec_.find_function(name)) {
      const auto& f = exec_.functions[*i];
      if (f.kind != kind)
        fail("'" + name + "' is already declared as a " + std::string(vm::name(f.kind)) + " function");
      return std::int64_t(*i);
    }
    function_info f;
    f.kind = kind;
    f.name = std::move(name);
    f.num_args = kind == function_kind::native ? num_args : std::max<std::int64_t>(num_args, 0);
    f.register_file_size = kind == function_kind::compiled ? register_file_size : 0;
    if (kind != function_kind::bytecode)
      if (auto msg = detail::check_function(exec_, f)) fail(*msg);
    exec_.functions.push_back(std::move(f));
    defined_.resize(exec_.functions.size(), false);
    called_.resize(exec_.functions.size(), false);
    return std::int64_t(exec_.functions.size() - 1);
  }

  /// Starts the body of bytecode function `name`; its arguments arrive in registers 0..N-1 where
  /// N is the number of parameter names.
  void begin_function(std::string name, std::vector<std::string> param_names, std::int64_t register_file_size) {
    if (current_) fail("begin_function('" + name + "'): function '" + cur().name + "' is still open");
    function_info f;
    f.kind = function_kind::bytecode;
    f.name = name;
    f.num_args = std::int64_t(param_names.size());
    f.register_file_size = register_file_size;
    f.param_names = std::move(param_names);
    f.start_instr = f.end_instr = std::int64_t(exec_.num_instructions());
    if (auto msg = detail::check_function(exec_, f, /*check_range=*/false)) fail(*msg);
    snapshot_ = snapshot{exec_.instr_offset.size(), exec_.instr_data.size(), exec_.functions.size(), std::nullopt};
    std::size_t index;
    if (auto i = exec_.find_function(name)) {
      index = *i;
      const auto& old = exec_.functions[index];
      if (old.kind != function_kind::bytecode)
        fail("'" + name + "' is already declared as a " + std::string(vm::name(old.kind)) + " function");
      if (defined_[index]) fail("function '" + name + "' is defined twice");
      if (old.num_args != f.num_args && called_[index])
        fail("function '" + name + "' takes " + std::to_string(f.num_args) + " arguments but was declared with " +
             std::to_string(old.num_args) + " and already called");
      snapshot_->replaced = old;
      exec_.functions[index] = f;
    } else {
      exec_.functions.push_back(f);
      index = exec_.functions.size() - 1;
    }
    exec_.functions[index].end_instr = f.start_instr;
    defined_.resize(exec_.functions.size(), false);
    called_.resize(exec_.functions.size(), false);
    current_ = index;
    labels_.clear();
    fixups_.clear();
  }

  /// Ends the open function: resolves labels and checks its control flow.
  void end_function() {
    if (!current_) fail("end_function: no function is open");
    auto& f = cur();
    try {
      if (f.start_instr == f.end_instr) throw usage_error("function '" + f.name + "' has no instructions");
      for (auto& [pc, id] : fixups_) {
        if (!labels_[id]) throw usage_error("function '" + f.name + "': label " + std::to_string(id) + " is used but never bound");
        auto* w = exec_.instr_data.data() + exec_.instr_offset[std::size_t(pc)];
        w[w[0] == exec_word(opcode::goto_) ? 1 : 2] = *labels_[id] - pc;
      }
      for (std::int64_t pc = f.start_instr; pc < f.end_instr; ++pc)
        if (auto msg = detail::check_instruction(exec_, f, pc)) throw usage_error(*msg);
    } catch (const usage_error& e) {
      rollback();
      fail(std::string(e.what()) + " (the function is dropped)");
    }
    defined_[*current_] = true;
    current_.reset();
    snapshot_.reset();
  }

  /// Sets the register file size of the open function (for generators that know it only after
  /// emitting the body); `end_function` checks every instruction against it.
  void set_register_file_size(std::int64_t n) {
    if (!current_) fail("set_register_file_size: no function is open");
    function_info f = cur();
    f.register_file_size = n;
    if (auto msg = detail::check_function(exec_, f, /*check_range=*/false)) fail(*msg);
    cur().register_file_size = n;
  }

  /// Records the open function's parameter types (one per argument) and result type.
  void set_signature(std::vector<type_signature> param_types, type_signature ret_type) {
    if (!current_) fail("set_signature: no function is open");
    function_info f = cur();
    f.param_types = std::move(param_types);
    f.ret_type = std::move(ret_type);
    if (auto msg = detail::check_function(exec_, f, /*check_range=*/false)) fail(*msg);
    cur() = std::move(f);
  }

  /// Drops the open function and everything emitted into it, as a failed `end_function` does.
  void abandon_function() {
    if (!current_) return;
    rollback();
  }

  // ---- operands -------------------------------------------------------------------------------

  static instr_arg r(reg_name reg) noexcept { return instr_arg::reg(reg); }
  static instr_arg vm() noexcept { return instr_arg::reg(vm_register); }
  instr_arg imm(std::int64_t v) const {
    if (!instr_arg::fits(v))
      fail("immediate " + std::to_string(v) + " does not fit in 56 bits; add it as a constant instead");
    return instr_arg::imm(v);
  }
  instr_arg c(std::int64_t const_index) const noexcept { return instr_arg::const_idx(const_index); }
  /// The function called `name` as an argument (declared native if unknown).
  instr_arg f(std::string name) { return instr_arg::func_idx(function_index(std::move(name))); }

  /// Adds a constant (equal numbers, strings and shapes are shared) and returns its index.
  std::int64_t add_constant(value v) {
    if (v.kind() == value_kind::vm || v.kind() == value_kind::closure || v.kind() == value_kind::object)
      fail("a " + std::string(vm::name(v.kind())) + " cannot be a constant");
    if (v.kind() != value_kind::tensor && v.kind() != value_kind::tuple)
      for (std::size_t i = 0; i < exec_.constants.size(); ++i)
        if (equal(exec_.constants[i], v)) return std::int64_t(i);
    exec_.constants.push_back(std::move(v));
    return std::int64_t(exec_.constants.size() - 1);
  }
  /// Records the memory scope ("global", "global.texture", ...) a constant tensor lives in.
  void set_memory_scope(std::int64_t const_index, std::string scope) {
    if (const_index < 0 || std::size_t(const_index) >= exec_.constants.size())
      fail("set_memory_scope: no constant " + std::to_string(const_index));
    exec_.memory_scopes.emplace_back(const_index, std::move(scope));
  }

  // ---- instructions ---------------------------------------------------------------------------

  void emit_call(std::string func, std::span<const instr_arg> args, reg_name dst = void_register) {
    emit_call(function_index(std::move(func)), args, dst);
  }
  void emit_call(std::string func, std::initializer_list<instr_arg> args, reg_name dst = void_register) {
    emit_call(std::move(func), std::span<const instr_arg>(args.begin(), args.size()), dst);
  }
  void emit_call(std::int64_t func_index, std::span<const instr_arg> args, reg_name dst = void_register) {
    std::vector<exec_word> words{exec_word(opcode::call), dst, func_index, exec_word(args.size())};
    for (auto a : args) words.push_back(a.word());
    emit(std::move(words));
    if (func_index >= 0 && std::size_t(func_index) < called_.size()) called_[std::size_t(func_index)] = true;
  }
  void emit_ret(reg_name result) { emit({exec_word(opcode::ret), result}); }
  void emit_goto(std::int64_t pc_offset) { emit({exec_word(opcode::goto_), pc_offset}); }
  void emit_goto(label l) { emit_with_label({exec_word(opcode::goto_), 1}, l); }  // offset set by end_function
  void emit_if(reg_name cond, std::int64_t false_offset) { emit({exec_word(opcode::if_), cond, false_offset}); }
  void emit_if(reg_name cond, label false_target) { emit_with_label({exec_word(opcode::if_), cond, 1}, false_target); }

  label new_label() {
    labels_.emplace_back();
    return {labels_.size() - 1};
  }
  /// Binds `l` to the next instruction emitted.
  void bind(label l) {
    check_label(l);
    if (labels_[l.id]) fail("label " + std::to_string(l.id) + " is bound twice");
    labels_[l.id] = std::int64_t(exec_.num_instructions());
  }
  /// Index of the next instruction, counted from the start of the open function.
  std::int64_t next_pc() const {
    if (!current_) fail("next_pc: no function is open");
    return std::int64_t(exec_.num_instructions()) - cur().start_instr;
  }

  // ---- result ---------------------------------------------------------------------------------

  /// The executable built so far; every declared bytecode function must be defined.
  executable get() const {
    if (current_) fail("get: function '" + cur().name + "' is still open");
    for (std::size_t i = 0; i < exec_.functions.size(); ++i)
      if (exec_.functions[i].kind == function_kind::bytecode && !defined_[i])
        fail("get: bytecode function '" + exec_.functions[i].name + "' is declared but never defined");
    validate(exec_, "exec_builder");
    return exec_;
  }

private:
  [[noreturn]] static void fail(const std::string& msg) { throw usage_error("kiln::vm::exec_builder: " + msg); }
  /// Restores the builder to its state before `begin_function` of the open function.
  void rollback() {
    exec_.instr_offset.resize(snapshot_->instructions);
    exec_.instr_data.resize(snapshot_->words);
    if (snapshot_->replaced) exec_.functions[*current_] = *snapshot_->replaced;
    // Drops the function if it was new, and the natives its body declared (only it used them).
    exec_.functions.erase(exec_.functions.begin() + std::ptrdiff_t(snapshot_->functions), exec_.functions.end());
    current_.reset();
    snapshot_.reset();
    defined_.resize(exec_.functions.size());
    called_.resize(exec_.functions.size());
  }
  function_info& cur() { return exec_.functions[*current_]; }
  const function_info& cur() const { return exec_.functions[*current_]; }

  std::int64_t function_index(std::string name) {
    if (auto i = exec_.find_function(name)) return std::int64_t(*i);
    return declare_function(std::move(name), function_kind::native);
  }
  void check_label(label l) const {
    if (!current_) fail("labels belong to a function; none is open");
    if (l.id >= labels_.size()) fail("label " + std::to_string(l.id) + " was not made by new_label in this function");
  }
  void emit_with_label(std::vector<exec_word> words, label l) {
    check_label(l);
    fixups_.emplace_back(std::int64_t(exec_.num_instructions()), l.id);
    try {
      emit(std::move(words));
    } catch (...) {
      fixups_.pop_back();
      throw;
    }
  }
  /// Appends one instruction and checks it (not its jump target); takes it back on failure.
  void emit(std::vector<exec_word> words) {
    if (!current_) fail("emit " + std::string(name(opcode(words[0]))) + ": no function is open (call begin_function)");
    auto& f = cur();
    const std::int64_t pc = std::int64_t(exec_.num_instructions());
    exec_.instr_offset.push_back(std::int64_t(exec_.instr_data.size()));
    exec_.instr_data.insert(exec_.instr_data.end(), words.begin(), words.end());
    f.end_instr = pc + 1;
    if (auto msg = detail::check_instruction(exec_, f, pc, /*check_targets=*/false)) {
      exec_.instr_data.resize(std::size_t(exec_.instr_offset.back()));
      exec_.instr_offset.pop_back();
      f.end_instr = pc;
      fail(*msg);
    }
  }

  /// What `end_function` restores when it drops a function.
  struct snapshot {
    std::size_t instructions, words, functions;
    std::optional<function_info> replaced;  ///< the declaration the definition replaced
  };

  executable exec_;
  std::optional<snapshot> snapshot_;
  std::optional<std::size_t> current_;
  std::vector<bool> defined_, called_;
  std::vector<std::optional<std::int64_t>> labels_;
  std::vector<std::pair<std::int64_t, std::size_t>> fixups_;
};

}  // namespace kiln::vm
