// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::vm::vm_context`: what native functions may ask of the VM that calls them. The design
/// passes the VM itself as an argument (`%vm`, the special `vm_register`); a native function
/// receives it as `vm_context&`.
#pragma once

#include <kiln/runtime/allocator.hpp>
#include <kiln/vm/value.hpp>

#include <functional>
#include <memory>
#include <string_view>

namespace kiln::vm {

/// An error raised while running a program, with where it happened (the bytecode instruction or
/// the compiled function's binding) and the call stack.
class vm_error : public error {
public:
  using error::error;
  vm_error(const std::string& what, bool located) : error(what), located_(located) {}
  /// Whether the message already names the failing instruction or binding.
  bool located() const noexcept { return located_; }

private:
  bool located_ = false;
};

/// What an instrument tells the VM before a call.
enum class instrument_action { no_op = 0, skip_run = 1 };

/// Called before and after every Call: the callee (a closure value), its name, whether the call is
/// about to run, the result (null before) and the arguments. Returning `skip_run` before a call
/// skips it; its destination register receives null. (Set with `virtual_machine::set_instrument`.)
using instrument_fn =
    std::function<instrument_action(const value& func, std::string_view symbol, bool before_run, const value& ret, call_args args)>;

class vm_context {
public:
  /// The allocator of device `index` (0 is the CPU, always present).
  virtual runtime::allocator& allocator_for(std::int64_t device_index) = 0;
  virtual std::int64_t num_devices() const noexcept = 0;
  /// Calls `func` — a closure of a native function or of a function of this VM — with `args`
  /// (the closure's bound arguments are appended).
  virtual value call(const value& func, call_args args) = 0;
  /// Constant `index` of the executable (for compiled functions).
  virtual const value& constant(std::size_t index) const = 0;
  /// Entry `index` of the executable's function table as a closure (for compiled functions, which
  /// call natives and other functions through it). A context without a function table throws.
  virtual const value& function(std::size_t index) const;
  /// A slot per function of the executable where its generated code keeps state across calls on
  /// this VM (tensor views on its arena, made once); empty at first, dropped with the VM. A
  /// context without such slots throws.
  virtual std::shared_ptr<void>& compiled_state(std::size_t function_index);
  /// The instrument set on the VM, or null: compiled functions generated with
  /// `cpp_codegen_options::instrumented` report their calls to it as the bytecode's run loop does.
  virtual const instrument_fn* instrument() const noexcept { return nullptr; }

protected:
  vm_context() = default;
  vm_context(const vm_context&) = default;
  vm_context& operator=(const vm_context&) = default;
  ~vm_context() = default;
};

inline const value& vm_context::function(std::size_t index) const {
  throw error("kiln::vm::vm_context: function " + std::to_string(index) + " requested, but this context has no function table");
}

inline std::shared_ptr<void>& vm_context::compiled_state(std::size_t function_index) {
  throw error("kiln::vm::vm_context: state for function " + std::to_string(function_index) + " requested, but this context keeps none");
}

}  // namespace kiln::vm
