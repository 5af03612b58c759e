// SPDX-License-Identifier: Apache-2.0
/// \file
/// Cached analyses: what LLVM's and MLIR's analysis managers do, for IRs whose passes return new
/// modules rather than modify them.
///
/// An analysis is a class with a name and a `run` over one IR unit — a module, one of its
/// functions, or anything else with an identity (see `analysis_unit_identity`) — giving a result:
///
/// \code
/// struct use_counts {
///   static constexpr std::string_view name = "use_counts";
///   std::unordered_map<const ir::var_node*, std::size_t> run(const ir::function& f) const;
///   // or run(const ir::function&, kiln::pass_context&), to ask for other analyses
/// };
/// struct my_pass {                                    // a function pass
///   static constexpr std::string_view name = "my_pass";
///   using preserves = kiln::preserves<use_counts>;     // optional: what stays true after it
///   ir::function operator()(const ir::function& f, const ir::ir_module&, kiln::pass_context& ctx) const {
///     std::shared_ptr<const use_counts::result_type> uses = ctx.analysis<use_counts>(f);
///     ...
/// \endcode
///
/// Results are cached in the `pass_context`, per analysis and per unit *object*. The pass
/// infrastructure assumes that passes do not modify what they are given (a pass that changes a
/// module returns a new one; `testing.immutable_module` checks it), so a result stays true for as
/// long as its unit lives, and the cache keeps the unit alive so that its address is never reused.
///
/// Invalidation runs after every pass that is not a pipeline (a pipeline's steps do it), when the
/// module the pass returns is not the one it was given:
/// - results on a function the output still contains (the same object: the pass left it alone) stay;
/// - results the pass preserves (`using preserves = kiln::preserves<A, B>`, or `kiln::preserves_all`)
///   move from the input module to the output module, and from each changed function to the
///   output's function of the same name and kind;
/// - everything else goes: results on the input module, on functions the pass changed or removed,
///   and on units that are not part of the output.
/// A pass that returns its input unchanged keeps everything. With nothing cached, invalidation
/// costs one load and a compare per pass.
///
/// Whether a static pipeline keeps an analysis is known at compile time:
/// `kiln::preserves_analysis<Pass, A>` (a `sequential` keeps what each of its steps keeps).
///
/// Results are handed out as `std::shared_ptr<const R>`: valid for whoever holds them, even after
/// the cache dropped them, and keeping the unit they describe alive (a result may point into it). Threads: function passes running on several threads may ask for
/// analyses at once; a result is computed outside the cache's lock (so analyses can ask for other
/// analyses), and when two threads compute the same one, the first stored wins. An analysis must
/// not ask for itself on the same unit (it would recurse without end).
#pragma once

#include <kiln/pass/module_traits.hpp>

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln {

class pass_context;

/// What a pass preserves: the analyses whose results stay true for its output. `preserves<>`
/// (the default) preserves nothing; `preserves_all` everything.
template <class... Analyses>
struct preserves {};
/// In `preserves<...>`: every analysis.
struct all_analyses {};
using preserves_all = preserves<all_analyses>;
using preserves_none = preserves<>;

namespace detail {
template <class T>
struct is_preserves : std::false_type {};
template <class... As>
struct is_preserves<preserves<As...>> : std::true_type {};

template <class Pass>
struct preserved_of {
  using type = preserves<>;
};
template <class Pass>
  requires requires { typename Pass::preserves; }
struct preserved_of<Pass> {
  using type = typename Pass::preserves;
  static_assert(is_preserves<type>::value,
                "kiln: a pass's `preserves` member must be kiln::preserves<Analyses...> (or kiln::preserves_all)");
};

template <class A, class P>
struct preserves_contains;
template <class A, class... As>
struct preserves_contains<A, preserves<As...>>
    : std::bool_constant<((std::is_same_v<A, As> || std::is_same_v<As, all_analyses>) || ...)> {};

/// One address per type: identifies an analysis, or a unit type, at run time.
template <class T>
inline constexpr char type_tag_v = 0;
}  // namespace detail

/// The analyses a pass declares it preserves (`preserves<>` when it says nothing).
template <class Pass>
using preserved_analyses_of = typename detail::preserved_of<Pass>::type;

/// Whether analysis `A`'s results stay true through `Pass`. For a `sequential`, through each of its
/// steps (those it pulls in as requirements included), whichever of them the context lets run.
template <class Pass, class A>
inline constexpr bool preserves_analysis = [] {
  if constexpr (requires { Pass::template keeps_analysis<A>; })
    return static_cast<bool>(Pass::template keeps_analysis<A>);
  else
    return detail::preserves_contains<A, preserved_analyses_of<Pass>>::value;
}();

/// How the cache tells IR units apart: by the address of the object a handle points to. Handles
/// with `get()` (smart pointers, kiln's `ref`) and raw pointers have one as they are; for other unit
/// types, specialise with `static const void* of(const Unit&) noexcept`. A type without one cannot
/// be analysed (and its units are not tracked through passes).
template <class Unit>
struct analysis_unit_identity {};
template <class Unit>
  requires std::is_pointer_v<Unit>
struct analysis_unit_identity<Unit> {
  static const void* of(Unit u) noexcept { return u; }
};
template <class Unit>
  requires(!std::is_pointer_v<Unit> && requires(const Unit& u) { { u.get() } -> std::convertible_to<const void*>; })
struct analysis_unit_identity<Unit> {
  static const void* of(const Unit& u) noexcept { return u.get(); }
};

/// A unit type the analysis cache can key results on (see `analysis_unit_identity`).
template <class Unit>
concept identifiable_unit = requires(const Unit& u) {
  { analysis_unit_identity<Unit>::of(u) } -> std::convertible_to<const void*>;
};

/// An analysis of `Unit`: a default-constructible class with `name` and a const `run(unit)` or
/// `run(unit, pass_context&)` returning something.
template <class A, class Unit>
concept analysis_of =
    std::default_initializable<A> && requires { std::string_view(A::name); } &&
    (requires(const A& a, const Unit& u, pass_context& ctx) { a.run(u, ctx); } || requires(const A& a, const Unit& u) { a.run(u); });

namespace detail {
template <class A, class Unit>
auto run_analysis(const A& a, const Unit& u, pass_context& ctx) {
  if constexpr (requires { a.run(u, ctx); })
    return a.run(u, ctx);
  else
    return a.run(u);
}
}  // namespace detail

namespace detail {
/// A result with the unit it was computed on.
template <class Unit, class Result>
struct analysed {
  Unit unit;
  Result value;
  template <class Compute>
  analysed(const Unit& u, Compute&& compute) : unit(u), value(compute()) {}
};
}  // namespace detail

/// The result type of analysis `A` on `Unit`.
template <class A, class Unit>
using analysis_result_t = decltype(detail::run_analysis(std::declval<const A&>(), std::declval<const Unit&>(),
                                                        std::declval<pass_context&>()));

/// What an `analysis_cache` did since it was made (or `reset_counts`).
struct analysis_counts {
  std::uint64_t computed = 0;  ///< results computed (cache misses)
  std::uint64_t hits = 0;      ///< results found in the cache
  std::uint64_t carried = 0;   ///< results a pass preserved, moved to its output
  std::uint64_t dropped = 0;   ///< results invalidated
};

/// The cache of analysis results a `pass_context` holds; see the file comment.
class analysis_cache {
public:
  analysis_cache() = default;
  analysis_cache(const analysis_cache& o) {
    const std::lock_guard lock(o.mutex_);
    entries_ = o.entries_;
    any_.store(!entries_.empty(), std::memory_order_relaxed);
  }
  analysis_cache& operator=(const analysis_cache& o) {
    if (this != &o) {
      std::scoped_lock lock(mutex_, o.mutex_);
      entries_ = o.entries_;
      any_.store(!entries_.empty(), std::memory_order_relaxed);
    }
    return *this;
  }

  /// The result of `A` on `unit`: from the cache, or computed (with `ctx` for analyses that ask for
  /// others) and stored. An exception from the analysis propagates and stores nothing.
  template <class A, class Unit>
  auto get(const Unit& unit, pass_context& ctx) {  // -> std::shared_ptr<const analysis_result_t<A, Unit>>
    static_assert(check<A, Unit>());
    if constexpr (usable<A, Unit>) {
      using result = analysis_result_t<A, Unit>;
      const key k{&detail::type_tag_v<A>, analysis_unit_identity<Unit>::of(unit), &detail::type_tag_v<Unit>};
      {
        const std::lock_guard lock(mutex_);
        if (auto it = entries_.find(k); it != entries_.end()) {
          hits_.fetch_add(1, std::memory_order_relaxed);
          return std::static_pointer_cast<const result>(it->second.result);
        }
      }
      // The result and its unit in one block: a result may point into its unit, so whoever holds
      // the result holds the unit.
      auto held = std::make_shared<const detail::analysed<Unit, result>>(unit, [&] { return detail::run_analysis(A{}, unit, ctx); });
      std::shared_ptr<const result> r(held, &held->value);
      const std::lock_guard lock(mutex_);
      computed_.fetch_add(1, std::memory_order_relaxed);
      auto [it, inserted] = entries_.try_emplace(k, entry{held, std::move(r)});
      any_.store(true, std::memory_order_relaxed);
      return std::static_pointer_cast<const result>(it->second.result);
    }
  }

  /// The cached result of `A` on `unit`, or null (never computes).
  template <class A, class Unit>
  auto find(const Unit& unit) const {  // -> std::shared_ptr<const analysis_result_t<A, Unit>>
    static_assert(check<A, Unit>());
    if constexpr (usable<A, Unit>) {
      using result = analysis_result_t<A, Unit>;
      const std::lock_guard lock(mutex_);
      auto it = entries_.find(key{&detail::type_tag_v<A>, analysis_unit_identity<Unit>::of(unit), &detail::type_tag_v<Unit>});
      if (it == entries_.end()) return std::shared_ptr<const result>();
      return std::static_pointer_cast<const result>(it->second.result);
    }
  }

  /// How many results are cached.
  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return entries_.size();
  }
  bool empty() const noexcept { return !any_.load(std::memory_order_relaxed); }

  /// Drops every result.
  void clear() {
    const std::lock_guard lock(mutex_);
    dropped_.fetch_add(entries_.size(), std::memory_order_relaxed);
    entries_.clear();
    any_.store(false, std::memory_order_relaxed);
  }

  analysis_counts counts() const noexcept {
    return {computed_.load(std::memory_order_relaxed), hits_.load(std::memory_order_relaxed),
            carried_.load(std::memory_order_relaxed), dropped_.load(std::memory_order_relaxed)};
  }
  void reset_counts() noexcept {
    computed_.store(0, std::memory_order_relaxed);
    hits_.store(0, std::memory_order_relaxed);
    carried_.store(0, std::memory_order_relaxed);
    dropped_.store(0, std::memory_order_relaxed);
  }

  /// Invalidation after a pass that turned `in` into `out` and preserves `Preserved` (see the file
  /// comment); nothing when nothing is cached. The pipelines test `empty()` first, out of the
  /// passes' code, and call this from the cold `detail::invalidate_analyses`.
  template <class Preserved, module_like Module>
  void after_pass(const Module& in, const Module& out) {
    if (any_.load(std::memory_order_relaxed)) [[unlikely]]
      invalidate<Preserved>(in, out);
  }

private:
  struct key {
    const void* analysis;   // &type_tag_v<A>
    const void* unit;       // the unit's identity
    const char* unit_type;  // &type_tag_v<Unit>
    bool operator==(const key&) const = default;
  };
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept {
      const std::size_t a = std::hash<const void*>{}(k.analysis);
      return a ^ (std::hash<const void*>{}(k.unit) + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));  // unit_type: rarely differs
    }
  };
  struct entry {
    std::shared_ptr<const void> unit;    // keeps the unit alive: its address names no other object
    std::shared_ptr<const void> result;
  };
  using map = std::unordered_map<key, entry, key_hash>;

  template <class A, class Unit>
  static constexpr bool usable = identifiable_unit<Unit> && analysis_of<A, Unit>;

  /// Says what is wrong with asking for `A` on a `Unit`, then true (so that it can be
  /// static_asserted without a second message).
  template <class A, class Unit>
  static constexpr bool check() {
    static_assert(identifiable_unit<Unit>,
                  "kiln: analyses are cached per IR unit object, and this unit type has no identity: give it a "
                  "get() returning the object's address (as smart pointers do), or specialise "
                  "kiln::analysis_unit_identity<Unit> with static const void* of(const Unit&)");
    static_assert(requires { std::string_view(A::name); },
                  "kiln: an analysis needs `static constexpr std::string_view name`");
    static_assert(std::default_initializable<A>, "kiln: an analysis must be default-constructible");
    static_assert(analysis_of<A, Unit>,
                  "kiln: this analysis cannot run on this IR unit: it needs a const member run(const Unit&) or "
                  "run(const Unit&, kiln::pass_context&) returning its result");
    if constexpr (analysis_of<A, Unit>)
      static_assert(!std::is_void_v<analysis_result_t<A, Unit>>, "kiln: an analysis's run must return its result");
    return true;
  }

  template <class... As>
  static bool is_preserved(const void* analysis, preserves<As...>*) noexcept {
    if constexpr ((std::is_same_v<As, all_analyses> || ...))
      return true;
    else
      return ((analysis == &detail::type_tag_v<As>) || ...);
  }

  /// What `invalidate` needs to know of one function kind (`Function`) of a pass's input and
  /// output: the output's functions by name and by identity, and the input's names.
  template <class Function>
  struct function_kind {
    std::unordered_map<std::string, Function> out_by_name;
    std::unordered_set<const void*> out_ids;
    std::unordered_map<const void*, std::string> in_names;

    /// `map_all(fn)` calls fn(name, f) on each function of this kind of a module.
    template <class MapOut, class MapIn>
    function_kind(MapOut map_out, MapIn map_in, bool want_names) {
      if constexpr (identifiable_unit<Function>) {
        map_out([&](std::string_view name, const Function& f) -> Function {
          out_by_name.emplace(std::string(name), f);
          out_ids.insert(analysis_unit_identity<Function>::of(f));
          return f;
        });
        if (want_names)
          map_in([&](std::string_view name, const Function& f) -> Function {
            in_names.emplace(analysis_unit_identity<Function>::of(f), std::string(name));
            return f;
          });
      }
    }
  };

  template <class Preserved, class Module>
  [[gnu::cold, gnu::noinline]] void invalidate(const Module& in, const Module& out) {
    using traits = module_traits<Module>;
    if (traits::same(in, out)) return;  // the pass changed nothing: every result stays true
    using function = typename traits::function_type;
    constexpr bool preserves_some = !std::is_same_v<Preserved, preserves<>>;
    const auto preserved = [](const void* analysis) { return is_preserved(analysis, static_cast<Preserved*>(nullptr)); };
    const auto functions_of = [](const Module& m) {
      return [&m](auto&& fn) { (void)traits::map_functions(m, fn); };
    };
    function_kind<function> functions(functions_of(out), functions_of(in), preserves_some);
    auto kernels = [&] {
      if constexpr (has_kernel_functions<Module>) {
        const auto kernels_of = [](const Module& m) {
          return [&m](auto&& fn) { (void)traits::map_kernel_functions(m, fn); };
        };
        return function_kind<typename traits::kernel_function_type>(kernels_of(out), kernels_of(in), preserves_some);
      } else {
        return 0;
      }
    }();
    const void* in_id = nullptr;
    const void* out_id = nullptr;
    if constexpr (identifiable_unit<Module>) {
      in_id = analysis_unit_identity<Module>::of(in);
      out_id = analysis_unit_identity<Module>::of(out);
    }

    const std::lock_guard lock(mutex_);
    map kept;
    std::vector<std::pair<key, entry>> moved;
    std::uint64_t dropped = 0;
    // A result on a function: stays when `out` has that very function; moves to `out`'s function
    // of the same name when the pass preserves it; goes otherwise.
    auto on_function = [&](auto& kind, const key& k, entry& e) {
      using F = typename std::remove_cvref_t<decltype(kind.out_by_name)>::mapped_type;
      if (kind.out_ids.count(k.unit)) {
        kept.emplace(k, std::move(e));
        return;
      }
      if (preserved(k.analysis))
        if (auto n = kind.in_names.find(k.unit); n != kind.in_names.end())
          if (auto f = kind.out_by_name.find(n->second); f != kind.out_by_name.end()) {
            if constexpr (identifiable_unit<F>)
              moved.push_back({key{k.analysis, analysis_unit_identity<F>::of(f->second), k.unit_type},
                               entry{std::make_shared<const F>(f->second), std::move(e.result)}});
            return;
          }
      ++dropped;
    };
    for (auto& [k, e] : entries_) {
      if (k.unit_type == &detail::type_tag_v<Module>) {
        if (k.unit == out_id)
          kept.emplace(k, std::move(e));
        else if (k.unit == in_id && preserved(k.analysis))
          moved.push_back({key{k.analysis, out_id, k.unit_type}, entry{std::make_shared<const Module>(out), std::move(e.result)}});
        else
          ++dropped;
      } else if (k.unit_type == &detail::type_tag_v<function>) {
        on_function(functions, k, e);
      } else if constexpr (has_kernel_functions<Module>) {
        if (k.unit_type == &detail::type_tag_v<typename traits::kernel_function_type>)
          on_function(kernels, k, e);
        else
          ++dropped;
      } else {
        ++dropped;
      }
    }
    std::uint64_t carried = 0;
    for (auto& [k, e] : moved) carried += kept.try_emplace(k, std::move(e)).second;  // a result on `out` already wins
    dropped += moved.size() - carried;
    entries_ = std::move(kept);
    carried_.fetch_add(carried, std::memory_order_relaxed);
    dropped_.fetch_add(dropped, std::memory_order_relaxed);
    any_.store(!entries_.empty(), std::memory_order_relaxed);
  }

  mutable std::mutex mutex_;
  map entries_;
  std::atomic<bool> any_{false};
  std::atomic<std::uint64_t> computed_{0}, hits_{0}, carried_{0}, dropped_{0};
};

}  // namespace kiln
