// SPDX-License-Identifier: Apache-2.0
/// \file
/// IR properties: what a pass needs to hold before it runs and what it makes hold, as types, so
/// that a pipeline whose passes break each other's assumptions does not compile.
///
/// Most bugs in compiler pipelines are passes that assume something an earlier pass did not do
/// (memory planned on dataflow blocks, code generation meeting an operator nobody lowered). kiln
/// lets each pass say it:
///
/// \code
/// struct legalized { static constexpr std::string_view name = "legalized";
///                    static std::vector<std::string> check(const my::module&); };   // optional
///
/// struct codegen_prep {
///   static constexpr std::string_view name = "codegen_prep";
///   using needs = kiln::property_list<legalized>;        // must hold before it runs
///   using establishes = kiln::property_list<prepared>;   // holds after it runs
///   using invalidates = kiln::property_list<planned>;    // may no longer hold after it runs
///   ...
/// };
/// \endcode
///
/// A pass keeps every property it does not list in `invalidates`. `kiln::sequential` walks its
/// resolved steps in order with the set of properties that hold (none at the start) and fails to
/// compile when a step needs one that is absent, naming the pass and the property:
///
///     kiln::sequential: pass 'static_plan_block_memory' needs property 'explicit_outputs', which
///     no earlier pass establishes
///
/// A nested sequential is one step to the pipeline around it: it needs what its steps need and do
/// not establish themselves, establishes what holds at its end, and invalidates what its steps
/// invalidate and do not establish again. Run-time pipelines (`make_pipeline`, `parse_pipeline`)
/// make the same check when they are built, by name. A property type with a static `check`
/// (returning one message per violation) is also checked at run time by the `verify_ir`
/// instrument after each pass that establishes it.
///
/// The check assumes a step establishes its properties whenever the pipeline runs; give passes
/// that establish a property opt level 0, or let `verify_ir` catch the gap.
#pragma once

#include <kiln/pass/module_traits.hpp>

#include <array>
#include <concepts>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln {

/// A list of IR property types.
template <class... Properties>
struct property_list {};

/// An IR property: a class with `static constexpr std::string_view name`.
template <class P>
concept ir_property = std::is_class_v<P> && requires {
  { P::name } -> std::convertible_to<std::string_view>;
};

/// A property's run-time checker, as `pass_info` carries it: the problems of the module (empty:
/// the property holds).
struct property_check {
  std::string_view name;
  std::vector<std::string> (*check)(const module_view&) = nullptr;  ///< null: the property has no checker
};

namespace detail {

template <class T>
struct is_property_list : std::false_type {};
template <class... Ps>
struct is_property_list<property_list<Ps...>> : std::true_type {};

template <class List>
struct property_names;
template <class... Ps>
struct property_names<property_list<Ps...>> {
  static constexpr std::array<std::string_view, sizeof...(Ps)> value{std::string_view(Ps::name)...};
};

#define KILN_DETAIL_PROPERTY_MEMBER(member)                                                                             \
  template <class Pass>                                                                                                 \
  struct member##_of_impl {                                                                                             \
    using type = property_list<>;                                                                                       \
  };                                                                                                                    \
  template <class Pass>                                                                                                 \
    requires requires { typename Pass::member; }                                                                        \
  struct member##_of_impl<Pass> {                                                                                       \
    using type = typename Pass::member;                                                                                 \
    static_assert(is_property_list<type>::value, "kiln: a pass's `" #member "` member must be kiln::property_list<...> " \
                                                 "of IR property types (classes with static constexpr std::string_view name)"); \
  };
KILN_DETAIL_PROPERTY_MEMBER(needs)
KILN_DETAIL_PROPERTY_MEMBER(establishes)
KILN_DETAIL_PROPERTY_MEMBER(invalidates)
#undef KILN_DETAIL_PROPERTY_MEMBER

/// The checker of property `P` on modules of type `Module`, or null when `P` has none for them.
template <class P, class Module>
constexpr auto property_checker() {
  if constexpr (requires(const Module& m) {
                  { P::check(m) } -> std::convertible_to<std::vector<std::string>>;
                })
    return +[](const module_view& v) -> std::vector<std::string> { return P::check(v.template get<Module>()); };
  else
    return static_cast<std::vector<std::string> (*)(const module_view&)>(nullptr);
}

/// The `property_check`s of a list, in static storage.
template <class List, class Module>
struct property_checks;
template <class... Ps, class Module>
struct property_checks<property_list<Ps...>, Module> {
  static constexpr std::array<property_check, sizeof...(Ps)> value{property_check{std::string_view(Ps::name), property_checker<Ps, Module>()}...};
};

}  // namespace detail

/// The properties `Pass` needs, establishes and invalidates (empty lists when it does not say).
template <class Pass>
using needs_of = typename detail::needs_of_impl<Pass>::type;
template <class Pass>
using establishes_of = typename detail::establishes_of_impl<Pass>::type;
template <class Pass>
using invalidates_of = typename detail::invalidates_of_impl<Pass>::type;

namespace detail {

// ---- list algebra for pipelines (see sequential.hpp) -------------------------------------------

template <class List, class P>
struct add_property;
template <class... Ps, class P>
struct add_property<property_list<Ps...>, P> {
  using type = std::conditional_t<(std::is_same_v<P, Ps> || ...), property_list<Ps...>, property_list<Ps..., P>>;
};
template <class List, class Add>
struct add_properties;
template <class List>
struct add_properties<List, property_list<>> {
  using type = List;
};
template <class List, class P, class... Rest>
struct add_properties<List, property_list<P, Rest...>> : add_properties<typename add_property<List, P>::type, property_list<Rest...>> {};

/// The properties of `List` whose position holds true in `Mask`.
template <class Out, class In, std::size_t I, auto Mask>
struct filter_properties;
template <class Out, std::size_t I, auto Mask>
struct filter_properties<Out, property_list<>, I, Mask> {
  using type = Out;
};
template <class... Os, class P, class... Rest, std::size_t I, auto Mask>
struct filter_properties<property_list<Os...>, property_list<P, Rest...>, I, Mask>
    : filter_properties<std::conditional_t<Mask[I], property_list<Os..., P>, property_list<Os...>>, property_list<Rest...>, I + 1, Mask> {};

}  // namespace detail

}  // namespace kiln
