// SPDX-License-Identifier: Apache-2.0
/// \file
/// Passes as types: the static contract of a pass (`pass_like`), its run-time description
/// (`pass_info`), and how its kind is deduced from what it can be called with.
///
/// A pass is any class with these static members (the design's PassInfo, at compile time):
///
/// \code
/// struct fold_constant {
///   static constexpr std::string_view name = "fold_constant";  // required
///   static constexpr int opt_level = 2;                         // optional, default 0
///   using required = kiln::pass_list<normalize>;                // optional, default none
///
///   // One of these call shapes decides the pass's kind for a module type M whose traits name
///   // the function kinds F (function_type) and K (kernel_function_type):
///   M operator()(const M&, kiln::pass_context&);                 // module pass
///   M operator()(const M&);                                      //   "
///   F operator()(const F&, const M&, kiln::pass_context&);       // function pass
///   F operator()(const F&);                                      //   "
///   K operator()(const K&, const M&, kiln::pass_context&);       // kernel-function pass
///   K operator()(const K&);                                      //   "
/// };
/// \endcode
///
/// `kiln/pass/make_pass.hpp` builds such types from lambdas and stateful objects.
#pragma once

#include <kiln/pass/module_traits.hpp>
#include <kiln/pass/property.hpp>

#include <array>
#include <concepts>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace kiln {

class pass_context;

/// The passes a pass requires, as types.
template <class... Passes>
struct pass_list {};

/// What kind of pass a pass is on a given module type.
enum class pass_kind : std::uint8_t { module, function, kernel_function, sequential };

constexpr std::string_view to_string(pass_kind k) noexcept {
  switch (k) {
    case pass_kind::module: return "module pass";
    case pass_kind::function: return "function pass";
    case pass_kind::kernel_function: return "kernel-function pass";
    case pass_kind::sequential: return "sequential";
  }
  return "pass";
}

/// The run-time description of a pass, the design's PassInfo: what instruments and diagnostics see.
struct pass_info {
  std::string_view name;
  int opt_level = 0;
  std::span<const std::string_view> required;  ///< names of the passes it requires
  pass_kind kind = pass_kind::module;
  /// The IR properties it needs and establishes (with their checkers), and invalidates; see
  /// `property.hpp`.
  std::span<const property_check> needs = {};
  std::span<const property_check> establishes = {};
  std::span<const property_check> invalidates = {};
  /// One line saying what it does (a pass's optional `static constexpr std::string_view
  /// description`), for listings such as `kiln-opt --list-passes`.
  std::string_view description = {};
};

/// The text form of a pass_info: `fold_constant: function pass, opt level 1, requires [normalize]`.
inline std::string to_string(const pass_info& info) {
  std::string s(info.name);
  s.append(": ").append(to_string(info.kind)).append(", opt level ").append(std::to_string(info.opt_level));
  s.append(", requires [");
  for (std::size_t i = 0; i < info.required.size(); ++i) s.append(i ? ", " : "").append(info.required[i]);
  return s.append("]");
}
inline std::ostream& operator<<(std::ostream& os, const pass_info& info) { return os << to_string(info); }

namespace detail {

template <class T>
struct is_pass_list : std::false_type {};
template <class... Passes>
struct is_pass_list<pass_list<Passes...>> : std::true_type {};

}  // namespace detail

/// A compile-time pass: a class with `static constexpr std::string_view name`, optionally
/// `static constexpr int opt_level` and `using required = kiln::pass_list<...>`. (Its call shape is
/// checked when it runs on a module type; see `pass_kind_of`.)
template <class Pass>
concept pass_like = std::is_class_v<Pass> && std::move_constructible<Pass> && requires {
  { Pass::name } -> std::convertible_to<std::string_view>;
  std::integral_constant<std::size_t, std::string_view(Pass::name).size()>{};  // a constant expression
};

/// The pass's opt level (0 when it does not say).
template <pass_like Pass>
inline constexpr int opt_level_of = [] {
  if constexpr (requires { Pass::opt_level; })
    return static_cast<int>(Pass::opt_level);
  else
    return 0;
}();

/// Whether a pass (or the callable a `make_pass` pass wraps) may have its functions transformed on
/// several threads at once (`pass_context::set_num_threads`): unless it says
/// `static constexpr bool thread_safe = false`.
template <class T>
inline constexpr bool thread_safe_of = [] {
  if constexpr (requires { T::thread_safe; })
    return static_cast<bool>(T::thread_safe);
  else
    return true;
}();

namespace detail {

template <class Pass>
struct required_of {
  using type = pass_list<>;
};
template <class Pass>
  requires requires { typename Pass::required; }
struct required_of<Pass> {
  using type = typename Pass::required;
  static_assert(is_pass_list<type>::value,
                "kiln: a pass's `required` member must be kiln::pass_list<...> of the pass types it requires");
};

}  // namespace detail

/// The passes `Pass` requires, as a `pass_list`.
template <pass_like Pass>
using required_of = typename detail::required_of<Pass>::type;

namespace detail {

template <class List>
struct required_names;
template <class Pass>
constexpr std::string_view name_or_placeholder() noexcept {
  if constexpr (pass_like<Pass>)
    return Pass::name;
  else
    return "<not a pass>";  // reported by the requirement check in kiln::sequential
}
template <class... Required>
struct required_names<pass_list<Required...>> {
  static constexpr std::array<std::string_view, sizeof...(Required)> value{name_or_placeholder<Required>()...};
};

// ---- call shapes -------------------------------------------------------------------------------

template <class Pass, class Module>
concept module_callable = requires(Pass& p, const Module& m, pass_context& ctx) {
  { p(m, ctx) } -> std::convertible_to<Module>;
} || requires(Pass& p, const Module& m) {
  { p(m) } -> std::convertible_to<Module>;
};

template <class Pass, class Function, class Module>
concept function_callable = !std::same_as<Function, Module> && (requires(Pass& p, const Function& f, const Module& m, pass_context& ctx) {
  { p(f, m, ctx) } -> std::convertible_to<Function>;
} || requires(Pass& p, const Function& f) {
  { p(f) } -> std::convertible_to<Function>;
});

template <class Module>
struct function_kinds {
  using function = typename module_traits<Module>::function_type;
  using kernel = void;
};
template <has_kernel_functions Module>
struct function_kinds<Module> {
  using function = typename module_traits<Module>::function_type;
  using kernel = typename module_traits<Module>::kernel_function_type;
};

template <class Pass>
concept sequential_pass = requires { requires Pass::is_sequential; };

}  // namespace detail

/// True when `Pass` can run on `Module`.
template <class Pass, class Module>
concept pass_for =
    pass_like<Pass> && module_like<Module> &&
    (detail::sequential_pass<Pass> || detail::module_callable<Pass, Module> ||
     detail::function_callable<Pass, typename detail::function_kinds<Module>::function, Module> ||
     (has_kernel_functions<Module> && detail::function_callable<Pass, typename detail::function_kinds<Module>::kernel, Module>));

/// The kind of `Pass` on `Module`, deduced from its call shape. A pass that fits no shape, or
/// more than one, is a compile error that lists the shapes.
template <pass_like Pass, module_like Module>
consteval pass_kind pass_kind_of() {
  using kinds = detail::function_kinds<Module>;
  // Each shape is only tried when needed: trying a generic lambda with the wrong argument type
  // would instantiate its body, which is a hard error rather than "does not fit".
  if constexpr (detail::sequential_pass<Pass>) {
    return pass_kind::sequential;
  } else if constexpr (requires { Pass::kind; }) {
    // The pass states its kind (kiln::module_pass and friends do): only that shape is checked.
    constexpr pass_kind declared = Pass::kind;
    static_assert(declared != pass_kind::sequential, "kiln: a pass cannot declare itself a sequential; use kiln::sequential");
    if constexpr (declared == pass_kind::module) {
      static_assert(detail::module_callable<Pass, Module>,
                    "kiln::module_pass: the pass must be callable as (const module&, pass_context&) -> module or "
                    "(const module&) -> module for this module type (pass and module types in the instantiation above)");
    } else if constexpr (declared == pass_kind::function) {
      static_assert(detail::function_callable<Pass, typename kinds::function, Module>,
                    "kiln::function_pass: the pass must be callable as (const function&, const module&, pass_context&) "
                    "-> function or (const function&) -> function, with the IR's function_type (pass and module types "
                    "in the instantiation above)");
    } else if constexpr (declared == pass_kind::kernel_function) {
      static_assert(has_kernel_functions<Module>,
                    "kiln::kernel_function_pass: this module type has no kernel functions (its module_traits define no "
                    "kernel_function_type / map_kernel_functions)");
      if constexpr (has_kernel_functions<Module>)
        static_assert(detail::function_callable<Pass, typename kinds::kernel, Module>,
                      "kiln::kernel_function_pass: the pass must be callable as (const kernel&, const module&, "
                      "pass_context&) -> kernel or (const kernel&) -> kernel, with the IR's kernel_function_type");
    }
    return declared;
  } else {
    constexpr bool is_module = detail::module_callable<Pass, Module>;
    constexpr bool is_function = detail::function_callable<Pass, typename kinds::function, Module>;
    constexpr bool is_kernel = [] {
      if constexpr (has_kernel_functions<Module>)
        return detail::function_callable<Pass, typename kinds::kernel, Module>;
      else
        return false;
    }();
    static_assert(is_module || is_function || is_kernel,
                  "kiln: this pass cannot run on this module type. A pass must be callable as one of: "
                  "(const module&, pass_context&) -> module, (const module&) -> module [module pass]; "
                  "(const function&, const module&, pass_context&) -> function, (const function&) -> function "
                  "[function pass]; the same two with the IR's kernel_function_type [kernel-function pass]. "
                  "The pass type and the module type are in the instantiation above.");
    static_assert(int(is_module) + int(is_function) + int(is_kernel) <= 1,
                  "kiln: this pass can be called as more than one kind of pass (module, function, kernel "
                  "function) on this module type; give its call operator explicit parameter types, or build it "
                  "with kiln::module_pass / function_pass / kernel_function_pass, which fix the kind.");
    if constexpr (is_function)
      return pass_kind::function;
    else if constexpr (is_kernel)
      return pass_kind::kernel_function;
    else
      return pass_kind::module;
  }
}

/// True when `name` can name a pass in a textual pipeline: non-empty, letters, digits, `_ . -`.
constexpr bool is_valid_pass_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

namespace detail {
template <class Pass>
consteval std::string_view checked_name() {
  static_assert(is_valid_pass_name(Pass::name),
                "kiln: a pass name must be non-empty and use only letters, digits, '_', '.' and '-' (names appear "
                "in textual pipelines such as \"fold_constant,dead_code_elimination\")");
  static_assert(opt_level_of<Pass> >= 0, "kiln: a pass's opt_level must be 0 or more");
  return Pass::name;
}
template <class Pass>
consteval std::string_view description_of() {
  if constexpr (requires { std::string_view(Pass::description); })
    return Pass::description;
  else
    return {};
}
}  // namespace detail

/// The `pass_info` of `Pass` running on `Module`, in static storage.
template <pass_like Pass, module_like Module>
inline constexpr pass_info pass_info_of{detail::checked_name<Pass>(),
                                        opt_level_of<Pass>,
                                        std::span<const std::string_view>(detail::required_names<required_of<Pass>>::value),
                                        pass_kind_of<Pass, Module>(),
                                        std::span<const property_check>(detail::property_checks<needs_of<Pass>, Module>::value),
                                        std::span<const property_check>(detail::property_checks<establishes_of<Pass>, Module>::value),
                                        std::span<const property_check>(detail::property_checks<invalidates_of<Pass>, Module>::value),
                                        detail::description_of<Pass>()};

/// A module pass that changes nothing and establishes `Properties...`: put it first in a pipeline
/// whose input already has them (IR from another front end, a test's hand-written lowered IR).
///
/// \code
/// using tail = kiln::sequential<kiln::assume<legalized>, call_tir_rewrite, static_plan_block_memory>;
/// \endcode
template <class... Properties>
struct assume {
  static_assert((ir_property<Properties> && ...), "kiln::assume: every argument must be an IR property (a class with static constexpr std::string_view name)");
  static constexpr std::string_view name = "assume";
  static constexpr pass_kind kind = pass_kind::module;
  using establishes = property_list<Properties...>;
  template <class Module>
  Module operator()(const Module& m) const {
    return m;
  }
};

}  // namespace kiln
