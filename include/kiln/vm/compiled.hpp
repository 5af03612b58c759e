// SPDX-License-Identifier: Apache-2.0
/// \file
/// What generated code (`codegen::cpp_codegen`, the design's compiled execution mode) is built
/// on: calls through the executable's function table with the error context the interpreter
/// gives, tuples, conditions, and the glue that turns a generated C++ function into a
/// `compiled_function`.
///
/// A compiled function has the signature the VM gives generated code (the design's kVMTIRFunc):
/// it receives the VM and its register file, with the arguments in registers 0..N-1, and returns
/// its result. Generated functions also receive their literals (shapes, strings, numbers), made
/// once per executable when the code is attached, so that loading a library runs none of its code
/// before `load_module` has checked it.
///
/// Calls made inside a compiled function do not pass through the VM's run loop, so the VM's
/// instrument (`set_instrument`) sees the call of the compiled function, not the calls it makes
/// (as in TVM).
#pragma once

#include <kiln/version.hpp>
#include <kiln/vm/builtins.hpp>
#include <kiln/vm/context.hpp>
#include <kiln/vm/executable.hpp>
#include <kiln/vm/native.hpp>
#include <kiln/vm/value.hpp>

#include <concepts>
#include <cstdint>

#include <exception>
#include <tuple>
#include <type_traits>
#include <utility>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::vm::compiled {

/// Where a call in generated code is, for messages: the function and the binding.
struct site {
  const char* function;
  const char* binding;
};

namespace detail {

/// The name of function-table entry `index`, for messages.
inline std::string callee_name(const vm_context& vm, std::size_t index) {
  try {
    const value& f = vm.function(index);
    if (f.is_closure()) return f.as_closure().name;
  } catch (...) {
  }
  return "function " + std::to_string(index);
}

/// Rethrows the exception being handled with `at` added, as the interpreter locates a failing
/// instruction: "in 'f' at binding 'x' (call 'g'): what", or, for an error already located in a
/// callee, "\n  called from 'f' at binding 'x'" appended. The original stays nested.
[[noreturn]] __attribute__((noinline, cold)) inline void rethrow_at(const site& at, const std::string& callee) {
  const std::string where = std::string("kiln::vm: in '") + at.function + "' at binding '" + at.binding + "'";
  try {
    throw;
  } catch (const vm_error& e) {
    if (e.located()) std::throw_with_nested(vm_error(std::string(e.what()) + "\n  called from '" + at.function + "' at binding '" + at.binding + "'", true));
    std::throw_with_nested(vm_error(where + (callee.empty() ? "" : " (call '" + callee + "')") + ": " + e.what(), true));
  } catch (const std::exception& e) {
    std::throw_with_nested(vm_error(where + (callee.empty() ? "" : " (call '" + callee + "')") + ": " + e.what(), true));
  }
}

/// Calls `f`, a function-table entry: a native function without bound arguments (every kernel) as
/// the VM's run loop calls it, anything else through the VM.
__attribute__((always_inline)) inline value dispatch(vm_context& vm, const value& f, const call_args& a) {
  const closure_obj& c = f.as_closure();
  if (c.is_native() && c.bound.empty()) return value::from_raw(c.native.fn(c.native.state, a));
  return vm.call(f, a);
}

}  // namespace detail

/// Calls entry `index` of the executable's function table (a native function, or a bytecode or
/// compiled function of the same executable) with `args`.
template <class... V>
value call(vm_context& vm, std::size_t index, const site& at, const V&... args) {
  static_assert((std::is_same_v<V, value> && ...), "kiln::vm::compiled::call: arguments are register values");
  const value* ptrs[sizeof...(V) + 1] = {&args..., nullptr};
  try {
    return detail::dispatch(vm, vm.function(index), call_args(ptrs, sizeof...(V)));
  } catch (...) {
    detail::rethrow_at(at, detail::callee_name(vm, index));
  }
}

/// `call` in code generated with `cpp_codegen_options::instrumented`: when the VM has an instrument
/// (`set_instrument`), reports the call to it before and after, as the bytecode's run loop does;
/// a call the instrument skips gives null.
template <class... V>
value call_reported(vm_context& vm, std::size_t index, const site& at, const V&... args) {
  const instrument_fn* instrument = vm.instrument();
  if (!instrument) return call(vm, index, at, args...);
  const value* ptrs[sizeof...(V) + 1] = {&args..., nullptr};
  const call_args a(ptrs, sizeof...(V));
  const std::string symbol = detail::callee_name(vm, index);
  try {
    const value& f = vm.function(index);
    if ((*instrument)(f, symbol, true, value(), a) == instrument_action::skip_run) return value();
    value r = detail::dispatch(vm, f, a);
    (*instrument)(f, symbol, false, r, a);
    return r;
  } catch (...) {
    detail::rethrow_at(at, symbol);
  }
}

/// Calls the closure `f` (a function value) with `args`.
template <class... V>
value invoke(vm_context& vm, const value& f, const site& at, const V&... args) {
  const value* ptrs[sizeof...(V) + 1] = {&args..., nullptr};
  try {
    return vm.call(f, call_args(ptrs, sizeof...(V)));
  } catch (...) {
    detail::rethrow_at(at, f.is_closure() ? f.as_closure().name : std::string());
  }
}

namespace detail {

template <auto F, std::size_t... I>
raw_value call_direct(call_args a, const char* name, std::index_sequence<I...> seq) {
  using native = vm::detail::typed_native<decltype(F)>;
  if (!(native::template accepts<I>(a) && ...)) [[unlikely]]
    native{F, name}.bad_arguments(a, seq);
  std::tuple<decltype(native::template arg<I>(a))...> converted{native::template arg<I>(a)...};
  if constexpr (std::is_void_v<typename native::sig::result>) {
    F(std::get<I>(std::move(converted))...);
    return raw_value{0, value_kind::null};
  } else {
    return vm::detail::to_value(F(std::get<I>(std::move(converted))...)).into_raw();
  }
}

}  // namespace detail

/// Calls the C++ function `F` — a built-in, known when the code was generated — directly with
/// `args`, converting them as the registry's native function `name` would (the same checks, the
/// same messages).
template <auto F, class... V>
value direct(const site& at, const char* name, const V&... args) {
  static_assert((std::is_same_v<V, value> && ...), "kiln::vm::compiled::direct: arguments are register values");
  using native = vm::detail::typed_native<decltype(F)>;
  const value* ptrs[sizeof...(V) + 1] = {&args..., nullptr};
  const call_args a(ptrs, sizeof...(V));
  try {
    if constexpr (native::variadic ? sizeof...(V) < native::fixed : sizeof...(V) != native::fixed) {
      native{F, name}.bad_arity(sizeof...(V));
    } else {
      return value::from_raw(detail::call_direct<F>(a, name, std::make_index_sequence<native::count>{}));
    }
  } catch (...) {
    detail::rethrow_at(at, name);
  }
}

/// Whether `x` is a tensor of rank `ndim` and element type `dt`: what `vm.builtin.check_tensor_info`
/// checks, inline. Generated code calls the built-in only when this is false, so that a mismatch
/// is reported with the built-in's message.
inline bool is_tensor_of(const value& x, std::int64_t ndim, dtype dt) noexcept {
  if (!x.is_tensor()) return false;
  const runtime::tensor_node& t = x.tensor_ref();
  return std::int64_t(t.shape.size()) == ndim && t.type == dt;
}

/// Whether `x` (a tensor or a shape) has exactly the dimensions `dims`: a `vm.builtin.match_shape`
/// whose every dimension is static, inline. As for `is_tensor_of`, the built-in runs (and reports)
/// only when this is false.
template <std::integral... D>
bool has_shape(const value& x, D... dims) noexcept {
  const shape_vector* s = x.is_tensor() ? &x.tensor_ref().shape : x.is_shape() ? &x.as_shape() : nullptr;
  if (!s || s->size() != sizeof...(D)) return false;
  std::size_t i = 0;
  return (((*s)[i++] == std::int64_t(dims)) && ...);
}

/// Marks a function's per-VM arena in use for one call; a nested call of the same function on the
/// same VM (recursion) finds it in use (`nested`) and allocates its own.
class arena_guard {
public:
  explicit arena_guard(bool& busy) noexcept : busy_(busy), nested(busy) { busy_ = true; }
  ~arena_guard() {
    if (!nested) busy_ = false;
  }
  arena_guard(const arena_guard&) = delete;
  arena_guard& operator=(const arena_guard&) = delete;

private:
  bool& busy_;

public:
  const bool nested;
};

/// The per-VM state `State` of compiled function `index`, made on first use.
template <class State>
State& state_of(vm_context& vm, std::size_t index) {
  std::shared_ptr<void>& slot = vm.compiled_state(index);
  if (!slot) slot = std::make_shared<State>();
  return *static_cast<State*>(slot.get());
}

/// A tuple of `items`.
template <class... V>
value tuple(const V&... items) {
  return value::tuple(std::vector<value>{items...});
}

/// Field `i` of tuple `t` (what `vm.builtin.tuple_getitem` does).
inline value tuple_item(const value& t, std::int64_t i, const site& at) {
  try {
    std::span<const value> items = t.as_tuple();
    if (i < 0 || std::size_t(i) >= items.size())
      throw value_error("vm.builtin.tuple_getitem: index " + std::to_string(i) + " is out of range for a tuple of " + std::to_string(items.size()));
    return items[std::size_t(i)];
  } catch (...) {
    detail::rethrow_at(at, "");
  }
}

/// The truth of an `if` condition: an int or a bool, as the VM's If instruction reads it.
inline bool condition(const value& c, const site& at) {
  if (c.is_bool()) return c.as_bool();
  if (c.is_int()) return c.as_int() != 0;
  try {
    throw value_error("If: the condition holds " + std::string(name(c.kind())) + ", expected int or bool");
  } catch (...) {
    detail::rethrow_at(at, "");
  }
}

/// Generated function `F` over literals `L` as a `compiled_function` sharing `literals`.
template <class L, value (*F)(const L&, vm_context&, std::span<value>)>
compiled_function make_function(std::shared_ptr<const L> literals) {
  compiled_function c;
  c.fn = [](const void* state, vm_context& vm, std::span<value> registers) -> value {
    return F(*static_cast<const L*>(state), vm, registers);
  };
  c.state = literals.get();
  c.owner = std::move(literals);
  return c;
}

/// `ex` with the generated functions `add_functions` registers attached as its code. Every
/// compiled function of `ex` must get code, and the code must be for `ex`'s functions: a mismatch
/// (a header and an executable from different compilations) is a `usage_error`.
inline executable attach(executable ex, void (*add_functions)(native_code&)) {
  auto code = std::make_shared<native_code>();
  add_functions(*code);
  for (auto& f : ex.functions)
    if (f.kind == function_kind::compiled && !code->find(f.name))
      throw usage_error("kiln::vm::compiled::attach: the executable's compiled function '" + kiln::detail::printable(f.name) +
                        "' has no code here; were the code and the executable made by the same compilation?");
  for (auto& n : code->names()) {
    auto i = ex.find_function(n);
    if (!i || ex.functions[*i].kind != function_kind::compiled)
      throw usage_error("kiln::vm::compiled::attach: the code has function '" + kiln::detail::printable(n) +
                        "', which the executable does not have as a compiled function; were they made by the same compilation?");
  }
  ex.code = std::move(code);
  return ex;
}

// ---- the shared-library interface (export_library / load_module) --------------------------------

/// CPU features a library may be compiled for (x86-64), in bit order: a library records the ones
/// its translation unit was compiled for; `load_module` checks that the CPU has them all before
/// calling into it.
inline constexpr const char* cpu_feature_names[] = {"sse4.2", "avx", "avx2", "fma", "bmi2",
                                                    "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"};

constexpr std::uint64_t cpu_features_compiled_for() noexcept {
  std::uint64_t bits = 0;
#if defined(__SSE4_2__)
  bits |= 1u << 0;
#endif
#if defined(__AVX__)
  bits |= 1u << 1;
#endif
#if defined(__AVX2__)
  bits |= 1u << 2;
#endif
#if defined(__FMA__)
  bits |= 1u << 3;
#endif
#if defined(__BMI2__)
  bits |= 1u << 4;
#endif
#if defined(__AVX512F__)
  bits |= 1u << 5;
#endif
#if defined(__AVX512BW__)
  bits |= 1u << 6;
#endif
#if defined(__AVX512DQ__)
  bits |= 1u << 7;
#endif
#if defined(__AVX512VL__)
  bits |= 1u << 8;
#endif
#if defined(__AVX512CD__)
  bits |= 1u << 9;
#endif
  return bits;
}

/// The features of `cpu_feature_names` this CPU has.
inline std::uint64_t cpu_features_available() noexcept {
  std::uint64_t bits = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool has[] = {bool(__builtin_cpu_supports("sse4.2")),   bool(__builtin_cpu_supports("avx")),
                      bool(__builtin_cpu_supports("avx2")),     bool(__builtin_cpu_supports("fma")),
                      bool(__builtin_cpu_supports("bmi2")),     bool(__builtin_cpu_supports("avx512f")),
                      bool(__builtin_cpu_supports("avx512bw")), bool(__builtin_cpu_supports("avx512dq")),
                      bool(__builtin_cpu_supports("avx512vl")), bool(__builtin_cpu_supports("avx512cd"))};
  for (std::size_t i = 0; i < std::size(has); ++i)
    if (has[i]) bits |= std::uint64_t(1) << i;
#endif
  return bits;
}

/// What, besides kiln's version, must match between a library and the program loading it: the
/// C++ standard library and its ABI, and the size of a register value.
inline constexpr const char* abi_tag =
#if defined(_LIBCPP_VERSION)
    "libc++"
#elif defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI
    "libstdc++/cxx11"
#else
    "libstdc++"
#endif
    ;

/// What a library built by `export_library` exports, as constant data (reading it runs none of the
/// library's code), under the C name `kiln_library_info_v1`.
struct library_info {
  static constexpr std::uint64_t magic_value = 0x4b494c4e4c494231ULL;  // "KILNLIB1"
  std::uint64_t magic;
  const char* kiln_version;
  const char* abi;
  std::uint64_t value_size;
  std::uint64_t cpu_features;
  const char* compiler;                    ///< the compiler that built it (its __VERSION__)
  const unsigned char* executable_begin;   ///< the serialized executable
  const unsigned char* executable_end;
  void (*add_functions)(native_code&);     ///< registers the compiled functions
};

}  // namespace kiln::vm::compiled
