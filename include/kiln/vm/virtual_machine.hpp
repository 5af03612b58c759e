// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::vm::virtual_machine`: runs an executable's bytecode (the design's `VirtualMachine`).
///
/// Loading (the constructor) validates the executable, gives every device an allocator (pooled by
/// default), resolves native and compiled functions in a `function_registry`, checks the arity of
/// every native call it can, loads the constants, and *pre-decodes* the bytecode into ops
/// (vm/decoded_program.hpp, vm/impl/decode.ipp): each Call knows its callee's kind and entry (a
/// native's function pointer and state are in the op), each argument is a register's byte offset
/// or a literal's address (constants, functions, immediates and `%vm`), each jump an op pointer.
/// The run loop (vm/impl/run_loop.ipp) then does no decoding, no lookups and no allocation:
///
///     call_native_direct  one indirect call to the native's direct entry, which reads its
///                         arguments from the op; the result comes back in registers into dst
///     call_native    the same through an array of argument pointers (natives without a direct
///                    entry: variadic or hand-written ones)
///     call_bytecode  push a frame (from one array) and its registers (from a chunked stack that
///                    never moves, vm/register_stack.hpp), construct the arguments in place
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
///
/// This header declares the machine; the definitions are in vm/impl/: virtual_machine.ipp (the
/// public interface), decode.ipp (loading) and run_loop.ipp (entering and running bytecode).
#pragma once

#include <kiln/runtime/allocator.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/vm/builtins.hpp>
#include <kiln/vm/context.hpp>
#include <kiln/vm/decoded_program.hpp>
#include <kiln/vm/executable.hpp>
#include <kiln/vm/native.hpp>
#include <kiln/vm/register_stack.hpp>

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
  std::int64_t num_devices = 1;         ///< devices 0..N-1 (all CPU today); 0 is used for shapes
  std::size_t max_call_depth = 10000;   ///< frames on the bytecode call stack (at most 2^22)
  std::size_t max_reentry_depth = 256;  ///< nested run loops (natives calling back into the VM)
};

/// Per-run times from `virtual_machine::time_evaluator`, in seconds.
struct timing_result {
  std::vector<double> results;  ///< mean time of one call in each repeat
  int number = 0;               ///< calls per repeat (after min_repeat_ms adjustment)
  double mean() const {
    return results.empty() ? 0 : std::accumulate(results.begin(), results.end(), 0.0) / double(results.size());
  }
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

/// A handle to one function of a VM, callable from C++ without a name lookup.
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
  explicit virtual_machine(executable e, vm_options options = {}, const function_registry& registry = global_registry());
  explicit virtual_machine(std::shared_ptr<const executable> e, vm_options options = {},
                           const function_registry& registry = global_registry());
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
  value invoke_span(std::string_view name, std::span<const value> args);
  /// A handle that calls `name` — a function of the executable or a name given to
  /// `save_function` — without looking it up again (the design's `vm["name"]`).
  function_handle get_function(std::string_view name);
  /// True for a function of the executable or a saved name.
  bool has_function(std::string_view name) const;

  /// Calls a saved function: no arguments allowed (they are bound), null unless it includes its return.
  value call_saved(std::string_view name, const detail::saved_call& s, std::span<const value> args);
  /// Calls the function at `index` of the function table. (Always inlined: a call from C++ is then
  /// one function deep, as its figures in docs/performance.md assume.)
  __attribute__((always_inline)) value call_function(std::size_t index, std::span<const value> args);

  // ---- stateful interface ---------------------------------------------------------------------

  /// Stores the arguments for `invoke_stateful(name)`.
  template <class... Args>
  void set_input(std::string_view name, Args&&... args) {
    const value vals[] = {value(std::forward<Args>(args))..., value()};
    set_input_span(name, std::span<const value>(vals, sizeof...(Args)));
  }
  /// `set_input` with the arguments in a span (for bindings that gather them at run time).
  void set_input_span(std::string_view name, std::span<const value> args);
  /// Runs `name` on the arguments `set_input` stored, keeping the result for `get_outputs`.
  void invoke_stateful(std::string_view name);
  /// The result of the last `invoke_stateful(name)`.
  /// The reference stays valid until the next `invoke_stateful(name)`.
  const value& get_outputs(std::string_view name) const;

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
  void save_function_span(std::string_view name, std::string saved_name, save_options options, std::span<const value> args);

  /// Times `name` as TVM's time_evaluator does: each of `repeat` measurements runs the function
  /// `number` times and records the mean; when a measurement takes less than `min_repeat_ms`,
  /// `number` grows and the measurement is redone. One unmeasured call warms up first.
  /// `time_evaluator("invoke_stateful")` times the stateful interface: its argument is the name
  /// of a function whose inputs `set_input` stored.
  std::function<timing_result(std::span<const value>)> time_evaluator(std::string_view name, int number = 10, int repeat = 1,
                                                                      double min_repeat_ms = 0);

  /// Calls `f` before and after every Call instruction; an empty function removes it.
  ///
  /// Replacing or removing the instrument while the machine runs (from inside the instrument, or
  /// from a native it calls) is safe: the old instrument stays alive until the outermost call
  /// returns, a call in progress reports its end to the instrument that saw it start, and calls
  /// that start later go to the new one.
  void set_instrument(instrument_fn f);

  // ---- vm_context -----------------------------------------------------------------------------

  /// Device `device_index`'s allocator; -1 is the host (TVM's convention), device 0 here.
  runtime::allocator& allocator_for(std::int64_t device_index) override;
  std::int64_t num_devices() const noexcept override { return std::int64_t(allocators_.size()); }
  value call(const value& func, call_args args) override;
  const value& constant(std::size_t index) const override;
  std::shared_ptr<void>& compiled_state(std::size_t index) override;
  const value& function(std::size_t index) const override;
  const instrument_fn* instrument() const noexcept override { return instrument_.get(); }

  /// The function pool entry (a closure) of function `index`.
  const value& function_value(std::size_t index) const { return literals_.at(exec_->constants.size() + index); }
  /// Statistics of device `index`'s allocator.
  runtime::allocator_stats allocator_stats(std::int64_t device_index = 0);
  /// Current bytecode frames (0 when idle).
  std::size_t call_depth() const noexcept { return std::size_t(top_ - frames_.get()); }

private:
  using op = decoded::op;
  using callee = decoded::callee;
  using frame = decoded::frame;
  using saved_call = detail::saved_call;
  using register_stack = detail::register_stack;

  static constexpr std::uint32_t no_function = std::uint32_t(-1);
  static constexpr std::size_t max_frames = std::size_t(1) << 22;

  // One caller at a time (impl/virtual_machine.ipp).
  class exclusive_use;
  [[noreturn]] __attribute__((noinline, cold)) inline void throw_busy() const;
  [[noreturn]] __attribute__((noinline, cold)) static inline void throw_bad_literal(const char* what, std::size_t index,
                                                                                    std::size_t size);
  std::size_t function_index(std::string_view name) const;

  // Loading (impl/decode.ipp).
  void init_devices();
  void init_frames();
  void init_function_pool(const function_registry& registry);
  void decode();

  // Entering and running (impl/run_loop.ipp).
  template <class Arg, class F>
  static value with_pointers(std::size_t n, Arg&& arg, F&& f);
  __attribute__((noinline)) static inline value call_native_from_cpp(const callee& c, std::span<const value> args);
  static void check_arity(const callee& c, std::string_view who, std::size_t n);
  [[noreturn]] __attribute__((noinline, cold)) static inline void arity_error(const callee& c, std::string_view who,
                                                                              std::size_t n);
  template <class Arg>
  value enter_with_args(const callee& c, std::string_view who, std::size_t n, Arg&& arg);
  template <class Fill>
  value enter(const callee& c, Fill&& fill);
  __attribute__((noinline)) inline void pop_frames(frame* keep) noexcept;
  [[noreturn]] __attribute__((noinline, cold)) inline void throw_depth() const;
  [[noreturn]] __attribute__((noinline, cold)) inline void throw_reentry() const;
  std::size_t pc_of(const op* ip) const noexcept { return std::size_t(ip - ops_.data()); }
  std::string trace(const op* ip, const frame* base, const std::string& what) const;
  std::string call_stack(const op* ip, const frame* base, bool with_top) const;
  [[noreturn]] __attribute__((noinline, cold)) static inline void bad_condition(const value& v);
  void report_return(const frame& done, const value& rv);
  template <bool Instrumented>
  void call_native(const op& o, call_args args, value& out);
  template <bool Instrumented>
  __attribute__((always_inline)) void call_native_gathered(const op& o, value* regs);
  template <bool Instrumented>
  __attribute__((noinline)) inline void call_native_long(const op& o, value* regs);
  template <bool Instrumented>
  value run(frame* const base, const op* entry);
  bool instrument_bytecode_call(const op& o, const value* regs, bool& instrumented);

  std::shared_ptr<const executable> exec_;
  vm_options options_;
  std::vector<object_ptr<runtime::allocator>> allocators_;
  std::vector<callee> callees_;
  std::size_t num_functions_ = 0;
  std::vector<value> literals_;                        ///< constants, then the function pool, then %vm, then immediates
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
  std::vector<std::unique_ptr<instrument_fn>>
      retired_instruments_;  ///< replaced while running; dropped when the outermost call returns
  /// A bytecode call reported to an instrument: the instrument, and the arguments it is shown again after the call.
  struct reported_call {
    instrument_fn* to = nullptr;
    std::vector<value> args;
  };
  std::vector<reported_call> instrument_args_;
  std::atomic<std::thread::id> owner_{};             ///< the thread using the machine; none when idle
  std::atomic<std::uint32_t> running_{no_function};  ///< the outermost function being run, for the busy message
  detail::string_map<std::vector<value>> inputs_;
  detail::string_map<value> outputs_;
  detail::string_map<saved_call> saved_;
};

}  // namespace kiln::vm

#include <kiln/vm/impl/decode.ipp>
#include <kiln/vm/impl/run_loop.ipp>
#include <kiln/vm/impl/virtual_machine.ipp>
