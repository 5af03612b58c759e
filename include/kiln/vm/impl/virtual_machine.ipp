// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/vm/virtual_machine.hpp>'s public interface: construction, invoking,
// the stateful interface, saved functions, timing, instruments, the vm_context services, and the
// claim that lets one caller at a time in. Included by that header.
#pragma once

#include <kiln/vm/virtual_machine.hpp>

namespace kiln::vm {

// ---- one caller at a time ----------------------------------------------------------------------

/// Claims the machine for the calling thread for the length of one public call, or throws when
/// another thread has it. Nested uses on the thread that has it (a native or an instrument
/// calling back into the machine) pass. Leaving the outermost use drops the instruments retired
/// while it ran.
class virtual_machine::exclusive_use {
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
void virtual_machine::throw_busy() const {
  const std::uint32_t f = running_.load(std::memory_order_relaxed);
  const std::string what = f >= num_functions_ ? "in use" : "running '" + exec_->functions[f].name + "'";
  throw usage_error("kiln::vm: this virtual_machine is already " + what +
                    " on another thread; use one virtual_machine per thread (a machine serves one caller at a time)");
}

// ---- construction ------------------------------------------------------------------------------

inline virtual_machine::virtual_machine(executable e, vm_options options, const function_registry& registry)
    : virtual_machine(std::make_shared<const executable>(std::move(e)), std::move(options), registry) {}

inline virtual_machine::virtual_machine(std::shared_ptr<const executable> e, vm_options options,
                                        const function_registry& registry)
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

// ---- invoking ----------------------------------------------------------------------------------

inline value virtual_machine::invoke_span(std::string_view name, std::span<const value> args) {
  if (auto it = saved_.find(name); it != saved_.end()) return call_saved(name, it->second, args);
  return call_function(function_index(name), args);
}

inline function_handle virtual_machine::get_function(std::string_view name) {
  const exclusive_use use(*this, nullptr);
  if (auto it = saved_.find(name); it != saved_.end()) return function_handle(*this, it->second);
  return function_handle(*this, function_index(name));
}

inline bool virtual_machine::has_function(std::string_view name) const {
  const exclusive_use use(const_cast<virtual_machine&>(*this), nullptr);
  return index_.find(name) != index_.end() || saved_.find(name) != saved_.end();
}

inline value virtual_machine::call_saved(std::string_view name, const detail::saved_call& s, std::span<const value> args) {
  if (!args.empty())
    throw usage_error("kiln::vm: saved function '" + std::string(name) + "' has its arguments bound; call it with none");
  value r = call_function(s.index, s.args);
  return s.include_return ? r : value();
}

__attribute__((always_inline)) inline value virtual_machine::call_function(std::size_t index, std::span<const value> args) {
  const exclusive_use use(*this, index);
  if (index >= num_functions_) [[unlikely]]
    throw usage_error("kiln::vm: no function " + std::to_string(index));
  const callee& c = callees_[index];
  if (c.kind == function_kind::native) [[unlikely]]
    return call_native_from_cpp(c, args);
  return enter_with_args(c, "kiln::vm: function", args.size(), [&](std::size_t i) -> const value& { return args[i]; });
}

inline std::size_t virtual_machine::function_index(std::string_view name) const {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& f : exec_->functions) names.push_back(f.name);
  for (const auto& [n, s] : saved_) names.push_back(n);
  throw usage_error("kiln::vm: no function '" + std::string(name) + "' in the executable" +
                    kiln::detail::did_you_mean(name, names));
}

template <class... Args>
inline value function_handle::operator()(Args&&... args) const {
  const value vals[] = {value(), value(std::forward<Args>(args))...};
  return call(std::span<const value>(vals + 1, sizeof...(Args)));
}

__attribute__((always_inline)) inline value function_handle::call(std::span<const value> args) const {
  if (saved_) [[unlikely]]
    return vm_->call_saved(saved_->name, *saved_, args);
  return vm_->call_function(index_, args);
}

// ---- stateful interface and saved functions ----------------------------------------------------

inline void virtual_machine::set_input_span(std::string_view name, std::span<const value> args) {
  const exclusive_use use(*this, nullptr);
  const std::size_t index = function_index(name);
  if (callees_[index].kind != function_kind::native) check_arity(callees_[index], "kiln::vm::set_input: function", args.size());
  inputs_[std::string(name)] = std::vector<value>(args.begin(), args.end());
}

inline void virtual_machine::invoke_stateful(std::string_view name) {
  const std::size_t index = function_index(name);  // an unknown function is named as such first
  const exclusive_use use(*this, index);
  auto it = inputs_.find(name);
  if (it == inputs_.end())
    throw usage_error("kiln::vm::invoke_stateful: no inputs were set for '" + std::string(name) + "' (call set_input first)");
  outputs_[std::string(name)] = call_function(index, it->second);
}

inline const value& virtual_machine::get_outputs(std::string_view name) const {
  const exclusive_use use(const_cast<virtual_machine&>(*this), nullptr);
  auto it = outputs_.find(name);
  if (it == outputs_.end())
    throw usage_error("kiln::vm::get_outputs: '" + std::string(name) + "' has not been run with invoke_stateful");
  return it->second;
}

inline void virtual_machine::save_function_span(std::string_view name, std::string saved_name, save_options options,
                                                std::span<const value> args) {
  const exclusive_use use(*this, nullptr);
  const std::size_t index = function_index(name);
  if (saved_name.empty()) throw usage_error("kiln::vm::save_function: the saved name is empty");
  auto& slot = saved_[saved_name];
  slot.name = std::move(saved_name);
  slot.index = index;  // in place: handles to this name stay valid
  slot.args = std::vector<value>(args.begin(), args.end());
  slot.include_return = options.include_return;
}

// ---- timing and instruments --------------------------------------------------------------------

inline std::function<timing_result(std::span<const value>)> virtual_machine::time_evaluator(std::string_view name, int number,
                                                                                            int repeat, double min_repeat_ms) {
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
        throw usage_error(
            "kiln::vm::time_evaluator: 'invoke_stateful' is timed with one argument, the name of a "
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

inline void virtual_machine::set_instrument(instrument_fn f) {
  const exclusive_use use(*this, nullptr);
  auto next = f ? std::make_unique<instrument_fn>(std::move(f)) : nullptr;
  if (depth_ > 0 && instrument_) retired_instruments_.push_back(std::move(instrument_));
  instrument_ = std::move(next);
}

// ---- vm_context --------------------------------------------------------------------------------

inline runtime::allocator& virtual_machine::allocator_for(std::int64_t device_index) {
  if (device_index == -1) device_index = 0;
  if (device_index < 0 || device_index >= std::int64_t(allocators_.size()))
    throw usage_error("kiln::vm: device index " + std::to_string(device_index) + " is out of range; the VM has " +
                      std::to_string(allocators_.size()) + " devices");
  return *allocators_[std::size_t(device_index)];
}

inline value virtual_machine::call(const value& func, call_args args) {
  const exclusive_use use(*this, nullptr);
  const closure_obj& c = func.as_closure();
  if (!c.is_native() && c.owner != exec_.get())
    throw usage_error("kiln::vm: closure '" + c.name + "' belongs to another executable");
  const std::size_t n = args.size() + c.bound.size();
  auto arg = [&](std::size_t i) -> const value& { return i < args.size() ? args[i] : c.bound[i - args.size()]; };
  if (c.is_native()) return with_pointers(n, arg, c.native);
  return enter_with_args(callees_[std::size_t(c.func_index)], "kiln::vm: closure", n, arg);
}

inline const value& virtual_machine::constant(std::size_t index) const {
  if (index >= exec_->constants.size()) throw_bad_literal("constant", index, exec_->constants.size());
  return literals_[index];
}

inline std::shared_ptr<void>& virtual_machine::compiled_state(std::size_t index) {
  if (index >= exec_->functions.size()) throw_bad_literal("function", index, exec_->functions.size());
  if (compiled_state_.size() != exec_->functions.size()) compiled_state_.resize(exec_->functions.size());
  return compiled_state_[index];
}

inline const value& virtual_machine::function(std::size_t index) const {
  if (index >= exec_->functions.size()) throw_bad_literal("function", index, exec_->functions.size());
  return literals_[exec_->constants.size() + index];
}

void virtual_machine::throw_bad_literal(const char* what, std::size_t index, std::size_t size) {
  throw usage_error(std::string("kiln::vm: ") + what + " " + std::to_string(index) + " requested; the executable has " +
                    std::to_string(size));
}

inline runtime::allocator_stats virtual_machine::allocator_stats(std::int64_t device_index) {
  const exclusive_use use(*this, nullptr);
  return allocator_for(device_index).stats();
}

}  // namespace kiln::vm
