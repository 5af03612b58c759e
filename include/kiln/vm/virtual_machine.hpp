// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::vm::virtual_machine`: runs an executable's bytecode (the design's `VirtualMachine`).
///
/// Loading (the constructor) validates the executable, gives every device an allocator (pooled by
/// default), resolves native and compiled functions in a `function_registry`, checks the arity of
/// every native call it can, loads the constants, and *pre-decodes* the bytecode into ops: each
/// Call knows its callee's kind and entry (a native's function pointer and state are in the op),
/// each argument is a register's byte offset or a literal's address (constants, functions,
/// immediates and `%vm`), each jump an op pointer. The run loop then does no decoding, no lookups
/// and no allocation:
///
///     call_native_direct  one indirect call to the native's direct entry, which reads its
///                         arguments from the op; the result comes back in registers into dst
///     call_native    the same through an array of argument pointers (natives without a direct
///                    entry: variadic or hand-written ones)
///     call_bytecode  push a frame (from one array) and its registers (from a chunked stack that
///                    never moves), construct the arguments in place
///     call_compiled  push a frame, hand the register file to the generated code, pop
///     ret            hand the result to the caller's register, reset the frame's registers
///     goto / if      set the op pointer
///
/// Every frame has one register more than the function declares, the *sink*: a Call whose
/// result is void writes there, so no handler tests for a void destination.
///
/// Dispatch is computed goto with direct threading (each op holds its handler's address) where
/// the compiler supports it, else a `switch`; `KILN_VM_COMPUTED_GOTO=0` forces the switch. The
/// handlers are the same in both modes; docs/performance.md has the measurements that chose the default.
/// Instrumentation (`set_instrument`) runs a second instantiation of the loop, so the plain
/// loop has no instrument check at all.
///
/// Errors raised by a callee (a native function, a failed match_shape, a too-deep recursion)
/// leave the VM as it was before the invocation: frames are popped, their registers released.
/// They reach the caller as `vm_error`, whose message names the function, the instruction and the
/// callee, and the bytecode call stack.
///
/// Threads. A `virtual_machine` serves one caller at a time, as TVM's VirtualMachine does: its
/// registers, frames, allocators and stateful inputs belong to one run. Use one machine per
/// thread; any number of machines may share one `executable` (immutable once loaded, so safe to
/// share). A public call made while another thread is inside the machine is refused with a
/// `usage_error` ("this virtual_machine is already running 'main' on another thread ..."), never
/// a crash: each call claims the machine with one compare-and-swap and
/// releases it on return. Natives and instruments calling back into the machine on the thread
/// that runs it pass. The kernels' own threads (`kernels::set_num_threads`) are inside one call
/// and are not callers.
#pragma once

#include <kiln/runtime/allocator.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/vm/builtins.hpp>
#include <kiln/vm/context.hpp>
#include <kiln/vm/executable.hpp>
#include <kiln/vm/native.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

// Computed goto (GCC's and Clang's labels as values) by default; define it to 0 for a switch.
#ifndef KILN_VM_COMPUTED_GOTO
#if defined(__GNUC__)
#define KILN_VM_COMPUTED_GOTO 1
#else
#define KILN_VM_COMPUTED_GOTO 0
#endif
#endif

namespace kiln::vm {

struct vm_options {
  runtime::allocator_kind allocator = runtime::allocator_kind::pooled;
  std::int64_t num_devices = 1;             ///< devices 0..N-1 (all CPU today); 0 is used for shapes
  std::size_t max_call_depth = 10000;       ///< frames on the bytecode call stack (at most 2^22)
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
namespace detail {
/// A function with its arguments bound by `save_function` (TVM's saved closure).
struct saved_call {
  std::string name;  ///< the saved name
  std::size_t index = 0;
  std::vector<value> args;
  bool include_return = true;
};
}  // namespace detail

/// Options of `virtual_machine::save_function`.
struct save_options {
  /// Whether calling the saved function returns its result (TVM's `include_return`); without it
  /// the call returns null (for timing without keeping outputs).
  bool include_return = true;
};

class function_handle {
public:
  function_handle(virtual_machine& vm, std::size_t index) noexcept : vm_(&vm), index_(index) {}
  function_handle(virtual_machine& vm, const detail::saved_call& saved) noexcept
      : vm_(&vm), index_(saved.index), saved_(&saved) {}
  template <class... Args>
  value operator()(Args&&... args) const;
  value call(std::span<const value> args) const;
  std::size_t index() const noexcept { return index_; }
  /// True for a function saved with `save_function` (its arguments are bound).
  bool is_saved() const noexcept { return saved_ != nullptr; }

private:
  virtual_machine* vm_;
  std::size_t index_;
  const detail::saved_call* saved_ = nullptr;  // owned by the VM; stays valid while the name is saved
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
    init_frames();
    init_function_pool(registry);
    decode();
#if KILN_VM_COMPUTED_GOTO
    run<false>(nullptr, nullptr);  // stores each op's handler address (direct threading)
#endif
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
    if (auto it = saved_.find(name); it != saved_.end()) return call_saved(name, it->second, args);
    return call_function(function_index(name), args);
  }
  /// A handle that calls `name` — a function of the executable or a name given to
  /// `save_function` — without looking it up again (the design's `vm["name"]`).
  function_handle get_function(std::string_view name) {
    const exclusive_use use(*this, nullptr);
    if (auto it = saved_.find(name); it != saved_.end()) return function_handle(*this, it->second);
    return function_handle(*this, function_index(name));
  }
  /// True for a function of the executable or a saved name.
  bool has_function(std::string_view name) const {
    const exclusive_use use(const_cast<virtual_machine&>(*this), nullptr);
    return index_.find(name) != index_.end() || saved_.find(name) != saved_.end();
  }

  /// Calls a saved function: no arguments allowed (they are bound), null unless it includes its return.
  value call_saved(std::string_view name, const detail::saved_call& s, std::span<const value> args) {
    if (!args.empty())
      throw usage_error("kiln::vm: saved function '" + std::string(name) + "' has its arguments bound; call it with none");
    value r = call_function(s.index, s.args);
    return s.include_return ? r : value();
  }

  /// Calls the function at `index` of the function table. (Always inlined: a call from C++ is then
  /// one function deep, as its figures in docs/performance.md assume.)
  __attribute__((always_inline)) value call_function(std::size_t index, std::span<const value> args) {
    const exclusive_use use(*this, index);
    if (index >= num_functions_) [[unlikely]]
      throw usage_error("kiln::vm: no function " + std::to_string(index));
    const callee& c = callees_[index];
    if (c.kind == function_kind::native) [[unlikely]]
      return call_native_from_cpp(c, args);
    return enter_with_args(c, "kiln::vm: function", args.size(), [&](std::size_t i) -> const value& { return args[i]; });
  }

  // ---- stateful interface ---------------------------------------------------------------------

  /// Stores the arguments for `invoke_stateful(name)`.
  template <class... Args>
  void set_input(std::string_view name, Args&&... args) {
    const value vals[] = {value(std::forward<Args>(args))..., value()};
    set_input_span(name, std::span<const value>(vals, sizeof...(Args)));
  }
  /// `set_input` with the arguments in a span (for bindings that gather them at run time).
  void set_input_span(std::string_view name, std::span<const value> args) {
    const exclusive_use use(*this, nullptr);
    const std::size_t index = function_index(name);
    if (callees_[index].kind != function_kind::native) check_arity(callees_[index], "kiln::vm::set_input: function", args.size());
    inputs_[std::string(name)] = std::vector<value>(args.begin(), args.end());
  }
  /// Runs `name` on the arguments `set_input` stored, keeping the result for `get_outputs`.
  void invoke_stateful(std::string_view name) {
    const std::size_t index = function_index(name);  // an unknown function is named as such first
    const exclusive_use use(*this, index);
    auto it = inputs_.find(name);
    if (it == inputs_.end())
      throw usage_error("kiln::vm::invoke_stateful: no inputs were set for '" + std::string(name) + "' (call set_input first)");
    outputs_[std::string(name)] = call_function(index, it->second);
  }
  /// The result of the last `invoke_stateful(name)`.
  /// The reference stays valid until the next `invoke_stateful(name)`.
  const value& get_outputs(std::string_view name) const {
    const exclusive_use use(const_cast<virtual_machine&>(*this), nullptr);
    auto it = outputs_.find(name);
    if (it == outputs_.end())
      throw usage_error("kiln::vm::get_outputs: '" + std::string(name) + "' has not been run with invoke_stateful");
    return it->second;
  }

  /// Binds `args` to `name` so that `invoke(saved_name)`, `get_function(saved_name)` and
  /// `time_evaluator(saved_name)` call it without arguments or lookups (TVM's `save_function`).
  /// As in TVM, saved names are looked up before the executable's functions: a `saved_name` that
  /// is also a function's name shadows that function for later lookups by name (handles taken
  /// before keep calling the function).
  template <class... Args>
  void save_function(std::string_view name, std::string saved_name, Args&&... args) {
    save_function(name, std::move(saved_name), save_options{}, std::forward<Args>(args)...);
  }
  /// The same, with TVM's `include_return` option.
  template <class... Args>
  void save_function(std::string_view name, std::string saved_name, save_options options, Args&&... args) {
    const value vals[] = {value(std::forward<Args>(args))..., value()};
    save_function_span(name, std::move(saved_name), options, std::span<const value>(vals, sizeof...(Args)));
  }
  /// `save_function` with the arguments in a span.
  void save_function_span(std::string_view name, std::string saved_name, save_options options, std::span<const value> args) {
    const exclusive_use use(*this, nullptr);
    const std::size_t index = function_index(name);
    if (saved_name.empty()) throw usage_error("kiln::vm::save_function: the saved name is empty");
    auto& slot = saved_[saved_name];
    slot.name = std::move(saved_name);
    slot.index = index;  // in place: handles to this name stay valid
    slot.args = std::vector<value>(args.begin(), args.end());
    slot.include_return = options.include_return;
  }

  /// Times `name` as TVM's time_evaluator does: each of `repeat` measurements runs the function
  /// `number` times and records the mean; when a measurement takes less than `min_repeat_ms`,
  /// `number` grows and the measurement is redone. One unmeasured call warms up first.
  std::function<timing_result(std::span<const value>)> time_evaluator(std::string_view name, int number = 10, int repeat = 1,
                                                                      double min_repeat_ms = 0) {
    if (number < 1 || repeat < 1 || min_repeat_ms < 0)
      throw usage_error("kiln::vm::time_evaluator: number and repeat must be at least 1, min_repeat_ms at least 0");
    const std::string fname(name);
    // TVM's form for the stateful interface: time_evaluator("invoke_stateful")(function name).
    const bool stateful = fname == "invoke_stateful" && index_.find(fname) == index_.end() && saved_.find(fname) == saved_.end();
    if (!stateful && saved_.find(fname) == saved_.end()) function_index(fname);  // fails now for an unknown name
    return [this, fname, stateful, number, repeat, min_repeat_ms](std::span<const value> args) {
      using clock = std::chrono::steady_clock;
      std::string target;
      if (stateful) {
        if (args.size() != 1 || !args[0].is_string())
          throw usage_error("kiln::vm::time_evaluator: 'invoke_stateful' is timed with one argument, the name of a "
                            "function whose inputs set_input stored");
        target = std::string(args[0].as_string());
      }
      auto once = [&] {
        if (stateful) invoke_stateful(target);
        else invoke_span(fname, args);
      };
      once();
      timing_result r;
      int n = number;
      for (int rep = 0; rep < repeat; ++rep) {
        double elapsed;
        for (;;) {
          const auto t0 = clock::now();
          for (int i = 0; i < n; ++i) once();
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
  ///
  /// Replacing or removing the instrument while the machine runs (from inside the instrument, or
  /// from a native it calls) is safe: the old instrument stays alive until the outermost call
  /// returns, a call in progress reports its end to the instrument that saw it start, and calls
  /// that start later go to the new one.
  void set_instrument(instrument_fn f) {
    const exclusive_use use(*this, nullptr);
    auto next = f ? std::make_unique<instrument_fn>(std::move(f)) : nullptr;
    if (depth_ > 0 && instrument_) retired_instruments_.push_back(std::move(instrument_));
    instrument_ = std::move(next);
  }

  // ---- vm_context -----------------------------------------------------------------------------

  /// Device `device_index`'s allocator; -1 is the host (TVM's convention), device 0 here.
  runtime::allocator& allocator_for(std::int64_t device_index) override {
    if (device_index == -1) device_index = 0;
    if (device_index < 0 || device_index >= std::int64_t(allocators_.size()))
      throw usage_error("kiln::vm: device index " + std::to_string(device_index) + " is out of range; the VM has " +
                        std::to_string(allocators_.size()) + " devices");
    return *allocators_[std::size_t(device_index)];
  }
  std::int64_t num_devices() const noexcept override { return std::int64_t(allocators_.size()); }
  value call(const value& func, call_args args) override {
    const exclusive_use use(*this, nullptr);
    const closure_obj& c = func.as_closure();
    if (!c.is_native() && c.owner != exec_.get())
      throw usage_error("kiln::vm: closure '" + c.name + "' belongs to another executable");
    const std::size_t n = args.size() + c.bound.size();
    auto arg = [&](std::size_t i) -> const value& { return i < args.size() ? args[i] : c.bound[i - args.size()]; };
    if (c.is_native()) return with_pointers(n, arg, c.native);
    return enter_with_args(callees_[std::size_t(c.func_index)], "kiln::vm: closure", n, arg);
  }
  const value& constant(std::size_t index) const override {
    if (index >= exec_->constants.size()) throw_bad_literal("constant", index, exec_->constants.size());
    return literals_[index];
  }
  std::shared_ptr<void>& compiled_state(std::size_t index) override {
    if (index >= exec_->functions.size()) throw_bad_literal("function", index, exec_->functions.size());
    if (compiled_state_.size() != exec_->functions.size()) compiled_state_.resize(exec_->functions.size());
    return compiled_state_[index];
  }
  const value& function(std::size_t index) const override {
    if (index >= exec_->functions.size()) throw_bad_literal("function", index, exec_->functions.size());
    return literals_[exec_->constants.size() + index];
  }
  const instrument_fn* instrument() const noexcept override { return instrument_.get(); }

  /// The function pool entry (a closure) of function `index`.
  const value& function_value(std::size_t index) const { return literals_.at(exec_->constants.size() + index); }
  [[noreturn]] __attribute__((noinline, cold)) static void throw_bad_literal(const char* what, std::size_t index, std::size_t size) {
    throw usage_error(std::string("kiln::vm: ") + what + " " + std::to_string(index) + " requested; the executable has " + std::to_string(size));
  }
  /// Statistics of device `index`'s allocator.
  runtime::allocator_stats allocator_stats(std::int64_t device_index = 0) {
    const exclusive_use use(*this, nullptr);
    return allocator_for(device_index).stats();
  }
  /// Current bytecode frames (0 when idle).
  std::size_t call_depth() const noexcept { return std::size_t(top_ - frames_.get()); }

private:
  // ---- one caller at a time ------------------------------------------------------------------

  static constexpr std::uint32_t no_function = std::uint32_t(-1);

  /// Claims the machine for the calling thread for the length of one public call, or throws when
  /// another thread has it. Nested uses on the thread that has it (a native or an instrument
  /// calling back into the machine) pass. Leaving the outermost use drops the instruments retired
  /// while it ran.
  class exclusive_use {
  public:
    exclusive_use(virtual_machine& vm, std::size_t function) : vm_(vm) {
      const std::thread::id me = std::this_thread::get_id();
      if (vm.owner_.load(std::memory_order_relaxed) == me) return;  // only this thread stores its own id
      std::thread::id idle{};
      if (!vm.owner_.compare_exchange_strong(idle, me, std::memory_order_acquire, std::memory_order_relaxed)) [[unlikely]]
        vm.throw_busy();
      vm.running_.store(std::uint32_t(function), std::memory_order_relaxed);  // throw_busy checks it
      claimed_ = true;
    }
    exclusive_use(virtual_machine& vm, std::nullptr_t) : exclusive_use(vm, std::size_t(no_function)) {}
    exclusive_use(const exclusive_use&) = delete;
    exclusive_use& operator=(const exclusive_use&) = delete;
    ~exclusive_use() {
      if (!claimed_) return;
      if (!vm_.retired_instruments_.empty()) [[unlikely]]
        vm_.retired_instruments_.clear();
      vm_.running_.store(no_function, std::memory_order_relaxed);
      vm_.owner_.store(std::thread::id{}, std::memory_order_release);
    }

  private:
    virtual_machine& vm_;
    bool claimed_ = false;
  };
  /// The refusal. It names the function the other thread runs when it can: the name is stored just
  /// after the claim and cleared just before the release, so a refusal in between says "in use".
  [[noreturn]] __attribute__((noinline, cold)) void throw_busy() const {
    const std::uint32_t f = running_.load(std::memory_order_relaxed);
    const std::string what = f >= num_functions_ ? "in use" : "running '" + exec_->functions[f].name + "'";
    throw usage_error("kiln::vm: this virtual_machine is already " + what +
                      " on another thread; use one virtual_machine per thread (a machine serves one caller at a time)");
  }

  // ---- pre-decoded program --------------------------------------------------------------------

  /// The run loop's instructions. Calls come first (`trace` relies on it). A native with a direct
  /// entry reads its arguments from the op's operands itself; others get an array of argument
  /// pointers, and a call with more than `inline_args` arguments has its own op so that the
  /// common one keeps no spill buffer.
#define KILN_VM_INTERNAL_OPS(X) \
  X(call_native_direct) X(call_native) X(call_native_long) X(call_bytecode) X(call_compiled) X(ret) X(goto_) X(if_)
  enum op_code : std::uint8_t {
#define KILN_VM_OP_ENUM(id) op_##id,
    KILN_VM_INTERNAL_OPS(KILN_VM_OP_ENUM)
#undef KILN_VM_OP_ENUM
  };
  static constexpr std::uint32_t inline_args = 16;

  /// The register at byte offset `offset` of a frame.
  static value& slot(value* regs, std::uint32_t offset) noexcept {
    return *reinterpret_cast<value*>(reinterpret_cast<char*>(regs) + offset);
  }
  static constexpr std::uint32_t offset_of(std::int64_t reg) noexcept { return std::uint32_t(reg * std::int64_t(sizeof(value))); }

  struct op;
  struct native_target {
    union {
      native_function::fn_type fn;              ///< call_native, call_native_long
      native_function::direct_fn_type direct;  ///< call_native_direct
    };
    const void* state;
  };
  struct code_target {
    const op* entry;          ///< call_bytecode: the callee's first op; goto: target; if: false target
    std::uint32_t registers;  ///< call_bytecode: the callee's frame size (its registers and the sink)
  };
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

  /// Register files, allocated LIFO from chunks that never move (so pointers into them stay valid
  /// while natives call back into the VM). Every register above the top is null.
  class register_stack {
  public:
    value* push(std::size_t n) {
      if (std::size_t(limit_ - top_) < n) [[unlikely]]
        return push_slow(n);
      value* p = top_;
      top_ += n;
      return p;
    }
    /// Resets and releases the `n` registers at `p`, the most recent push.
    void pop(value* p, std::size_t n) noexcept {
      for (std::size_t i = 0; i < n; ++i) p[i].reset();
      top_ = p;
      if (p == begin_ && current_ > 0) [[unlikely]]
        pop_chunk();
    }

  private:
    struct chunk {
      std::unique_ptr<value[]> data;
      std::size_t size = 0;
      value* saved_top = nullptr;  ///< the top when a later chunk took over
    };
    __attribute__((noinline)) value* push_slow(std::size_t n) {
      std::size_t next = chunks_.empty() || top_ == begin_ ? current_ : current_ + 1;
      while (next < chunks_.size() && chunks_[next].size < n) chunks_.erase(chunks_.begin() + std::ptrdiff_t(next));
      if (next == chunks_.size()) {
        const std::size_t size = std::max<std::size_t>(n, 16384);
        chunks_.push_back(chunk{std::make_unique<value[]>(size), size, nullptr});
      }
      if (next != current_) chunks_[current_].saved_top = top_;
      current_ = next;
      begin_ = chunks_[next].data.get();
      limit_ = begin_ + chunks_[next].size;
      top_ = begin_ + n;
      return begin_;
    }
    void pop_chunk() noexcept {
      --current_;
      begin_ = chunks_[current_].data.get();
      limit_ = begin_ + chunks_[current_].size;
      top_ = chunks_[current_].saved_top;
    }
    std::vector<chunk> chunks_;
    std::size_t current_ = 0;
    value* begin_ = nullptr;
    value* top_ = nullptr;
    value* limit_ = nullptr;
  };

  using saved_call = detail::saved_call;

  // ---- loading --------------------------------------------------------------------------------

  static constexpr std::size_t max_frames = std::size_t(1) << 22;

  void init_devices() {
    if (options_.num_devices < 1) throw usage_error("kiln::vm::vm_options: num_devices must be at least 1 (device 0 is the CPU)");
    for (std::int64_t d = 0; d < options_.num_devices; ++d)
      allocators_.push_back(runtime::make_allocator(options_.allocator, runtime::cpu(std::int32_t(d))));
  }

  void init_frames() {
    if (options_.max_call_depth < 1 || options_.max_call_depth > max_frames)
      throw usage_error("kiln::vm::vm_options: max_call_depth must be between 1 and " + std::to_string(max_frames) + ", got " +
                        std::to_string(options_.max_call_depth));
    // Entry 0 is the idle sentinel; uninitialised, so untouched pages are never committed.
    frames_.reset(new frame[options_.max_call_depth + 1]);
    top_ = frames_.get();
    frames_end_ = frames_.get() + options_.max_call_depth + 1;
  }

  void init_function_pool(const function_registry& registry) {
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
      if (std::any_of(missing.begin(), missing.end(), [](const std::string& n) { return n.starts_with(function_registry::compiled_prefix); }))
        msg.append(" (compiled functions come with the executable's generated code: build it with export_library and load it with "
                   "vm::load_module, include the header kiln-compile --emit-cpp writes, or register them with add_compiled)");
      throw error(msg);
    }
    literals_.push_back(value(static_cast<vm_context*>(this)));  // %vm
    num_functions_ = callees_.size();
  }

  /// Translates the bytecode into `ops_`. Operands are first collected as literal-table indices
  /// or register numbers, and become addresses once the literal table has stopped growing.
  void decode() {
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
            o.dst = offset_of(in.dst == void_register ? sink : in.dst);
            switch (c.kind) {
              case function_kind::native:
                o.to.native.state = c.native.state;
                if (c.native.direct && c.native.arity >= 0) {  // the arity was checked above
                  o.code = op_call_native_direct;
                  o.to.native.direct = c.native.direct;
                } else {
                  o.code = o.nargs > inline_args ? op_call_native_long : op_call_native;
                  o.to.native.fn = c.native.fn;
                }
                break;
              case function_kind::bytecode: o.code = op_call_bytecode; break;  // entry: below
              case function_kind::compiled: o.code = op_call_compiled; break;
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
            o.code = op_ret;
            o.a = offset_of(in.result);
            break;
          case opcode::goto_:
            o.code = op_goto_;
            o.to.code = {ops_.data() + (std::int64_t(pc) + in.pc_offset), 0};
            break;
          case opcode::if_:
            o.code = op_if_;
            o.a = offset_of(in.cond);
            o.to.code = {ops_.data() + (std::int64_t(pc) + in.false_offset), 0};
            break;
        }
      }
    }
    // The literal table is complete: never resized again, so operands can hold addresses.
    literals_.shrink_to_fit();
    operands_.reserve(args.size());
    for (const pending& p : args)
      operands_.push_back(p.literal ? reinterpret_cast<call_operand>(&literals_[p.index]) | 1 : call_operand(p.index * sizeof(value)));
    for (std::size_t pc = 0; pc < ops_.size(); ++pc) {
      op& o = ops_[pc];
      if (o.code > op_call_compiled) continue;
      o.args = operands_.data() + first_arg[pc];
      if (o.code == op_call_bytecode) o.to.code = {callees_[o.a].entry, callees_[o.a].registers};
    }
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

  /// Calls `f(call_args)` on pointers to the `n` values `arg(i)`: an inline array, or the heap for
  /// more than `inline_args`.
  template <class Arg, class F>
  static value with_pointers(std::size_t n, Arg&& arg, F&& f) {
    const value* inline_ptrs[inline_args];
    std::vector<const value*> heap;
    const value** p = inline_ptrs;
    if (n > inline_args) {
      heap.resize(n);
      p = heap.data();
    }
    for (std::size_t i = 0; i < n; ++i) p[i] = &arg(i);
    return f(call_args(p, n));
  }

  __attribute__((noinline)) static value call_native_from_cpp(const callee& c, std::span<const value> args) {
    return with_pointers(args.size(), [&](std::size_t i) -> const value& { return args[i]; }, c.native);
  }

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
      for (std::size_t i = 0; i < n; ++i) std::construct_at(regs + i, arg(i));  // fresh registers are null
    });
  }

  /// Pushes a frame for `c`, lets `fill` write the arguments, runs to the matching Ret.
  template <class Fill>
  value enter(const callee& c, Fill&& fill) {
    if (depth_ >= options_.max_reentry_depth) [[unlikely]]
      throw_reentry();
    if (top_ + 1 == frames_end_) [[unlikely]]
      throw_depth();
    ++depth_;
    // Leaving, normally or by an exception: pop what is left of the frames pushed here.
    struct scope {
      virtual_machine& vm;
      frame* const caller;
      ~scope() {
        if (vm.top_ != caller) [[unlikely]]
          vm.pop_frames(caller);  // an exception, or a compiled function's frame
        --vm.depth_;
      }
    } guard{*this, top_};
    value* regs = stack_.push(c.registers);
    frame* f = ++top_;
    *f = frame{regs, nullptr, nullptr, c.registers, c.index, false};
    fill(regs);
    if (c.kind == function_kind::compiled) return c.compiled.fn(c.compiled.state, *this, std::span<value>(regs, c.registers - 1));
    return instrument_ ? run<true>(f, c.entry) : run<false>(f, c.entry);
  }

  /// Pops frames down to `keep`, releasing their registers.
  __attribute__((noinline)) void pop_frames(frame* keep) noexcept {
    for (; top_ != keep; --top_) {
      stack_.pop(top_->regs, top_->registers);
      if (top_->instrumented && !instrument_args_.empty()) instrument_args_.pop_back();
    }
  }

  [[noreturn]] __attribute__((noinline, cold)) void throw_depth() const {
    throw vm_error("the call stack reached " + std::to_string(options_.max_call_depth) +
                   " frames (unbounded recursion?); raise vm_options::max_call_depth if intended");
  }
  [[noreturn]] __attribute__((noinline, cold)) void throw_reentry() const {
    throw vm_error(std::to_string(options_.max_reentry_depth) +
                   " nested invocations (natives calling back into the VM); raise vm_options::max_reentry_depth if intended");
  }

  std::size_t pc_of(const op* ip) const noexcept { return std::size_t(ip - ops_.data()); }

  /// The message of a failure at `ip` of the top frame, with the bytecode call stack down to `base`.
  std::string trace(const op* ip, const frame* base, const std::string& what) const {
    const auto& f = exec_->functions[top_->callee];
    std::string s = "kiln::vm: in '" + f.name + "' at instruction " + std::to_string(std::int64_t(pc_of(ip)) - f.start_instr);
    if (ip->code <= op_call_compiled) s.append(" (call '").append(exec_->functions[ip->a].name).append("')");
    return s.append(": ").append(what).append(call_stack(ip, base, false));
  }
  /// "\n  called from 'f' at instruction 3" for each caller of the top frame down to `base`,
  /// starting with the top frame itself (at `ip`) when `with_top`.
  std::string call_stack(const op* ip, const frame* base, bool with_top) const {
    std::string s;
    auto line = [&](const frame& f, const op* at) {
      const auto& fn = exec_->functions[f.callee];
      s.append("\n  called from '").append(fn.name).append("' at instruction ");
      s.append(std::to_string(std::int64_t(pc_of(at)) - fn.start_instr));
    };
    if (with_top) line(*top_, ip);
    for (const frame* f = top_; f > base; --f) line(f[-1], f->return_ip - 1);
    return s;
  }

  [[noreturn]] __attribute__((noinline, cold)) static void bad_condition(const value& v) {
    throw value_error("If: the condition register holds " + std::string(name(v.kind())) +
                      ", expected int or bool (use vm.builtin.read_if_cond for tensors)");
  }

  /// The instrument's after-call report for a bytecode call that has just returned `rv`.
  void report_return(const frame& done, const value& rv) {
    const reported_call call = std::move(instrument_args_.back());
    instrument_args_.pop_back();
    std::vector<const value*> ptrs;
    for (auto& a : call.args) ptrs.push_back(&a);
    (*call.to)(function_value(done.callee), exec_->functions[done.callee].name, false, rv, call_args(ptrs.data(), ptrs.size()));
  }

  /// Calls a native callee with `args` into `out`; instrumented, reports before and after (a
  /// skipped call stores null).
  template <bool Instrumented>
  void call_native(const op& o, call_args args, value& out) {
    if constexpr (!Instrumented) {
      out.assign_raw(o.to.native.fn(o.to.native.state, args));
    } else {
      const value& func = function_value(o.a);
      const std::string& symbol = exec_->functions[o.a].name;
      const native_function& n = callees_[o.a].native;  // the op may hold the direct entry
      instrument_fn* const to = instrument_.get();
      if (!to) [[unlikely]] {  // removed while running
        out.assign_raw(n.fn(n.state, args));
        return;
      }
      if ((*to)(func, symbol, true, value(), args) == instrument_action::skip_run) {
        out.reset();
        return;
      }
      // `out` may be an argument register: the after-report gets the arguments as they were.
      value rv = value::from_raw(n.fn(n.state, args));
      (*to)(func, symbol, false, rv, args);
      out = std::move(rv);
    }
  }
  /// A native call through `call_args`, with at most `inline_args` arguments.
  template <bool Instrumented>
  __attribute__((always_inline)) void call_native_gathered(const op& o, value* regs) {
    const value* argv[inline_args];
    for (std::uint32_t i = 0; i < o.nargs; ++i) argv[i] = &resolve_operand(o.args[i], regs);
    call_native<Instrumented>(o, call_args(argv, o.nargs), slot(regs, o.dst));
  }
  /// A native call with more than `inline_args` arguments (kept out of the run loop's frame).
  template <bool Instrumented>
  __attribute__((noinline)) void call_native_long(const op& o, value* regs) {
    std::vector<const value*> argv(o.nargs);
    for (std::uint32_t i = 0; i < o.nargs; ++i) argv[i] = &resolve_operand(o.args[i], regs);
    call_native<Instrumented>(o, call_args(argv.data(), o.nargs), slot(regs, o.dst));
  }

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
  /// The run loop: executes from `entry` in frame `base` (the top frame) until the Ret that pops it.
  template <bool Instrumented>
  value run(frame* const base, const op* entry) {
#if KILN_VM_COMPUTED_GOTO
    static void* const dispatch_table[] = {
#define KILN_VM_OP_LABEL(id) &&handle_##id,
        KILN_VM_INTERNAL_OPS(KILN_VM_OP_LABEL)
#undef KILN_VM_OP_LABEL
    };
    if constexpr (!Instrumented) {
      if (base == nullptr) [[unlikely]] {  // the constructor's call: thread the ops
        for (op& o : ops_) o.handler = dispatch_table[o.code];
        return value();
      }
    }
    // The plain loop jumps straight to each op's handler; the instrumented one looks it up.
#define KILN_VM_DISPATCH() goto*(Instrumented ? dispatch_table[ip->code] : ip->handler);
#define KILN_VM_HANDLER(id) handle_##id:
#define KILN_VM_NEXT() KILN_VM_DISPATCH()
#else
#define KILN_VM_DISPATCH() switch (ip->code)
#define KILN_VM_HANDLER(id) case op_##id:
#define KILN_VM_NEXT() continue
#endif
    const op* ip = entry;
    value* regs = base->regs;

    try {
#if !KILN_VM_COMPUTED_GOTO
      for (;;)
#endif
      {
        // Each handler's locals live in its own block, closed before the next dispatch (an
        // indirect goto may not leave the scope of an object with a destructor).
        KILN_VM_DISPATCH() {
          KILN_VM_HANDLER(call_native_direct) {
            if constexpr (Instrumented) {  // the instrument wants call_args: the generic path
              if (ip->nargs > inline_args) call_native_long<true>(*ip, regs);
              else call_native_gathered<true>(*ip, regs);
            } else {
              slot(regs, ip->dst).assign_raw(ip->to.native.direct(ip->to.native.state, regs, ip->args));
            }
            ++ip;
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(call_native) {
            call_native_gathered<Instrumented>(*ip, regs);
            ++ip;
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(call_native_long) {
            call_native_long<Instrumented>(*ip, regs);
            ++ip;
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(call_bytecode) {
            {
              const op& o = *ip;
              if (top_ + 1 == frames_end_) [[unlikely]]
                throw_depth();
              bool instrumented = false;
              if constexpr (Instrumented) {
                if (!instrument_bytecode_call(o, regs, instrumented)) {
                  slot(regs, o.dst).reset();
                  ++ip;
                  KILN_VM_NEXT();
                }
              }
              value* callee_regs = stack_.push(o.to.code.registers);
              // Registers above the stack's top are null, so the arguments are constructed in place.
              for (std::uint32_t i = 0; i < o.nargs; ++i) std::construct_at(callee_regs + i, resolve_operand(o.args[i], regs));
              *++top_ = frame{callee_regs, ip + 1, &slot(regs, o.dst), o.to.code.registers, o.a, instrumented};
              regs = callee_regs;
              ip = o.to.code.entry;
            }
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(call_compiled) {
            {
              const op& o = *ip;
              const callee& c = callees_[o.a];
              value rv = with_pointers(
                  o.nargs, [&](std::size_t i) -> const value& { return resolve_operand(o.args[i], regs); },
                  [&](call_args args) {
                    const auto enter_callee = [&] {
                      return enter(c, [&](value* dst) {
                        for (std::size_t i = 0; i < args.size(); ++i) dst[i] = args[i];
                      });
                    };
                    if constexpr (Instrumented) {
                      instrument_fn* const to = instrument_.get();
                      if (!to) [[unlikely]]  // removed while running
                        return enter_callee();
                      if ((*to)(function_value(o.a), c.info->name, true, value(), args) == instrument_action::skip_run) return value();
                      value r = enter_callee();
                      (*to)(function_value(o.a), c.info->name, false, r, args);
                      return r;
                    } else {
                      return enter_callee();
                    }
                  });
              slot(regs, o.dst) = std::move(rv);
              ++ip;
            }
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(ret) {
            {
              frame* const done = top_;
              value& result = slot(regs, ip->a);
              if (done == base) {
                value rv = std::move(result);
                stack_.pop(done->regs, done->registers);
                top_ = done - 1;
                return rv;
              }
              if constexpr (Instrumented)
                if (done->instrumented) report_return(*done, result);
              done->return_dst->assign_raw(std::move(result).into_raw());
              stack_.pop(done->regs, done->registers);
              ip = done->return_ip;
              top_ = done - 1;
              regs = done[-1].regs;
            }
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(goto_) {
            ip = ip->to.code.entry;
            KILN_VM_NEXT();
          }
          KILN_VM_HANDLER(if_) {
            {
              const value& cond = slot(regs, ip->a);
              if (!cond.is_int() && !cond.is_bool()) [[unlikely]]
                bad_condition(cond);
              // An int's or a bool's payload is nonzero exactly when the condition holds.
              const bool taken = cond.is_int() ? cond.raw_bits() != 0 : cond.as_bool();
              ip = taken ? ip + 1 : ip->to.code.entry;
            }
            KILN_VM_NEXT();
          }
        }
      }
    } catch (const vm_error& e) {
      // The exception being handled stays nested inside the new one (std::rethrow_if_nested), so
      // that what a native function or an instrument threw can be recovered: a binding to another
      // language raises its own exception again.
      if (!e.located()) std::throw_with_nested(vm_error(trace(ip, base, e.what()), true));
      // From a nested invocation: add this loop's part of the call stack.
      std::throw_with_nested(vm_error(std::string(e.what()) + call_stack(ip, base, true), true));
    } catch (const std::exception& e) {
      std::throw_with_nested(vm_error(trace(ip, base, e.what()), true));
    }
#if KILN_VM_COMPUTED_GOTO
    __builtin_unreachable();
#endif
#undef KILN_VM_DISPATCH
#undef KILN_VM_HANDLER
#undef KILN_VM_NEXT
  }
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#undef KILN_VM_INTERNAL_OPS

  /// Instrumented bytecode call: reports it and, unless skipped, saves its arguments for the
  /// after-report. False when the instrument skips the call.
  bool instrument_bytecode_call(const op& o, const value* regs, bool& instrumented) {
    instrument_fn* const to = instrument_.get();
    if (!to) [[unlikely]]  // removed while running: the call runs unreported
      return true;
    std::vector<const value*> argv(o.nargs);
    for (std::uint32_t i = 0; i < o.nargs; ++i) argv[i] = &resolve_operand(o.args[i], regs);
    const call_args args(argv.data(), o.nargs);
    if ((*to)(function_value(o.a), exec_->functions[o.a].name, true, value(), args) == instrument_action::skip_run)
      return false;
    auto& saved = instrument_args_.emplace_back();
    saved.to = to;
    for (std::uint32_t i = 0; i < o.nargs; ++i) saved.args.push_back(args[i]);
    instrumented = true;
    return true;
  }

  std::shared_ptr<const executable> exec_;
  vm_options options_;
  std::vector<object_ptr<runtime::allocator>> allocators_;
  std::vector<callee> callees_;
  std::size_t num_functions_ = 0;
  std::vector<value> literals_;  ///< constants, then the function pool, then %vm, then immediates
  std::vector<std::shared_ptr<void>> compiled_state_;  ///< per compiled function, its generated code's state
  std::vector<op> ops_;
  std::vector<call_operand> operands_;
  detail::string_map<std::size_t> index_;
  std::unique_ptr<frame[]> frames_;  ///< [0] is the idle sentinel; frames are 1..max_call_depth
  frame* top_ = nullptr;             ///< the current frame
  frame* frames_end_ = nullptr;
  register_stack stack_;
  std::size_t depth_ = 0;
  std::unique_ptr<instrument_fn> instrument_;  ///< on the heap: it must not move while it runs
  std::vector<std::unique_ptr<instrument_fn>> retired_instruments_;  ///< replaced while running; dropped when the outermost call returns
  /// A bytecode call reported to an instrument: the instrument, and the arguments it is shown again after the call.
  struct reported_call {
    instrument_fn* to = nullptr;
    std::vector<value> args;
  };
  std::vector<reported_call> instrument_args_;
  std::atomic<std::thread::id> owner_{};           ///< the thread using the machine; none when idle
  std::atomic<std::uint32_t> running_{no_function};  ///< the outermost function being run, for the busy message
  detail::string_map<std::vector<value>> inputs_;
  detail::string_map<value> outputs_;
  detail::string_map<saved_call> saved_;
};

template <class... Args>
value function_handle::operator()(Args&&... args) const {
  const value vals[] = {value(), value(std::forward<Args>(args))...};
  return call(std::span<const value>(vals + 1, sizeof...(Args)));
}
__attribute__((always_inline)) inline value function_handle::call(std::span<const value> args) const {
  if (saved_) [[unlikely]]
    return vm_->call_saved(saved_->name, *saved_, args);
  return vm_->call_function(index_, args);
}

}  // namespace kiln::vm
