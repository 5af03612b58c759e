// SPDX-License-Identifier: Apache-2.0
/// \file
/// What the pass infrastructure needs of an IR: `module_traits<Module>`, the `module_like` concept,
/// and `module_view`, the type-erased module that run-time instruments see.
///
/// kiln's pass infrastructure does not know any IR. A compiler plugs its IR in by specialising
/// `kiln::module_traits` for its module type. The specialisation states, as plain static members:
///
/// \code
/// template <> struct kiln::module_traits<my::module> {
///   using function_type = my::function;                      // what function passes transform
///   // Calls fn(name, f) -> function_type for every function of that kind and returns the module
///   // with each function replaced by what fn returned. Returning the same module object when
///   // nothing changed lets instruments tell "changed" from "unchanged".
///   template <class Fn> static my::module map_functions(const my::module&, Fn&& fn);
///   static bool skip_optimization(const my::function&);      // the SkipOptimization annotation
///   static bool same(const my::module&, const my::module&);  // the same object (no deep compare)
///   static void print(std::ostream&, const my::module&);     // for the print-IR instruments
///
///   // Optional: a lower-level function kind for kernel-function passes (the design's PrimFuncPass).
///   using kernel_function_type = my::kernel;
///   template <class Fn> static my::module map_kernel_functions(const my::module&, Fn&& fn);
///   // Optional: a verifier for the verify-after-each-pass instrument; one message per problem.
///   static std::vector<std::string> verify(const my::module&);
///   // Optional: a structural hash, for the `testing.immutable_module` check (a pass must not
///   // modify the module it is given).
///   static std::size_t structural_hash(const my::module&);
///   // Optional: a name for messages ("kiln IR"); defaults to "module".
///   static constexpr std::string_view ir_name = "my IR";
/// };
/// \endcode
///
/// `kiln/ir/pass_traits.hpp` is the model for kiln's reference IR; the tests define a toy IR too.
#pragma once

#include <kiln/support/error.hpp>

#include <concepts>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// Specialise for your module type; see the file comment for the members.
template <class Module>
struct module_traits;

namespace detail {

/// Stands for the callable the infrastructure gives to `map_functions` (only for concept checks).
template <class Function>
struct function_mapper_archetype {
  Function operator()(std::string_view, const Function&) const;
};

}  // namespace detail

/// A module type the pass infrastructure can run passes on: `module_traits<Module>` is specialised
/// with `function_type`, `map_functions`, `skip_optimization`, `same` and `print`.
template <class Module>
concept module_like =
    std::copyable<Module> && requires { typename module_traits<Module>::function_type; } &&
    requires(const Module& m, const typename module_traits<Module>::function_type& f, std::ostream& os,
             detail::function_mapper_archetype<typename module_traits<Module>::function_type> fn) {
      { module_traits<Module>::map_functions(m, fn) } -> std::same_as<Module>;
      { module_traits<Module>::skip_optimization(f) } -> std::convertible_to<bool>;
      { module_traits<Module>::same(m, m) } -> std::convertible_to<bool>;
      module_traits<Module>::print(os, m);
    };

/// A module whose IR also has a kernel-function kind (`kernel_function_type`, `map_kernel_functions`).
template <class Module>
concept has_kernel_functions =
    module_like<Module> && requires { typename module_traits<Module>::kernel_function_type; } &&
    requires(const Module& m,
             detail::function_mapper_archetype<typename module_traits<Module>::kernel_function_type> fn) {
      { module_traits<Module>::map_kernel_functions(m, fn) } -> std::same_as<Module>;
    };

/// A module whose traits offer `verify(module) -> std::vector<std::string>`.
template <class Module>
concept verifiable_module = module_like<Module> && requires(const Module& m) {
  { module_traits<Module>::verify(m) } -> std::convertible_to<std::vector<std::string>>;
};

/// The name messages use for the IR of `Module`.
template <module_like Module>
constexpr std::string_view ir_name_of() noexcept {
  if constexpr (requires { std::string_view(module_traits<Module>::ir_name); })
    return module_traits<Module>::ir_name;
  else
    return "module";
}

/// Prints `m` for a person to read: `module_traits<Module>::print_readable` when the traits
/// define it (kiln's IR elides large constants there), else `print`.
template <module_like Module>
void print_readable_of(std::ostream& os, const Module& m) {
  if constexpr (requires { module_traits<Module>::print_readable(os, m); })
    module_traits<Module>::print_readable(os, m);
  else
    module_traits<Module>::print(os, m);
}

namespace detail {

/// The operations a `module_view` forwards to, one table per module type.
struct module_ops {
  std::string_view ir_name;
  void (*print)(std::ostream&, const void*);
  void (*print_readable)(std::ostream&, const void*);
  bool (*same)(const void*, const void*);
  std::vector<std::string> (*verify)(const void*);  // null when the IR has no verifier
  std::shared_ptr<const void> (*copy)(const void*);
};

template <module_like Module>
inline constexpr module_ops module_ops_for{
    ir_name_of<Module>(),
    [](std::ostream& os, const void* m) { module_traits<Module>::print(os, *static_cast<const Module*>(m)); },
    [](std::ostream& os, const void* m) { print_readable_of(os, *static_cast<const Module*>(m)); },
    [](const void* a, const void* b) {
      return static_cast<bool>(module_traits<Module>::same(*static_cast<const Module*>(a), *static_cast<const Module*>(b)));
    },
    [] {
      if constexpr (verifiable_module<Module>)
        return +[](const void* m) -> std::vector<std::string> { return module_traits<Module>::verify(*static_cast<const Module*>(m)); };
      else
        return static_cast<std::vector<std::string> (*)(const void*)>(nullptr);
    }(),
    [](const void* m) -> std::shared_ptr<const void> { return std::make_shared<const Module>(*static_cast<const Module*>(m)); }};

}  // namespace detail

class module_copy;

/// A non-owning, type-erased reference to a module of any `module_like` type: what run-time
/// instruments receive. Two pointers; valid only during the hook call it is passed to (`copy()`
/// keeps the module).
class module_view {
public:
  template <class Module>
    requires(!std::same_as<Module, module_view> && module_like<Module>)  // not a copy: no recursion
  explicit module_view(const Module& m) noexcept : module_(&m), ops_(&detail::module_ops_for<Module>) {}

  /// The module as a `Module`, or null when it is a module of another type.
  template <module_like Module>
  const Module* get_if() const noexcept {
    return ops_ == &detail::module_ops_for<Module> ? static_cast<const Module*>(module_) : nullptr;
  }
  /// The module as a `Module`; a `usage_error` when it is a module of another type.
  template <module_like Module>
  const Module& get() const {
    if (const Module* m = get_if<Module>()) return *m;
    throw usage_error("kiln::module_view::get: the module is a " + std::string(ops_->ir_name) + " module, not a " +
                      std::string(ir_name_of<Module>()) + " module");
  }

  std::string_view ir_name() const noexcept { return ops_->ir_name; }
  /// The module in full (`module_traits::print`): text that reads back.
  void print(std::ostream& os) const { ops_->print(os, module_); }
  /// The module as a person reads it (`print_readable_of`).
  void print_readable(std::ostream& os) const { ops_->print_readable(os, module_); }
  std::string to_string() const {
    std::ostringstream os;
    print(os);
    return os.str();
  }
  /// True when the two views show the same module object (what "the pass changed nothing" means).
  bool same_as(const module_view& other) const { return ops_ == other.ops_ && ops_->same(module_, other.module_); }

  bool verifiable() const noexcept { return ops_->verify != nullptr; }
  /// The IR verifier's messages (empty: well formed); a `usage_error` when the IR has no verifier.
  std::vector<std::string> verify() const {
    if (!ops_->verify)
      throw usage_error("kiln::module_view::verify: the " + std::string(ops_->ir_name) +
                        " IR has no verifier (module_traits<...>::verify is not defined)");
    return ops_->verify(module_);
  }
  /// A copy of the module that outlives the hook call (for a handle-based IR, a reference count).
  module_copy copy() const;

private:
  friend class module_copy;
  module_view(const void* m, const detail::module_ops* ops) noexcept : module_(m), ops_(ops) {}

  const void* module_;
  const detail::module_ops* ops_;
};

/// A type-erased copy of a module, made by `module_view::copy`; `view()` shows it.
class module_copy {
public:
  module_copy() = default;
  explicit operator bool() const noexcept { return module_ != nullptr; }
  /// A view of the copy; valid while this copy lives. A `usage_error` when it is empty.
  module_view view() const {
    if (!module_) throw usage_error("kiln::module_copy::view: the copy is empty");
    return module_view(module_.get(), ops_);
  }

private:
  friend class module_view;
  module_copy(std::shared_ptr<const void> m, const detail::module_ops* ops) : module_(std::move(m)), ops_(ops) {}
  std::shared_ptr<const void> module_;
  const detail::module_ops* ops_ = nullptr;
};

inline module_copy module_view::copy() const { return module_copy(ops_->copy(module_), ops_); }

}  // namespace kiln
