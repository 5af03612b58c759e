// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::sequential<Passes...>`: a pipeline composed at compile time, with its passes'
/// requirements resolved statically (the design's Sequential, without run-time GetPass lookups).
///
/// \code
/// using cleanup = kiln::sequential<fold_constant, dead_code_elimination>;
/// ir_module out = kiln::run(cleanup{}, module);          // or cleanup{}(module, ctx)
/// \endcode
///
/// Resolution (see `detail/resolve.hpp`): every pass a listed pass requires is placed before it,
/// each at most once unless the user lists it twice; a pass pulled in this way is
/// default-constructed. A cycle, or a requirement that is not a pass, is a compile error naming the
/// passes. A nested sequential is one pass to the pipeline around it (requirements are resolved
/// inside each sequential).
///
/// Running: each step goes through the protocol of `run.hpp`. A listed pass runs when the
/// context enables it (not disabled by name; required by name or opt level high enough). A pass
/// pulled in as a requirement runs when some pass that requires it runs, whatever its own opt level;
/// if it is disabled by name while such a pass runs, the run stops before any pass with a
/// `usage_error`.
///
/// How it is built, at compile time, each step one line below:
/// - `closure`: the listed pass types and everything they require, transitively, each once
///   (breadth first, one step per type, membership by inheritance from a tag per member: O(n));
/// - `graph`: for each type, the indices of the types it requires;
/// - `plan`: `detail::resolve` run as a constant expression on the graph (O(n + edges));
/// - `steps`: the plan as arrays the run loop is unrolled over (one `run_protocol` call per step).
#pragma once

#include <kiln/pass/detail/resolve.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/pass_info.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/support/fixed_string.hpp>

#include <boost/hana/at.hpp>
#include <boost/hana/flatten.hpp>
#include <boost/hana/tuple.hpp>

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

namespace detail {

// ---- compile-time diagnostics -------------------------------------------------------------------

template <class... Ts>
constexpr bool always_false = false;

/// Instantiated with the formatted sentence (GCC shows it in the instantiation line) and the pass
/// types involved (every compiler shows those), only when there is something to report.
template <fixed_string Message, class... Passes>
struct report_dependency_cycle {
  static_assert(always_false<Passes...>,
                "kiln::sequential: the passes' requirements form a cycle; the instantiation above names the passes "
                "in order, each requiring the next, the last being the first again");
};
template <class Pass, class NotAPass>
struct report_requirement_not_a_pass {
  static_assert(always_false<Pass, NotAPass>,
                "kiln::sequential: a pass's `required` list names a type that is not a pass (a pass has static "
                "constexpr std::string_view name); this template's arguments are the pass, then the type");
};
template <class Pass, class RequiredBy>
struct report_requirement_not_default_constructible {
  static_assert(always_false<Pass, RequiredBy>,
                "kiln::sequential: a pass is pulled in as a requirement but is not default-constructible, so the "
                "pipeline cannot create it; list an instance of it before the pass that requires it (this "
                "template's arguments are the required pass, then the pass requiring it)");
};

template <fixed_string Message, class Pass, class Property, class Invalidator>
struct report_property_invalidated {
  static_assert(always_false<Pass, Property, Invalidator>,
                "kiln::sequential: a pass needs an IR property that an earlier pass of the pipeline invalidates; the "
                "instantiation above names the pass, the property and the pass that invalidates it");
};
template <fixed_string Message, class Pipeline, class Pass, class Property>
struct report_property_not_established {
  static_assert(always_false<Pipeline, Pass, Property>,
                "kiln::run: a pass of this pipeline needs an IR property that no earlier pass establishes; the instantiation "
                "above names the pipeline, the pass (or the nested pipeline holding it) and the property. Put the pass that establishes it first, or kiln::assume<property> when the input already has it");
};

/// Concatenates string views into a fixed_string (for the messages above).
template <std::size_t N>
constexpr fixed_string<512> join_message(const std::array<std::string_view, N>& parts) {
  fixed_string<512> out;
  std::size_t at = 0;
  for (std::string_view part : parts)
    for (char c : part)
      if (at + 1 < sizeof(out.chars)) out.chars[at++] = c;
  return out;
}

/// "kiln::sequential: 'a' requires 'b', which requires 'a' (cycle)"
template <std::size_t N>
constexpr fixed_string<512> cycle_message(const std::array<std::string_view, N>& names) {
  fixed_string<512> out;
  std::size_t at = 0;
  auto put = [&](std::string_view s) {
    for (char c : s)
      if (at + 1 < sizeof(out.chars)) out.chars[at++] = c;
  };
  put("kiln::sequential: ");
  for (std::size_t i = 0; i < N; ++i) {
    put(i == 0 ? "'" : i == 1 ? " requires '" : ", which requires '");
    put(names[i]);
    put("'");
  }
  put(" (cycle)");
  return out;
}

// ---- closure of requirements (Hana) ---------------------------------------------------------------

// A set of types with O(1) membership: a class deriving from one tag per member.
template <class T>
struct type_tag {};
template <class... Ts>
struct type_set : type_tag<Ts>... {};

template <class List, class T>
struct add_if_absent;
template <class... Ts, class T>
struct add_if_absent<pass_list<Ts...>, T> {
  using type = std::conditional_t<std::is_base_of_v<type_tag<T>, type_set<Ts...>>, pass_list<Ts...>, pass_list<Ts..., T>>;
};

template <class List, class Add>
struct add_all_absent;
template <class List>
struct add_all_absent<List, pass_list<>> {
  using type = List;
};
template <class List, class T, class... Rest>
struct add_all_absent<List, pass_list<T, Rest...>> : add_all_absent<typename add_if_absent<List, T>::type, pass_list<Rest...>> {};

template <class T>
struct requirements_or_none {
  using type = pass_list<>;
};
template <pass_like T>
struct requirements_or_none<T> {
  using type = kiln::required_of<T>;
};

template <std::size_t I, class List>
struct list_at;
template <std::size_t I, class... Ts>
struct list_at<I, pass_list<Ts...>> {
  using type = std::tuple_element_t<I, std::tuple<Ts...>>;
};
template <class List>
struct list_size;
template <class... Ts>
struct list_size<pass_list<Ts...>> : std::integral_constant<std::size_t, sizeof...(Ts)> {};

/// Breadth-first: the types of `List` from position I on have not had their requirements added
/// yet. One step per type, so O(n) steps with O(1) membership tests.
template <std::size_t I, class List, bool Done = (I == list_size<List>::value)>
struct breadth_first {
  using type = List;
};
template <std::size_t I, class List>
struct breadth_first<I, List, false>
    : breadth_first<I + 1, typename add_all_absent<List, typename requirements_or_none<typename list_at<I, List>::type>::type>::type> {};

/// The pass types of a pipeline of `Passes...` and everything they require, each once, in
/// discovery order.
template <class... Passes>
using closure_of = typename breadth_first<0, typename add_all_absent<pass_list<>, pass_list<Passes...>>::type>::type;

/// The position of `T` in `Ts...`, or -1.
template <class T, class... Ts>
constexpr int index_in() {
  int i = 0, found = -1;
  ((std::is_same_v<T, Ts> && found < 0 ? found = i : ++i), ...);
  return found;
}
template <class T, class... Ts>
constexpr int index_in(pass_list<Ts...>) {
  return index_in<T, Ts...>();
}

/// The positions in `Ts...` of the passes `T` requires.
template <class T, class... Ts>
constexpr std::vector<int> requirement_indices(pass_list<Ts...>) {
  return []<class... R>(pass_list<R...>) { return std::vector<int>{index_in<R, Ts...>()...}; }(
      typename requirements_or_none<T>::type{});
}

template <class Pass>
constexpr bool is_sequential_type = requires { requires Pass::is_sequential; };

template <class List>
struct closure_nodes;
template <class... Ts>
struct closure_nodes<pass_list<Ts...>> {
  static constexpr std::size_t size = sizeof...(Ts);
  template <std::size_t I>
  using at = std::tuple_element_t<I, std::tuple<Ts...>>;
  using all = pass_list<Ts...>;
  static constexpr std::vector<std::vector<int>> graph() { return {requirement_indices<Ts>(all{})...}; }
  /// False when some pass requires a type that is not a pass (each such pair is reported).
  static constexpr bool requirements_are_passes() {
    return (requirements_are_passes_of<Ts>() && ...);
  }
  template <class T>
  static constexpr bool requirements_are_passes_of() {
    if constexpr (pass_like<T>)
      return []<class... R>(pass_list<R...>) {
        return ([] {
          if constexpr (!pass_like<R>) {
            (void)report_requirement_not_a_pass<T, R>{};
            return false;
          } else {
            return true;
          }
        }() && ...);
      }(kiln::required_of<T>{});
    else
      return true;
  }
};

/// `detail::resolve` on the pipeline's requirement graph (a constant expression).
template <class... Passes>
constexpr resolution resolve_plan() {
  using closure = closure_of<Passes...>;
  return resolve(closure_nodes<closure>::graph(), {index_in<Passes>(closure{})...});
}

template <class... Lists>
struct concat_lists {
  using type = property_list<>;
};
template <class... A, class... Rest>
struct concat_lists<property_list<A...>, Rest...> {
  using type = typename add_properties<property_list<A...>, typename concat_lists<Rest...>::type>::type;
};
template <class List>
struct list_length;
template <class... Ps>
struct list_length<property_list<Ps...>> : std::integral_constant<std::size_t, sizeof...(Ps)> {};
template <class List>
struct list_as_tuple;
template <class... Ps>
struct list_as_tuple<property_list<Ps...>> {
  using type = std::tuple<Ps...>;
};
template <class P, class... Ps>
constexpr int property_position(property_list<Ps...>) {
  return index_in<P, Ps...>();
}

/// Everything known at compile time about a pipeline of `Passes...`.
template <class... Passes>
struct sequential_plan {
  using closure = closure_of<Passes...>;
  using nodes = closure_nodes<closure>;

  static constexpr std::size_t cycle_length = resolve_plan<Passes...>().cycle.size();
  static constexpr std::array<int, cycle_length> cycle = [] {
    std::array<int, cycle_length> a{};
    auto r = resolve_plan<Passes...>();
    for (std::size_t i = 0; i < cycle_length; ++i) a[i] = r.cycle[i];
    return a;
  }();

  static constexpr std::size_t size = resolve_plan<Passes...>().steps.size();
  static constexpr std::array<plan_step, size> steps = [] {
    std::array<plan_step, size> a{};
    auto r = resolve_plan<Passes...>();
    for (std::size_t i = 0; i < size; ++i) a[i] = r.steps[i];
    return a;
  }();
  static constexpr std::size_t dependent_count = [] {
    std::size_t n = 0;
    for (const auto& d : resolve_plan<Passes...>().dependents) n += d.size();
    return n;
  }();
  /// Step s relies-on list is dependents[dependent_begin[s] .. dependent_begin[s + 1]).
  static constexpr std::array<int, size + 1> dependent_begin = [] {
    std::array<int, size + 1> a{};
    auto r = resolve_plan<Passes...>();
    for (std::size_t i = 0; i < size; ++i) a[i + 1] = a[i] + static_cast<int>(r.dependents[i].size());
    return a;
  }();
  static constexpr std::array<int, dependent_count> dependents = [] {
    std::array<int, dependent_count> a{};
    auto r = resolve_plan<Passes...>();
    std::size_t k = 0;
    for (const auto& d : r.dependents)
      for (int s : d) a[k++] = s;
    return a;
  }();
  static constexpr bool has_pulled_in = [] {
    for (const auto& s : steps)
      if (s.user_index < 0) return true;
    return false;
  }();

  template <std::size_t Step>
  using step_type = typename nodes::template at<static_cast<std::size_t>(steps[Step].node)>;

  /// The pass types of the pulled-in steps, in step order (the pipeline default-constructs them).
  static constexpr std::size_t pulled_in_count = [] {
    std::size_t n = 0;
    for (const auto& s : steps) n += s.user_index < 0;
    return n;
  }();
  template <std::size_t Step>
  static constexpr std::size_t pulled_in_slot = [] {
    std::size_t n = 0;
    for (std::size_t i = 0; i < Step; ++i) n += steps[i].user_index < 0;
    return n;
  }();

  // ---- IR properties (see property.hpp) ----------------------------------------------------------
  // The steps' properties, each once; for each step, the positions of what it needs, establishes
  // and invalidates; then the walk through the steps with the set of properties that hold.

  template <class Seq>
  struct all_properties_of;
  template <std::size_t... S>
  struct all_properties_of<std::index_sequence<S...>> {
    // in order of first mention, step by step
    using type = typename concat_lists<
        typename concat_lists<needs_of<step_type<S>>, establishes_of<step_type<S>>, invalidates_of<step_type<S>>>::type...>::type;
  };
  using properties = typename all_properties_of<std::make_index_sequence<size>>::type;
  static constexpr std::size_t property_count = list_length<properties>::value;

  template <class List>
  static constexpr std::vector<int> positions_of() {
    return []<class... Ps>(property_list<Ps...>) { return std::vector<int>{property_position<Ps>(properties{})...}; }(List{});
  }

  struct property_walk {
    std::vector<char> needed, established, invalidated;  // the pipeline's own contract, per property
    std::vector<int> first_needing_step;                 // per property needed: the first step needing it
    int bad_step = -1, bad_property = -1, bad_invalidator = -1;  // a need an earlier step invalidated
  };
  static constexpr property_walk walk_properties() {
    property_walk w{std::vector<char>(property_count, 0), std::vector<char>(property_count, 0), std::vector<char>(property_count, 0),
                    std::vector<int>(property_count, -1)};
    std::vector<char> held(property_count, 0);
    std::vector<int> invalidated_by(property_count, -1);
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      (
          [&] {
            if (w.bad_step >= 0) return;
            for (int n : positions_of<needs_of<step_type<S>>>()) {
              if (held[std::size_t(n)]) continue;
              if (invalidated_by[std::size_t(n)] >= 0) {
                w.bad_step = int(S), w.bad_property = n, w.bad_invalidator = invalidated_by[std::size_t(n)];
                return;
              }
              if (!w.needed[std::size_t(n)]) w.needed[std::size_t(n)] = 1, w.first_needing_step[std::size_t(n)] = int(S);
            }
            for (int i : positions_of<invalidates_of<step_type<S>>>()) {
              held[std::size_t(i)] = 0;
              invalidated_by[std::size_t(i)] = int(S);
              w.established[std::size_t(i)] = 0;
              w.invalidated[std::size_t(i)] = 1;
            }
            for (int e : positions_of<establishes_of<step_type<S>>>()) {
              held[std::size_t(e)] = 1;
              invalidated_by[std::size_t(e)] = -1;
              w.established[std::size_t(e)] = 1;
              w.invalidated[std::size_t(e)] = 0;
            }
          }(),
          ...);
    }(std::make_index_sequence<size>{});
    return w;
  }
  static constexpr int bad_step = walk_properties().bad_step;
  static constexpr int bad_property = walk_properties().bad_property;
  static constexpr int bad_invalidator = walk_properties().bad_invalidator;

  template <int Which>  // 0 needed, 1 established, 2 invalidated
  static constexpr std::array<bool, property_count> mask = [] {
    std::array<bool, property_count> a{};
    const property_walk w = walk_properties();
    const std::vector<char>& v = Which == 0 ? w.needed : Which == 1 ? w.established : w.invalidated;
    for (std::size_t i = 0; i < property_count; ++i) a[i] = v[i] != 0;
    return a;
  }();
  using needs = typename filter_properties<property_list<>, properties, 0, mask<0>>::type;
  using establishes = typename filter_properties<property_list<>, properties, 0, mask<1>>::type;
  using invalidates = typename filter_properties<property_list<>, properties, 0, mask<2>>::type;

  static constexpr std::string_view step_name(std::size_t s) {
    return [&]<std::size_t... S>(std::index_sequence<S...>) {
      std::string_view n;
      ((S == s ? (n = innermost_needing<step_type<S>>()) : n), ...);
      return n;
    }(std::make_index_sequence<size>{});
  }
  template <class P>
  static constexpr std::string_view innermost_needing() {
    if constexpr (requires { P::first_unmet_pass; })
      return P::first_unmet_pass.empty() ? std::string_view(P::name) : P::first_unmet_pass;
    else
      return P::name;
  }

  /// The step and the property of the first need the pipeline's input must meet (-1: none).
  static constexpr std::pair<int, int> first_unmet_at = [] {
    const property_walk w = walk_properties();
    std::pair<int, int> r{-1, -1};
    for (std::size_t p = 0; p < property_count; ++p)
      if (w.needed[p] && (r.first < 0 || w.first_needing_step[p] < r.first)) r = {w.first_needing_step[p], int(p)};
    return r;
  }();

  /// The first property the pipeline needs from its input, and the innermost pass needing it
  /// (empty when it needs none).
  static constexpr std::pair<std::string_view, std::string_view> first_unmet = [] {
    if constexpr (property_count == 0) {
      return std::pair<std::string_view, std::string_view>{};
    } else {
      const property_walk w = walk_properties();
      std::pair<std::string_view, std::string_view> r{};
      int best = int(size);
      for (std::size_t p = 0; p < property_count; ++p)
        if (w.needed[p] && w.first_needing_step[p] < best) best = w.first_needing_step[p], r.first = property_names<properties>::value[p];
      if (best < int(size)) r.second = step_name(std::size_t(best));
      return r;
    }
  }();
  /// Reports what is wrong, once, and says whether the pipeline can be built.
  static constexpr bool check() {
    if constexpr (!nodes::requirements_are_passes()) {
      return false;
    } else if constexpr (cycle_length == 0 && bad_step >= 0) {
      using pass = step_type<std::size_t(bad_step)>;
      using invalidator = step_type<std::size_t(bad_invalidator)>;
      using property = std::tuple_element_t<std::size_t(bad_property), typename list_as_tuple<properties>::type>;
      (void)report_property_invalidated<join_message(std::array<std::string_view, 7>{
                                            "kiln::sequential: pass '", pass::name, "' needs property '", property::name, "', which '",
                                            invalidator::name, "' invalidates before it"}),
                                        pass, property, invalidator>{};
      return false;
    } else if constexpr (cycle_length != 0) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        constexpr std::array<std::string_view, cycle_length> names{
            std::string_view(nodes::template at<static_cast<std::size_t>(cycle[I])>::name)...};
        (void)report_dependency_cycle<cycle_message(names), typename nodes::template at<static_cast<std::size_t>(cycle[I])>...>{};
      }(std::make_index_sequence<cycle_length>{});
      return false;
    } else {
      return [&]<std::size_t... S>(std::index_sequence<S...>) {
        return ([] {
          if constexpr (steps[S].user_index < 0 && !std::is_default_constructible_v<step_type<S>>) {
            (void)report_requirement_not_default_constructible<step_type<S>, step_type<static_cast<std::size_t>(
                                                                                  dependents[static_cast<std::size_t>(dependent_begin[S])])>>{};
            return false;
          } else {
            return true;
          }
        }() && ...);
      }(std::make_index_sequence<size>{});
    }
  }
};

/// Decides, before any step runs, which steps of a pipeline run. A listed step runs when the
/// context enables it; a step pulled in as a requirement runs when a later step relying on it
/// runs (so the decision goes backwards), and it is an error for such a step to be disabled by
/// name. Shared by the static and the run-time pipeline.
template <class InfoOf, class IsListed, class DependentsOf>
void decide_gates(std::string_view pipeline, const pass_context& ctx, std::span<skip_reason> gate, InfoOf info_of,
                  IsListed is_listed, DependentsOf dependents_of) {
  for (std::size_t s = gate.size(); s-- > 0;) {
    const skip_reason own = ctx.check_enabled(info_of(s));
    const bool listed = is_listed(s);
    if (listed && own == skip_reason::none) {
      gate[s] = skip_reason::none;
      continue;
    }
    const pass_info* needed_by = nullptr;
    for (int d : dependents_of(s))
      if (gate[static_cast<std::size_t>(d)] == skip_reason::none) {
        needed_by = &info_of(static_cast<std::size_t>(d));
        break;
      }
    if (!needed_by) {
      gate[s] = listed || own == skip_reason::disabled ? own : skip_reason::not_needed;
    } else if (own == skip_reason::disabled) {
      const std::string name(info_of(s).name), user(needed_by->name);
      throw usage_error("kiln::sequential '" + std::string(pipeline) + "': pass '" + name +
                        "' is disabled in the pass_context, but '" + user + "', which runs, requires it; disable '" +
                        user + "' too, or stop disabling '" + name + "'");
    } else {
      gate[s] = skip_reason::none;
    }
  }
}

template <fixed_string Name, int OptLevel>
struct sequential_info {
  static constexpr std::string_view name = Name.view();
  static constexpr int opt_level = OptLevel;
};

}  // namespace detail

/// One resolved step of a pipeline, for inspection and printing.
struct pipeline_step {
  std::string_view name;
  bool pulled_in = false;  ///< placed as a requirement rather than listed
  friend bool operator==(const pipeline_step&, const pipeline_step&) = default;
};

/// The common implementation of `sequential` and `named_sequential`.
template <class Info, class... Passes>
class basic_sequential {
  static_assert((pass_like<Passes> && ...),
                "kiln::sequential: every template argument must be a pass: a class with static constexpr "
                "std::string_view name (and optionally opt_level and `using required = kiln::pass_list<...>`)");
  using plan = detail::sequential_plan<Passes...>;
  static constexpr bool well_formed = plan::check();

  template <class Plan, class Seq>
  struct pulled_storage;
  template <class Plan, std::size_t... S>
  struct pulled_storage<Plan, std::index_sequence<S...>> {
    // No lambda here: Clang 14 crashes reading one in an unevaluated operand from a precompiled
    // header (KILN_PRECOMPILE_HEADERS).
    using type = decltype(boost::hana::flatten(boost::hana::make_tuple(
        std::conditional_t<(Plan::steps[S].user_index < 0), boost::hana::tuple<typename Plan::template step_type<S>>, boost::hana::tuple<>>{}...)));
  };

public:
  static constexpr std::string_view name = Info::name;
  static constexpr int opt_level = Info::opt_level;
  static constexpr bool is_sequential = true;
  /// Whether analysis `A`'s results stay true through every step (`kiln::preserves_analysis`).
  template <class A>
  static constexpr bool keeps_analysis = []<std::size_t... S>(std::index_sequence<S...>) {
    return (preserves_analysis<typename plan::template step_type<S>, A> && ...);
  }(std::make_index_sequence<plan::size>{});
  /// The IR properties the pipeline needs from its input, establishes and invalidates (from its
  /// steps; see `property.hpp`).
  using needs = typename plan::needs;
  using establishes = typename plan::establishes;
  using invalidates = typename plan::invalidates;
  /// The first property it needs from its input and the innermost pass needing it (empty if none).
  static constexpr std::string_view first_unmet_property = plan::first_unmet.first;
  static constexpr std::string_view first_unmet_pass = plan::first_unmet.second;
  /// Fails to compile when the pipeline needs a property from its input (called by `kiln::run`,
  /// for a pipeline run as a whole; a nested pipeline passes its needs to the one around it).
  static constexpr void check_pipeline_input() {
    if constexpr (!first_unmet_property.empty())
      (void)detail::report_property_not_established<
          detail::join_message(std::array<std::string_view, 7>{"kiln::run: pipeline '", name, "': pass '", first_unmet_pass, "' needs property '",
                                                               first_unmet_property, "', which no earlier pass establishes"}),
          basic_sequential, typename plan::template step_type<std::size_t(plan::first_unmet_at.first)>,
          std::tuple_element_t<std::size_t(plan::first_unmet_at.second), typename detail::list_as_tuple<typename plan::properties>::type>>{};
  }
  /// The number of passes as listed, and as resolved (listed plus pulled in).
  static constexpr std::size_t listed_size = sizeof...(Passes);
  static constexpr std::size_t size = plan::size;

  basic_sequential()
    requires(std::is_default_constructible_v<Passes> && ...)
  = default;
  explicit basic_sequential(Passes... passes) : passes_(std::move(passes)...) {}

  /// Runs the pipeline on `m` as a pass (instruments see it, and its steps nested inside it).
  template <module_like Module>
  Module operator()(const Module& m, pass_context& ctx) {
    return kiln::run(*this, m, ctx);
  }
  template <module_like Module>
  Module operator()(const Module& m) {
    return kiln::run(*this, m, pass_context::current());
  }

  /// The listed passes in the textual pipeline form: `a,b,name(c,d)`.
  static std::string text() {
    std::string s;
    ((s.append(s.empty() ? "" : ",").append(element_text_of<Passes>())), ...);
    return s;
  }
  /// This pipeline as an element of a textual pipeline: `name(a,b)`, or `name<2>(a,b)` when its
  /// opt level is not 0.
  static std::string element_text() { return element_text_of<basic_sequential>(); }

  /// The resolved steps: what runs, in order, with the passes pulled in as requirements marked.
  static std::vector<pipeline_step> steps() {
    return [&]<std::size_t... S>(std::index_sequence<S...>) {
      return std::vector<pipeline_step>{
          pipeline_step{std::string_view(plan::template step_type<S>::name), plan::steps[S].user_index < 0}...};
    }(std::make_index_sequence<size>{});
  }

  /// The listed pass at position `I`.
  template <std::size_t I>
  auto& get() noexcept {
    return boost::hana::at_c<I>(passes_);
  }

  // ---- called by the run protocol -----------------------------------------------------------------

  template <module_like Module, class... Policies>
  Module run_steps(const Module& m, pass_context& ctx, Policies&... policies) {
    if constexpr (!well_formed || size == 0) {
      return m;
    } else {
      if constexpr (sizeof...(Policies) == 0) {
        // The common case, decided once per run: every pass runs and nobody watches, so the steps
        // are called back to back, as hand-written code would call them.
        if (ctx.runs_everything_up_to(max_opt_level<Module>)) [[likely]]
          return [&]<std::size_t First, std::size_t... S>(std::index_sequence<First, S...>) {
            Module cur = direct_step<First>(m, ctx);
            ((cur = direct_step<S>(cur, ctx)), ...);
            return cur;
          }(std::make_index_sequence<size>{});
      }
      std::array<skip_reason, size> gate{};
      if constexpr (plan::has_pulled_in) gate = gates<Module>(ctx);
      return [&]<std::size_t First, std::size_t... S>(std::index_sequence<First, S...>) {
        Module cur = step<First>(m, ctx, gate, policies...);  // no copy of `m` up front
        (detail::replace_module(cur, step<S>(cur, ctx, gate, policies...), ctx), ...);
        return cur;
      }(std::make_index_sequence<size>{});
    }
  }

private:
  template <class P>
  static std::string element_text_of() {
    if constexpr (detail::is_sequential_type<P>) {
      std::string s(P::name);  // appends: GCC 12 -O3 warns falsely (-Wrestrict) on "x" + string
      if (P::opt_level) s.append("<").append(std::to_string(P::opt_level)).append(">");
      return s.append("(").append(P::text()).append(")");
    } else {
      return std::string(P::name);
    }
  }

  template <std::size_t S>
  auto& instance() noexcept {
    if constexpr (plan::steps[S].user_index >= 0)
      return boost::hana::at_c<static_cast<std::size_t>(plan::steps[S].user_index)>(passes_);
    else
      return boost::hana::at_c<plan::template pulled_in_slot<S>>(pulled_in_);
  }

  template <class Module>
  static constexpr int max_opt_level = []<std::size_t... S>(std::index_sequence<S...>) {
    return std::max({0, opt_level_of<typename plan::template step_type<S>>...});
  }(std::make_index_sequence<size>{});

  template <std::size_t S, class Module>
  Module direct_step(const Module& m, pass_context& ctx) {
    using pass_type = typename plan::template step_type<S>;
    auto body = [&]() -> Module { return detail::apply_pass<false>(instance<S>(), m, ctx); };
    Module out = detail::run_body<detail::is_sequential_type<pass_type>>(pass_info_of<pass_type, Module>, body, m, ctx);
    if constexpr (!detail::is_sequential_type<pass_type>)
      if (!ctx.analyses().empty()) [[unlikely]]
        detail::invalidate_analyses<preserved_analyses_of<pass_type>>(ctx, m, out);
    return out;
  }

  template <std::size_t S, class Module, class... Policies>
  Module step(const Module& m, pass_context& ctx, const std::array<skip_reason, size>& gate, Policies&... policies) {
    using pass_type = typename plan::template step_type<S>;
    skip_reason why;
    if constexpr (plan::has_pulled_in)
      why = gate[S];
    else
      why = ctx.check_enabled(pass_info_of<pass_type, Module>);
    return detail::run_protocol(instance<S>(), m, ctx, why, policies...);
  }

  /// Which steps run, decided before any of them does (see `detail::decide_gates`).
  template <class Module>
  static std::array<skip_reason, size> gates(const pass_context& ctx) {
    static constexpr std::array<const pass_info*, size> infos = []<std::size_t... S>(std::index_sequence<S...>) {
      return std::array<const pass_info*, size>{&pass_info_of<typename plan::template step_type<S>, Module>...};
    }(std::make_index_sequence<size>{});
    std::array<skip_reason, size> gate{};
    detail::decide_gates(
        name, ctx, gate, [](std::size_t s) -> const pass_info& { return *infos[s]; },
        [](std::size_t s) { return plan::steps[s].user_index >= 0; },
        [](std::size_t s) {
          return std::span<const int>(plan::dependents.data() + plan::dependent_begin[s],
                                      static_cast<std::size_t>(plan::dependent_begin[s + 1] - plan::dependent_begin[s]));
        });
    return gate;
  }

  boost::hana::tuple<Passes...> passes_;
  // Depends on well_formed, so that a malformed pipeline is reported (once) before its storage is built.
  struct no_storage {
    using type = boost::hana::tuple<>;
  };
  typename std::conditional_t<well_formed, pulled_storage<plan, std::make_index_sequence<size>>, no_storage>::type pulled_in_;
};

/// A pipeline named "sequential" at opt level 0.
template <class... Passes>
class sequential : public basic_sequential<detail::sequential_info<"sequential", 0>, std::remove_cv_t<Passes>...> {
  using base = basic_sequential<detail::sequential_info<"sequential", 0>, std::remove_cv_t<Passes>...>;

public:
  using base::base;
};
template <class... Passes>
sequential(Passes...) -> sequential<Passes...>;

/// A pipeline with its own name and opt level (it is skipped, as a whole, below that level).
template <fixed_string Name, int OptLevel, class... Passes>
class named_sequential : public basic_sequential<detail::sequential_info<Name, OptLevel>, std::remove_cv_t<Passes>...> {
  using base = basic_sequential<detail::sequential_info<Name, OptLevel>, std::remove_cv_t<Passes>...>;

public:
  using base::base;
};

}  // namespace kiln
