// SPDX-License-Identifier: Apache-2.0
/// \file
/// Native functions: typed C++ callables made callable from bytecode, and the registry the VM
/// resolves function names in (the design's global PackedFunc registry).
///
///     registry.add("less", [](std::int64_t a, std::int64_t b) { return a < b; });
///     registry.add("scale", [](tensor x, double s) -> tensor { ... });
///     registry.add("sum_all", [](call_args rest) { ... });  // any number of arguments
///
/// Parameters convert from register values by type: integers (range-checked), `bool`, floating
/// point (ints convert), `std::string`/`std::string_view`, `runtime::tensor`, `shape_vector`,
/// `std::span<const value>` (a tuple), `vm_context&` (the `%vm` argument), `const value&` (as is),
/// `object_ptr<const T>` (users' objects), and a last `call_args` taking the remaining arguments.
/// Results convert back the same way; `void` gives null. A wrong count or kind of argument throws
/// `value_error` naming the function, the argument, the expected and the actual kind.
///
/// A typed native has two entries: `fn`, over `call_args` (calls from C++, closures, the
/// instrumented loop), and, for a fixed arity, `direct`, which the VM's run loop calls with the
/// Call's operands and the caller's registers, skipping the pointer array and the count check
/// (the VM checked the count at load). Both check kinds the same way; a bad argument is reported
/// from a cold path, so the common path has no exception-handling frame.
///
/// Compiled functions (the design's kVMTIRFunc) are registered with `add_compiled(name, f)`
/// under "__vmtir__<name>", where `f(vm_context&, std::span<value> registers)` receives the
/// register file with the arguments in registers 0..N-1.
#pragma once

#include <kiln/support/strings.hpp>
#include <kiln/vm/context.hpp>
#include <kiln/vm/value.hpp>

#include <concepts>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kiln::vm {

namespace detail {

template <class T>
inline constexpr bool always_false = false;

/// Reads a register value as parameter type `T`: `accepts(v)` says whether `get(v)` succeeds
/// (the fast path checks it first), `get(v)` converts or throws `value_error`.
template <class T>
struct from_value {
  static_assert(always_false<T>,
                "kiln::vm::make_native: unsupported parameter type; use an integer, bool, float or double, "
                "std::string, std::string_view, runtime::tensor, shape_vector, std::span<const value>, vm_context&, "
                "const value&, object_ptr<const T> or a last call_args");
};
template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
struct from_value<T> {
  static bool accepts(const value& v) noexcept { return v.is_int() && std::in_range<T>(v.raw_bits()); }
  static T get(const value& v) {
    const std::int64_t i = v.as_int();
    if constexpr (!std::is_same_v<T, std::int64_t>)
      if (!std::in_range<T>(i)) throw value_error("kiln::vm::value: " + std::to_string(i) + " is out of range");
    return T(i);
  }
};
template <>
struct from_value<bool> {
  static bool accepts(const value& v) noexcept { return v.is_bool(); }
  static bool get(const value& v) { return v.as_bool(); }
};
template <std::floating_point T>
struct from_value<T> {
  static bool accepts(const value& v) noexcept { return v.is_float() || v.is_int(); }
  static T get(const value& v) { return T(v.as_float()); }
};
template <>
struct from_value<std::string> {
  static bool accepts(const value& v) noexcept { return v.is_string(); }
  static const std::string& get(const value& v) { return v.as_string(); }
};
template <>
struct from_value<std::string_view> {
  static bool accepts(const value& v) noexcept { return v.is_string(); }
  static std::string_view get(const value& v) { return v.as_string(); }
};
template <>
struct from_value<tensor> {
  static bool accepts(const value& v) noexcept { return v.is_tensor(); }
  static tensor get(const value& v) { return v.as_tensor(); }
};
template <>
struct from_value<shape_vector> {
  static bool accepts(const value& v) noexcept { return v.is_shape(); }
  static const shape_vector& get(const value& v) { return v.as_shape(); }
};
template <>
struct from_value<std::span<const value>> {
  static bool accepts(const value& v) noexcept { return v.is_tuple(); }
  static std::span<const value> get(const value& v) { return v.as_tuple(); }
};
template <>
struct from_value<vm_context> {
  static bool accepts(const value& v) noexcept { return v.kind() == value_kind::vm; }
  static vm_context& get(const value& v) { return v.as_vm(); }
};
template <>
struct from_value<value> {
  static bool accepts(const value&) noexcept { return true; }
  static const value& get(const value& v) noexcept { return v; }
};
template <class T>
struct from_value<object_ptr<const T>> {
  static bool accepts(const value& v) noexcept { return v.holds_object() && dynamic_cast<const T*>(&v.as_object()) != nullptr; }
  static object_ptr<const T> get(const value& v) { return v.as_object<T>(); }
};

template <class T>
using param_t = std::remove_cvref_t<T>;

template <class R>
value to_value(R&& r) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<T, value>) return std::forward<R>(r);
  else if constexpr (std::is_same_v<T, shape_vector>) return value::shape(std::forward<R>(r));
  else if constexpr (std::is_convertible_v<R, value>) return value(std::forward<R>(r));
  else if constexpr (requires { object_ptr<const object>(r); }) return value::from_object(std::forward<R>(r));
  else static_assert(always_false<R>, "kiln::vm::make_native: the result type cannot be stored in a register value");
}

/// Parameter and result types of a callable with one non-template call operator.
template <class F>
struct signature : signature<decltype(&F::operator())> {};
template <class R, class... Args>
struct signature<R (*)(Args...)> {
  using result = R;
  using params = std::tuple<Args...>;
};
template <class R, class... Args>
struct signature<R(Args...)> : signature<R (*)(Args...)> {};
template <class C, class R, class... Args>
struct signature<R (C::*)(Args...) const> : signature<R (*)(Args...)> {};
template <class C, class R, class... Args>
struct signature<R (C::*)(Args...)> : signature<R (*)(Args...)> {};
template <class C, class R, class... Args>
struct signature<R (C::*)(Args...) const noexcept> : signature<R (*)(Args...)> {};
template <class C, class R, class... Args>
struct signature<R (C::*)(Args...) noexcept> : signature<R (*)(Args...)> {};
template <class R, class... Args>
struct signature<R (*)(Args...) noexcept> : signature<R (*)(Args...)> {};

template <class F>
concept has_signature = requires { typename signature<std::remove_cvref_t<F>>::params; };

/// A Call's arguments as the VM's direct entry receives them.
struct operand_args {
  const value* regs;
  const call_operand* operands;
  const value& operator[](std::size_t i) const noexcept { return resolve_operand(operands[i], regs); }
};

template <class F>
struct typed_native {
  F f;
  std::string name;

  using sig = signature<F>;
  using params = typename sig::params;
  static constexpr std::size_t count = std::tuple_size_v<params>;
  static constexpr bool variadic = [] {
    if constexpr (count == 0) return false;
    else return std::is_same_v<param_t<std::tuple_element_t<count - 1, params>>, call_args>;
  }();
  static constexpr std::size_t fixed = variadic ? count - 1 : count;

  [[noreturn]] void bad_arity(std::size_t got) const {
    throw value_error("kiln::vm: native function '" + name + "' takes " + (variadic ? "at least " : "") +
                      std::to_string(fixed) + " arguments, got " + std::to_string(got));
  }
  // `Args` is `call_args` (calls from C++, closures, the instrumented loop) or `operand_args`
  // (the VM's direct entry): both index to a `const value&`, and both are two pointers, passed by
  // value so that they stay in machine registers.
  template <std::size_t I, class Args>
  static bool accepts(const Args& a) noexcept {
    using P = param_t<std::tuple_element_t<I, params>>;
    if constexpr (std::is_same_v<P, call_args>) return true;
    else return from_value<P>::accepts(a[I]);
  }
  template <std::size_t I, class Args>
  static decltype(auto) arg(const Args& a) {
    using P = param_t<std::tuple_element_t<I, params>>;
    if constexpr (std::is_same_v<P, call_args>) return a.drop_front(I);
    else return from_value<P>::get(a[I]);
  }
  /// Throws the error of argument `I` if it is not accepted (the cold path: off the call's frame).
  template <std::size_t I, class Args>
  void explain(const Args& a) const {
    if (accepts<I>(a)) return;
    std::string why = "cannot convert " + std::string(kiln::vm::name(a[I].kind()));
    try {
      (void)arg<I>(a);
    } catch (const value_error& e) {
      why = e.what();
      if (why.starts_with("kiln::vm::value: ")) why.erase(0, 17);
    }
    throw value_error("kiln::vm: native function '" + name + "', argument " + std::to_string(I) + ": " + why);
  }
  template <class Args, std::size_t... I>
  [[noreturn]] __attribute__((noinline, cold)) void bad_arguments([[maybe_unused]] Args a, std::index_sequence<I...>) const {
    (explain<I>(a), ...);  // left to right: the first bad argument is named
    throw value_error("kiln::vm: native function '" + name + "': bad arguments");
  }
  template <class Args, std::size_t... I>
  raw_value call([[maybe_unused]] Args a, std::index_sequence<I...> seq) const {
    if (!(accepts<I>(a) && ...)) [[unlikely]]
      bad_arguments(a, seq);
    // Braced initialisation converts the arguments left to right (a conversion that still throws,
    // an allocation say, names no argument).
    std::tuple<decltype(arg<I>(a))...> converted{arg<I>(a)...};
    if constexpr (std::is_void_v<typename sig::result>) {
      f(std::get<I>(std::move(converted))...);
      return raw_value{0, value_kind::null};
    } else {
      return to_value(f(std::get<I>(std::move(converted))...)).into_raw();
    }
  }
  static raw_value invoke(const void* state, call_args a) {
    const auto& self = *static_cast<const typed_native*>(state);
    if (variadic ? a.size() < fixed : a.size() != fixed) [[unlikely]]
      self.bad_arity(a.size());
    return self.call(a, std::make_index_sequence<count>{});
  }
  /// The VM's direct entry (fixed arity only; the VM has checked the count).
  static raw_value invoke_direct(const void* state, const value* regs, const call_operand* operands) {
    return static_cast<const typed_native*>(state)->call(operand_args{regs, operands}, std::make_index_sequence<count>{});
  }
};

}  // namespace detail

/// A native function from a typed callable (see this header's comment for the parameter types).
template <class F>
native_function make_native(std::string name, F f) {
  static_assert(detail::has_signature<F>,
                "kiln::vm::make_native: the callable needs one non-template call operator (a generic lambda's "
                "parameter types cannot be deduced; spell them out)");
  using state = detail::typed_native<F>;
  auto s = std::make_shared<const state>(state{std::move(f), std::move(name)});
  native_function n;
  n.fn = &state::invoke;
  if constexpr (!state::variadic) n.direct = &state::invoke_direct;
  n.state = s.get();
  n.owner = std::move(s);
  n.arity = state::variadic ? -1 : int(state::fixed);
  return n;
}

/// A compiled function: generated code that runs a whole function on its register file.
struct compiled_function {
  using fn_type = value (*)(const void* state, vm_context& vm, std::span<value> registers);
  fn_type fn = nullptr;
  const void* state = nullptr;
  std::shared_ptr<const void> owner;
};

/// Generated code an executable carries (`executable::code`): its compiled functions by name.
/// Each function's `owner` keeps alive what it needs (its literals, the library it was loaded
/// from), so copies of the executable share it safely.
class native_code {
public:
  /// Adds (or replaces) compiled function `name`.
  void add(std::string name, compiled_function f) { functions_[std::move(name)] = std::move(f); }
  const compiled_function* find(std::string_view name) const noexcept {
    auto it = functions_.find(name);
    return it == functions_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (auto& [n, f] : functions_) out.push_back(n);
    return out;
  }
  std::size_t size() const noexcept { return functions_.size(); }

private:
  std::map<std::string, compiled_function, std::less<>> functions_;
};

/// Names to native and compiled functions. Adding and finding are thread-safe; a VM copies
/// what it needs when it is made, so later changes do not affect running VMs.
class function_registry {
public:
  static constexpr std::string_view compiled_prefix = "__vmtir__";

  /// Registers a typed callable (or a ready `native_function`) under `name`, replacing any other.
  template <class F>
  void add(std::string name, F f) {
    native_function n;
    if constexpr (std::is_same_v<F, native_function>) n = std::move(f);
    else n = make_native(name, std::move(f));
    std::lock_guard lock(mutex_);
    natives_[std::move(name)] = std::move(n);
  }
  /// Registers generated code for the compiled function `name` (stored as "__vmtir__<name>").
  template <class F>
    requires std::is_invocable_r_v<value, const F&, vm_context&, std::span<value>>
  void add_compiled(std::string_view name, F f) {
    auto s = std::make_shared<const F>(std::move(f));
    compiled_function c;
    c.fn = [](const void* st, vm_context& vm, std::span<value> regs) -> value {
      return (*static_cast<const F*>(st))(vm, regs);
    };
    c.state = s.get();
    c.owner = std::move(s);
    std::lock_guard lock(mutex_);
    compiled_[std::string(compiled_prefix).append(name)] = std::move(c);
  }

  std::optional<native_function> find(std::string_view name) const {
    std::lock_guard lock(mutex_);
    auto it = natives_.find(name);
    if (it == natives_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<compiled_function> find_compiled(std::string_view name) const {
    std::lock_guard lock(mutex_);
    auto it = compiled_.find(std::string(compiled_prefix).append(name));
    if (it == compiled_.end()) return std::nullopt;
    return it->second;
  }
  bool remove(std::string_view name) {
    std::lock_guard lock(mutex_);
    auto it = natives_.find(name);
    if (it == natives_.end()) return false;
    natives_.erase(it);
    return true;
  }
  /// Every registered native name, sorted.
  std::vector<std::string> names() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (auto& [n, f] : natives_) out.push_back(n);
    return out;
  }

private:
  mutable std::mutex mutex_;
  std::map<std::string, native_function, std::less<>> natives_;
  std::map<std::string, compiled_function, std::less<>> compiled_;
};

}  // namespace kiln::vm
