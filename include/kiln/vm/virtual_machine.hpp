// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::vm::virtual_machine`: runs an executable's bytecode (the design's `VirtualMachine`).
///
/// Loading (the constructor) validates the executable, gives every device an allocator (pooled by
/// default), resolves native and compiled functions in a `function_registry`, checks the arity of
/// every native call it can, loads the constants, and *pre-decodes* the bytecode into a compact
/// internal form: each Call knows its callee's kind and entry point, each argument is an index
/// into the frame's registers or into one literal table (constants, functions, immediates and
/// `%vm`), each jump an absolute target. The run loop then does no decoding, no lookups and no
/// allocation:
///
///     call_native    args -> pointers, one indirect call, result moved into dst
///     call_bytecode  push a frame (registers from a chunked stack that never moves), copy args
///     call_compiled  push a frame, hand the register file to the generated code, pop
///     ret            move the result out, reset the frame's registers, resume the caller
///     goto / if      set pc
///
/// Dispatch is a `switch` or, with `KILN_VM_COMPUTED_GOTO=1`, a computed goto; the handlers are
/// the same in both modes (see the README for the measurements that chose the default).
/// Instrumentation (`set_instrument`) runs a second instantiation of the loop, so the plain
/// loop has no instrument check at all.
///
/// Errors raised by a callee (a native function, a failed match_shape, a too-deep recursion)
/// leave the VM as it was before the invocation: frames are popped, their registers released.
/// They reach the caller as `vm_error`, whose message names the function, the instruction and the
/// callee, and the bytecode call stack.
#pragma once

#include <kiln/runtime/allocator.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/vm/builtins.hpp>
#include <kiln/vm/context.hpp>
#include <kiln/vm/executable.hpp>
#include <kiln/vm/native.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#ifndef KILN_VM_COMPUTED_GOTO
#define KILN_VM_COMPUTED_GOTO 0
#endif

namespace kiln::vm {

/// An error raised while running bytecode, with the bytecode location and call stack.
class vm_error : public error {
public:
  using error::error;
  vm_error(const std::string& what, bool located) : error(what), located_(located) {}
  /// Whether the message already names the failing instruction (set by the run loop).
  bool located() const noexcept { return located_; }

private:
  bool located_ = false;
};

/// What an instrument tells the VM before a call.
enum class instrument_action { no_op = 0, skip_run = 1 };

/// Called before and after every Call: the callee (a closure value), its name, whether the call is
/// about to run, the result (null before) and the arguments. Returning `skip_run` before a call
/// skips it; its destination register receives null.
using instrument_fn =
    std::function<instrument_action(const value& func, std::string_view symbol, bool before_run, const value& ret, call_args args)>;

struct vm_options {
  runtime::allocator_kind allocator = runtime::allocator_kind::pooled;
  std::int64_t num_devices = 1;             ///< devices 0..N-1 (all CPU today); 0 is used for shapes
  std::size_t max_call_depth = 10000;       ///< frames on the bytecode call stack
  std::size_t max_reentry_depth = 256;      ///< nested run loops (natives calling back into the VM)
};

/// Per-run times from `virtual_machine::time_evaluator`, in seconds.
struct timing_result {
  std::vector<double> results;  ///< mean time of one call in each repeat
  int number = 0;               ///< calls per repeat (after min_repeat_ms adjustment)
  double mean() const { return results.empty() ? 0 : std::accumulate(results.begin(), results.end(), 0.0) / double(results.size()); }
  double min() const { return results.empty() ? 0 : *std::min_element(results.begin(), results.end()); }
  double max() const { return results.empty() ? 0 : *std::max_element(results.begin(), results.end()); }
  double median() const {
    if (results.empty()) return 0;
    auto r = results;
    std::sort(r.begin(), r.end());
    return r.size() % 2 ? r[r.size() / 2] : (r[r.size() / 2 - 1] + r[r.size() / 2]) / 2;
  }
  double stddev() const {
    if (results.size() < 2) return 0;
    const double m = mean();
    double s = 0;
    for (double x : results) s += (x - m) * (x - m);
    return std::sqrt(s / double(results.size()));
  }
};

class virtual_machine;

namespace detail {
/// Hash for unordered maps keyed by std::string that accept string_view lookups.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class T>
using string_map = std::unordered_map<std::string, T, string_hash, std::equal_to<>>;
}  // namespace detail

/// A handle to one function of a VM, callable from C++ without a name lookup.
class function_handle {
public:
  function_handle(virtual_machine& vm, std::size_t index) noexcept : vm_(&vm), index_(index) {}
  template <class... Args>
  value operator()(Args&&... args) const;
  value call(std::span<const value> args) const;
  std::size_t index() const noexcept { return index_; }

private:
  virtual_machine* vm_;
  std::size_t index_;
};

class virtual_machine final : public vm_context {
public:
  explicit virtual_machine(executable e, vm_options options = {}, const function_registry& registry = global_registry())
      : virtual_machine(std::make_shared<const executable>(std::move(e)), std::move(options), registry) {}
  explicit virtual_machine(std::shared_ptr<const executable> e, vm_options options = {},
                           const function_registry& registry = global_registry())
      : exec_(std::move(e)), options_(options) {
    if (!exec_) throw usage_error("kiln::vm::virtual_machine: the executable is null");
    validate(*exec_, "virtual_machine");
    init_devices();
    init_function_pool(registry);
    decode();
    frames_.reserve(64);
  }
  virtual_machine(const virtual_machine&) = delete;
  virtual_machine& operator=(const virtual_machine&) = delete;
  ~virtual_machine() = default;

  const executable& exec() const noexcept { return *exec_; }
  const vm_options& options() const noexcept { return options_; }

  // ---- invoking -------------------------------------------------------------------------------

  /// Calls function `name` (or a function saved with `save_function`) with `args`.
  template <class... Args>
  value invoke(std::string_view name, Args&&... args) {
    const value vals[] = {value(), value(std::forward<Args>(args))...};
    return invoke_span(name, std::span<const value>(vals + 1, sizeof...(Args)));
  }
  value invoke_span(std::string_view name, std::span<const value> args) {
    if (auto it = saved_.find(name); it != saved_.end()) {
      if (!args.empty())
        throw usage_error("kiln::vm: saved function '" + std::string(name) + "' has its arguments bound; call it with none");
      return call_function(it->second.index, it->second.args);
    }
    return call_function(function_index(name), args);
  }
  /// A handle that calls `name` without looking it up again (the design's `vm["name"]`).
  function_handle get_function(std::string_view name) { return function_handle(*this, function_index(name)); }
  bool has_function(std::string_view name) const noexcept { return index_.find(name) != index_.end(); }

  /// Calls the function at `index` of the function table.
  value call_function(std::size_t index, std::span<const value> args) {
    if (index >= callees_.size()) throw usage_error("kiln::vm: no function " + std::to_string(index));
    const callee& c = callees_[index];
    if (c.kind == function_kind::native) {
      std::vector<const value*> ptrs(args.size());
      for (std::size_t i = 0; i < args.size(); ++i) ptrs[i] = &args[i];
      return c.native.fn(c.native.state, call_args(ptrs.data(), ptrs.size()));
    }
    return enter_with_args(c, "kiln::vm: function", args.size(), [&](std::size_t i) -> const value& { return args[i]; });
  }

  // ---- stateful interface ---------------------------------------------------------------------

  /// Stores the arguments for `invoke_stateful(name)`.
  template <class... Args>
  void set_input(std::string_view name, Args&&... args) {
    const std::size_t index = function_index(name);
    std::vector<value> vals{value(std::forward<Args>(args))...};
    if (callees_[index].kind != function_kind::native) check_arity(callees_[index], "kiln::vm::set_input: function", vals.size());
    inputs_[std::string(name)] = std::move(vals);
  }
  /// Runs `name` on the arguments `set_input` stored, keeping the result for `get_outputs`.
  void invoke_stateful(std::string_view name) {
    auto it = inputs_.find(name);
    if (it == inputs_.end())
      throw usage_error("kiln::vm::invoke_stateful: no inputs were set for '" + std::string(name) + "' (call set_input first)");
    outputs_[std::string(name)] = call_function(function_index(name), it->second);
  }
  /// The result of the last `invoke_stateful(name)`.
  const value& get_outputs(std::string_view name) const {
    auto it = outputs_.find(name);
    if (it == outputs_.end())
      throw usage_error("kiln::vm::get_outputs: '" + std::string(name) + "' has not been run with invoke_stateful");
    return it->second;
  }

  /// Binds `args` to `name` so that `invoke(saved_name)` calls it without arguments or lookups.
  template <class... Args>
  void save_function(std::string_view name, std::string saved_name, Args&&... args) {
    const std::size_t index = function_index(name);
    saved_[std::move(saved_name)] = saved_call{index, {value(std::forward<Args>(args))...}};
  }

  /// Times `name` as TVM's time_evaluator does: each of `repeat` measurements runs the function
  /// `number` times and records the mean; when a measurement takes less than `min_repeat_ms`,
  /// `number` grows and the measurement is redone. One unmeasured call warms up first.
  std::function<timing_result(std::span<const value>)> time_evaluator(std::string_view name, int number = 10, int repeat = 1,
                                                                      double min_repeat_ms = 0) {
    if (number < 1 || repeat < 1 || min_repeat_ms < 0)
      throw usage_error("kiln::vm::time_evaluator: number and repeat must be at least 1, min_repeat_ms at least 0");
    const std::string fname(name);
    function_index(fname);  // fails now for an unknown name
    return [this, fname, number, repeat, min_repeat_ms](std::span<const value> args) {
      using clock = std::chrono::steady_clock;
      invoke_span(fname, args);
      timing_result r;
      int n = number;
      for (int rep = 0; rep < repeat; ++rep) {
        double elapsed;
        for (;;) {
          const auto t0 = clock::now();
          for (int i = 0; i < n; ++i) invoke_span(fname, args);
          elapsed = std::chrono::duration<double>(clock::now() - t0).count();
          if (elapsed * 1e3 >= min_repeat_ms) break;
          const double scale = elapsed > 0 ? min_repeat_ms / (elapsed * 1e3) * 1.618 : 10.0;
          n = std::max(n + 1, int(std::min(double(n) * scale, 1e9)));
        }
        r.results.push_back(elapsed / n);
      }
      r.number = n;
      return r;
    };
  }

  /// Calls `f` before and after every Call instruction; an empty function removes it.
  void set_instrument(instrument_fn f) { instrument_ = std::move(f); }

  // ---- vm_context -----------------------------------------------------------------------------

  runtime::allocator& allocator_for(std::int64_t device_index) override {
    if (device_index < 0 || device_index >= std::int64_t(allocators_.size()))
      throw usage_error("kiln::vm: device index " + std::to_string(device_index) + " is out of range; the VM has " +
                        std::to_string(allocators_.size()) + " devices");
    return *allocators_[std::size_t(device_index)];
  }
  std::int64_t num_devices() const noexcept override { return std::int64_t(allocators_.size()); }
  value call(const value& func, call_args args) override {
    const closure_obj& c = func.as_closure();
    std::vector<const value*> ptrs(args.data(), args.data() + args.size());
    for (const auto& b : c.bound) ptrs.push_back(&b);
    const call_args all(ptrs.data(), ptrs.size());
    if (c.is_native()) return c.native(all);
    if (c.owner != exec_.get())
      throw usage_error("kiln::vm: closure '" + c.name + "' belongs to another executable");
    return enter_with_args(callees_[std::size_t(c.func_index)], "kiln::vm: closure", all.size(),
                           [&](std::size_t i) -> const value& { return all[i]; });
  }
  const value& constant(std::size_t index) const override { return literals_.at(index); }

  /// The function pool entry (a closure) of function `index`.
  const value& function_value(std::size_t index) const { return literals_.at(exec_->constants.size() + index); }
  /// Statistics of device `index`'s allocator.
  runtime::allocator_stats allocator_stats(std::int64_t device_index = 0) { return allocator_for(device_index).stats(); }
  /// Current bytecode frames (0 when idle).
  std::size_t call_depth() const noexcept { return frames_.size(); }

private:
  // ---- pre-decoded program --------------------------------------------------------------------

#define KILN_VM_INTERNAL_OPS(X) X(call_native) X(call_bytecode) X(call_compiled) X(ret) X(goto_) X(if_)
  enum op_code : std::uint8_t {
#define KILN_VM_OP_ENUM(id) op_##id,
    KILN_VM_INTERNAL_OPS(KILN_VM_OP_ENUM)
#undef KILN_VM_OP_ENUM
  };
  static constexpr std::uint32_t no_register = UINT32_MAX;

  /// An argument: `base` 0 is the frame's registers, 1 the literal table.
  struct operand {
    std::uint32_t index;
    std::uint32_t base;
  };
  struct op {
    op_code code;
    std::uint32_t a;      ///< call: callee; ret: result register; goto: target; if: cond register
    std::uint32_t b;      ///< call: dst register or no_register; if: false target
    std::uint32_t nargs;  ///< call: number of operands
    std::uint32_t first;  ///< call: index of the first operand
  };
  struct callee {
    function_kind kind;
    native_function native;
    compiled_function compiled;
    std::uint32_t start = 0;
    std::uint32_t registers = 0;
    const function_info* info = nullptr;
  };
  struct frame {
    value* regs;
    std::uint32_t registers;
    std::uint32_t callee;     ///< function table index
    std::uint32_t return_pc;  ///< where the caller resumes (run loop frames only)
    std::uint32_t return_dst; ///< the caller's register receiving the result, or no_register
    std::uint32_t pc;         ///< the instruction a caller frame is executing (for error traces)
    bool instrumented;        ///< entered through an instrumented call: report its return
  };

  /// Register files, allocated LIFO from chunks that never move (so pointers into them stay valid
  /// while natives call back into the VM).
  class register_stack {
  public:
    value* push(std::size_t n) {
      if (current_ < chunks_.size()) {
        chunk& c = chunks_[current_];
        if (c.used + n <= c.size) {
          value* p = c.data.get() + c.used;
          c.used += n;
          return p;
        }
      }
      return push_slow(n);
    }
    /// Resets and releases the `n` registers at `p`, the most recent push.
    void pop(value* p, std::size_t n) noexcept {
      if (n == 0) return;
      for (std::size_t i = 0; i < n; ++i) p[i].reset();
      chunk& c = chunks_[current_];
      c.used -= n;
      if (c.used == 0 && current_ > 0) --current_;
    }

  private:
    struct chunk {
      std::unique_ptr<value[]> data;
      std::size_t size = 0, used = 0;
    };
    value* push_slow(std::size_t n) {
      if (!chunks_.empty() && chunks_[current_].used != 0) ++current_;
      while (current_ < chunks_.size() && chunks_[current_].size < n) chunks_.erase(chunks_.begin() + std::ptrdiff_t(current_));
      if (current_ >= chunks_.size()) {
        chunk c;
        c.size = std::max<std::size_t>(n, 16384);
        c.data = std::make_unique<value[]>(c.size);
        chunks_.push_back(std::move(c));
        current_ = chunks_.size() - 1;
      }
      chunk& c = chunks_[current_];
      c.used = n;
      return c.data.get();
    }
    std::vector<chunk> chunks_;
    std::size_t current_ = 0;
  };

  struct saved_call {
    std::size_t index;
    std::vector<value> args;
  };

  // ---- loading --------------------------------------------------------------------------------

  void init_devices() {
    if (options_.num_devices < 1) throw usage_error("kiln::vm::vm_options: num_devices must be at least 1 (device 0 is the CPU)");
    for (std::int64_t d = 0; d < options_.num_devices; ++d)
      allocators_.push_back(runtime::make_allocator(options_.allocator, runtime::cpu(std::int32_t(d))));
  }

  void init_function_pool(const function_registry& registry) {
    const auto& e = *exec_;
    literals_ = e.constants;  // the constant pool comes first in the literal table
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < e.functions.size(); ++i) {
      const auto& f = e.functions[i];
      callee c;
      c.kind = f.kind;
      c.info = &f;
      c.start = std::uint32_t(f.start_instr);
      c.registers = std::uint32_t(f.register_file_size);
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
          if (auto n = registry.find_compiled(f.name)) c.compiled = *n;
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
      throw error(msg);
    }
    literals_.push_back(value(static_cast<vm_context*>(this)));  // %vm
  }

  void decode() {
    const auto& e = *exec_;
    const std::uint32_t vm_literal = std::uint32_t(e.constants.size() + e.functions.size());
    std::unordered_map<std::int64_t, std::uint32_t> immediates;
    ops_.resize(e.num_instructions());
    for (std::size_t pc = 0; pc < e.num_instructions(); ++pc) {
      const instruction in = e.at(pc);
      op& o = ops_[pc];
      switch (in.op) {
        case opcode::call: {
          const auto& c = callees_[std::size_t(in.func_idx)];
          o.code = c.kind == function_kind::native ? op_call_native
                   : c.kind == function_kind::bytecode ? op_call_bytecode : op_call_compiled;
          if (c.kind == function_kind::native && c.native.arity >= 0 && std::size_t(c.native.arity) != in.args.size())
            throw error("kiln::vm::virtual_machine: " + detail::instr_where(owner_of(pc), std::int64_t(pc), in.op) +
                        " calls native function '" + c.info->name + "' with " + std::to_string(in.args.size()) +
                        " arguments, it takes " + std::to_string(c.native.arity));
          o.a = std::uint32_t(in.func_idx);
          o.b = in.dst == void_register ? no_register : std::uint32_t(in.dst);
          o.nargs = std::uint32_t(in.args.size());
          o.first = std::uint32_t(operands_.size());
          for (std::size_t i = 0; i < in.args.size(); ++i) {
            const instr_arg a = in.arg(i);
            const std::int64_t v = a.value();
            switch (a.kind()) {
              case arg_kind::reg:
                operands_.push_back(v == vm_register ? operand{vm_literal, 1} : operand{std::uint32_t(v), 0});
                break;
              case arg_kind::const_idx: operands_.push_back({std::uint32_t(v), 1}); break;
              case arg_kind::func_idx: operands_.push_back({std::uint32_t(e.constants.size() + std::size_t(v)), 1}); break;
              case arg_kind::immediate: {
                auto [it, fresh] = immediates.emplace(v, std::uint32_t(literals_.size()));
                if (fresh) literals_.push_back(value(v));
                operands_.push_back({it->second, 1});
                break;
              }
            }
          }
          break;
        }
        case opcode::ret:
          o.code = op_ret;
          o.a = std::uint32_t(in.result);
          break;
        case opcode::goto_:
          o.code = op_goto_;
          o.a = std::uint32_t(std::int64_t(pc) + in.pc_offset);
          break;
        case opcode::if_:
          o.code = op_if_;
          o.a = std::uint32_t(in.cond);
          o.b = std::uint32_t(std::int64_t(pc) + in.false_offset);
          break;
      }
    }
    literals_.shrink_to_fit();  // never resized again: operands index it
  }

  const function_info& owner_of(std::size_t pc) const {
    for (const auto& f : exec_->functions)
      if (f.kind == function_kind::bytecode && std::int64_t(pc) >= f.start_instr && std::int64_t(pc) < f.end_instr) return f;
    return exec_->functions.front();
  }

  std::size_t function_index(std::string_view name) const {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    std::vector<std::string> names;
    for (const auto& f : exec_->functions) names.push_back(f.name);
    for (const auto& [n, s] : saved_) names.push_back(n);
    throw usage_error("kiln::vm: no function '" + std::string(name) + "' in the executable" + kiln::detail::did_you_mean(name, names));
  }

  // ---- running --------------------------------------------------------------------------------

  /// Throws "<who> '<name>' takes N arguments, got M" unless `c` takes `n` arguments.
  static void check_arity(const callee& c, std::string_view who, std::size_t n) {
    if (std::int64_t(n) != c.info->num_args) [[unlikely]]
      arity_error(c, who, n);
  }
  [[noreturn]] __attribute__((noinline, cold)) static void arity_error(const callee& c, std::string_view who, std::size_t n) {
    throw usage_error(std::string(who) + " '" + c.info->name + "' takes " + std::to_string(c.info->num_args) +
                      " arguments, got " + std::to_string(n));
  }

  /// Calls bytecode or compiled function `c` from C++ with the `n` arguments `arg(i)`.
  template <class Arg>
  value enter_with_args(const callee& c, std::string_view who, std::size_t n, Arg&& arg) {
    check_arity(c, who, n);
    return enter(c, [&](value* regs) {
      for (std::size_t i = 0; i < n; ++i) regs[i] = arg(i);
    });
  }

  /// Pushes a frame for `c`, lets `fill` write the arguments, runs to the matching Ret.
  template <class Fill>
  value enter(const callee& c, Fill&& fill) {
    if (depth_ >= options_.max_reentry_depth)
      throw vm_error(std::to_string(options_.max_reentry_depth) +
                     " nested invocations (natives calling back into the VM); raise vm_options::max_reentry_depth if intended");
    if (frames_.size() >= options_.max_call_depth) throw_depth();
    const std::size_t base = frames_.size();
    value* regs = stack_.push(c.registers);
    frames_.push_back(frame{regs, c.registers, std::uint32_t(c.info - exec_->functions.data()), 0, no_register, c.start, false});
    struct depth_guard {
      std::size_t& d;
      explicit depth_guard(std::size_t& x) : d(x) { ++d; }
      ~depth_guard() { --d; }
    } guard(depth_);
    try {
      fill(regs);
      if (c.kind == function_kind::compiled) {
        value r = c.compiled.fn(c.compiled.state, *this, std::span<value>(regs, c.registers));
        pop_frames(base);
        return r;
      }
      return instrument_ ? run<true>(base) : run<false>(base);
    } catch (...) {
      pop_frames(base);
      throw;
    }
  }

  void pop_frames(std::size_t keep) noexcept {
    while (frames_.size() > keep) {
      frame& f = frames_.back();
      stack_.pop(f.regs, f.registers);
      if (f.instrumented && !instrument_args_.empty()) instrument_args_.pop_back();
      frames_.pop_back();
    }
  }

  [[noreturn]] void throw_depth() const {
    throw vm_error("the call stack reached " + std::to_string(options_.max_call_depth) +
                   " frames (unbounded recursion?); raise vm_options::max_call_depth if intended");
  }

  /// The message of a failure at `pc` of the top frame, with the bytecode call stack down to `base`.
  std::string trace(std::uint32_t pc, std::size_t base, const std::string& what) const {
    const op& o = ops_[pc];
    const auto& f = exec_->functions[frames_.back().callee];
    std::string s = "kiln::vm: in '" + f.name + "' at instruction " + std::to_string(std::int64_t(pc) - f.start_instr);
    if (o.code <= op_call_compiled) s.append(" (call '").append(exec_->functions[o.a].name).append("')");
    return s.append(": ").append(what).append(call_stack(pc, base, false));
  }
  /// "\n  called from 'f' at instruction 3" for each caller of the top frame down to `base`,
  /// starting with the top frame itself (at `pc`) when `with_top`.
  std::string call_stack(std::uint32_t pc, std::size_t base, bool with_top) const {
    std::string s;
    auto line = [&](const frame& f, std::uint32_t at) {
      const auto& fn = exec_->functions[f.callee];
      s.append("\n  called from '").append(fn.name).append("' at instruction ");
      s.append(std::to_string(std::int64_t(at) - fn.start_instr));
    };
    if (with_top) line(frames_.back(), pc);
    for (std::size_t i = frames_.size() - 1; i > base; --i) line(frames_[i - 1], frames_[i].return_pc - 1);
    return s;
  }

  [[noreturn]] void bad_condition(const value& v) const {
    throw value_error("If: the condition register holds " + std::string(name(v.kind())) +
                      ", expected int or bool (use vm.builtin.read_if_cond for tensors)");
  }

  /// The instrument's after-call report for a bytecode call that has just returned `rv`.
  void report_return(const frame& done, const value& rv) {
    std::vector<value> args = std::move(instrument_args_.back());
    instrument_args_.pop_back();
    std::vector<const value*> ptrs;
    for (auto& a : args) ptrs.push_back(&a);
    instrument_(function_value(done.callee), exec_->functions[done.callee].name, false, rv,
                call_args(ptrs.data(), ptrs.size()));
  }

  /// Calls a native callee; instrumented, reports before and after (a skipped call gives null).
  template <bool Instrumented>
  value call_native(const op& o, const value* const* argv) {
    const callee& c = callees_[o.a];
    const call_args args(argv, o.nargs);
    if constexpr (!Instrumented) {
      return c.native.fn(c.native.state, args);
    } else {
      const value& func = function_value(o.a);
      if (instrument_(func, c.info->name, true, value(), args) == instrument_action::skip_run) return value();
      value rv = c.native.fn(c.native.state, args);
      instrument_(func, c.info->name, false, rv, args);
      return rv;
    }
  }

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
  /// The run loop: executes from the top frame until the Ret that pops frame `base`.
  template <bool Instrumented>
  value run(std::size_t base) {
    const op* const ops = ops_.data();
    const operand* const operands = operands_.data();
    const value* const literals = literals_.data();
    value* regs = frames_.back().regs;
    std::uint32_t pc = frames_.back().pc;
    constexpr std::size_t inline_args = 16;

    // Resolves a Call's operands into `argv` (an inline array, or `spill` for long calls).
#define KILN_VM_ARGS(o)                                                                              \
  const value* inline_argv[inline_args];                                                             \
  std::vector<const value*> spill;                                                                   \
  const value** argv = inline_argv;                                                                  \
  if ((o).nargs > inline_args) [[unlikely]] {                                                        \
    spill.resize((o).nargs);                                                                         \
    argv = spill.data();                                                                             \
  }                                                                                                  \
  {                                                                                                  \
    const value* const bases[2] = {regs, literals};                                                  \
    const operand* arg = operands + (o).first;                                                       \
    for (std::uint32_t i = 0; i < (o).nargs; ++i) argv[i] = bases[arg[i].base] + arg[i].index;       \
  }

#if KILN_VM_COMPUTED_GOTO
    static void* const dispatch_table[] = {
#define KILN_VM_OP_LABEL(id) &&handle_##id,
        KILN_VM_INTERNAL_OPS(KILN_VM_OP_LABEL)
#undef KILN_VM_OP_LABEL
    };
#define KILN_VM_DISPATCH() goto* dispatch_table[ops[pc].code];
#define KILN_VM_HANDLER(id) handle_##id:
#define KILN_VM_NEXT() KILN_VM_DISPATCH()
#else
#define KILN_VM_DISPATCH() switch (ops[pc].code)
#define KILN_VM_HANDLER(id) case op_##id:
#define KILN_VM_NEXT() continue
#endif

    try {
#if !KILN_VM_COMPUTED_GOTO
      for (;;)
#endif
      {
        // Each handler's locals live in its own block, closed before the next dispatch (an
        // indirect goto may not leave the scope of an object with a destructor).
        KILN_VM_DISPATCH() {
          KILN_VM_HANDLER(call_native) {
            {
              const op& o = ops[pc];
              KILN_VM_ARGS(o)
              value rv = call_native<Instrumented>(o, argv);
              if (o.b != no_register) regs[o.b] = std::move(rv);
              ++pc;
            }
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(call_bytecode) {
            {
              const op& o = ops[pc];
              const callee& c = callees_[o.a];
              if (frames_.size() >= options_.max_call_depth) [[unlikely]]
                throw_depth();
              bool run_it = true, instrumented = false;
              if constexpr (Instrumented) {
                KILN_VM_ARGS(o)
                const call_args args(argv, o.nargs);
                run_it = instrument_(function_value(o.a), c.info->name, true, value(), args) !=
                         instrument_action::skip_run;
                if (run_it) {
                  auto& saved = instrument_args_.emplace_back();
                  for (std::uint32_t i = 0; i < o.nargs; ++i) saved.push_back(*argv[i]);
                  instrumented = true;
                } else {
                  if (o.b != no_register) regs[o.b].reset();
                  ++pc;
                }
              }
              if (run_it) {
                value* callee_regs = stack_.push(c.registers);
                const operand* arg = operands + o.first;
                const value* const bases[2] = {regs, literals};
                for (std::uint32_t i = 0; i < o.nargs; ++i) callee_regs[i] = bases[arg[i].base][arg[i].index];
                frames_.back().pc = pc;
                frames_.push_back(frame{callee_regs, c.registers, o.a, pc + 1, o.b, c.start, instrumented});
                regs = callee_regs;
                pc = c.start;
              }
            }
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(call_compiled) {
            {
              const op& o = ops[pc];
              const callee& c = callees_[o.a];
              KILN_VM_ARGS(o)
              bool skipped = false;
              if constexpr (Instrumented)
                skipped = instrument_(function_value(o.a), c.info->name, true, value(),
                                      call_args(argv, o.nargs)) == instrument_action::skip_run;
              value rv;
              if (!skipped) {
                frames_.back().pc = pc;
                rv = enter(c, [&](value* r) {
                  for (std::uint32_t i = 0; i < o.nargs; ++i) r[i] = *argv[i];
                });
                if constexpr (Instrumented)
                  instrument_(function_value(o.a), c.info->name, false, rv, call_args(argv, o.nargs));
              }
              if (o.b != no_register) regs[o.b] = std::move(rv);
              ++pc;
            }
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(ret) {
            {
              value rv = std::move(regs[ops[pc].a]);
              const frame done = frames_.back();
              stack_.pop(done.regs, done.registers);
              frames_.pop_back();
              if (frames_.size() == base) return rv;
              if constexpr (Instrumented)
                if (done.instrumented) report_return(done, rv);
              regs = frames_.back().regs;
              pc = done.return_pc;
              if (done.return_dst != no_register) regs[done.return_dst] = std::move(rv);
            }
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(goto_) {
            pc = ops[pc].a;
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(if_) {
            {
              const op& o = ops[pc];
              const value& cond = regs[o.a];
              if (!cond.is_int() && !cond.is_bool()) [[unlikely]]
                bad_condition(cond);
              // An int's or a bool's payload is nonzero exactly when the condition holds.
              const bool taken = cond.is_int() ? cond.raw_bits() != 0 : cond.as_bool();
              pc = taken ? pc + 1 : o.b;
            }
            KILN_VM_NEXT();
          }
        }
      }
    } catch (const vm_error& e) {
      if (!e.located()) throw vm_error(trace(pc, base, e.what()), true);
      // From a nested invocation: add this loop's part of the call stack.
      throw vm_error(std::string(e.what()) + call_stack(pc, base, true), true);
    } catch (const std::exception& e) {
      throw vm_error(trace(pc, base, e.what()), true);
    }
#if KILN_VM_COMPUTED_GOTO
    __builtin_unreachable();
#endif
#undef KILN_VM_ARGS
#undef KILN_VM_DISPATCH
#undef KILN_VM_HANDLER
#undef KILN_VM_NEXT
  }
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#undef KILN_VM_INTERNAL_OPS

  std::shared_ptr<const executable> exec_;
  vm_options options_;
  std::vector<object_ptr<runtime::allocator>> allocators_;
  std::vector<callee> callees_;
  std::vector<value> literals_;  ///< constants, then the function pool, then %vm, then immediates
  std::vector<op> ops_;
  std::vector<operand> operands_;
  detail::string_map<std::size_t> index_;
  std::vector<frame> frames_;
  register_stack stack_;
  std::size_t depth_ = 0;
  instrument_fn instrument_;
  std::vector<std::vector<value>> instrument_args_;
  detail::string_map<std::vector<value>> inputs_;
  detail::string_map<value> outputs_;
  detail::string_map<saved_call> saved_;
};

template <class... Args>
value function_handle::operator()(Args&&... args) const {
  const value vals[] = {value(), value(std::forward<Args>(args))...};
  return vm_->call_function(index_, std::span<const value>(vals + 1, sizeof...(Args)));
}
inline value function_handle::call(std::span<const value> args) const { return vm_->call_function(index_, args); }

}  // namespace kiln::vm
