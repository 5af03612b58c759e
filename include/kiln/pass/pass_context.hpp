// SPDX-License-Identifier: Apache-2.0
/// \file
/// `pass_context`: how a pipeline run is configured (the design's PassContext) — opt level,
/// required and disabled passes, typed config, diagnostics, instruments — and
/// `pass_context_scope`, the RAII form of the design's `with PassContext(...)`.
///
/// Each thread has a default context and a stack of scoped ones; `pass_context::current()` is the
/// innermost scope's context on the calling thread, or that thread's default.
///
/// Instrument life cycle, as the design lays it out:
/// - entering a scope calls `enter_pass_ctx` on each instrument in order; if one throws, the
///   instruments are cleared, `exit_pass_ctx` runs on those that had entered, the exception
///   propagates and the scope is not entered;
/// - leaving a scope calls `exit_pass_ctx` on each in order; if one throws, the instruments are
///   cleared and the ones after it do not exit (while another exception is unwinding the scope,
///   the exit's exception is dropped so the first one reaches the caller);
/// - `override_instruments` exits the current instruments, then enters the new ones.
///
/// Threads: a context is used by one pipeline run at a time, but within a run, function passes may
/// run on several threads (`set_num_threads`; see `run.hpp`). What a pass can touch from there is
/// safe to use concurrently: `statistic` (atomic counters), the diagnostics (each function's
/// reports are kept apart and added in function order), config reads, `analysis` and `current()`.
/// Changing a context (its options, config or instruments) while a run uses it is not: give each
/// thread that compiles its own context (or its own `pass_context_scope` of one), as TVM's
/// PassContext is per thread. Scopes are per thread: a scope entered on one thread is not seen by
/// another.
#pragma once

#include <kiln/pass/analysis.hpp>
#include <kiln/pass/diagnostics.hpp>
#include <kiln/pass/instrument.hpp>
#include <kiln/pass/pass_config.hpp>
#include <kiln/pass/pass_info.hpp>
#include <kiln/support/thread_pool.hpp>

#include <algorithm>
#include <any>
#include <atomic>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

class pass_context_scope;
namespace detail {
class parallel_task_scope;

/// A mutex that a copy of its owner does not share (a copied context gets a fresh one).
struct copyable_mutex {
  std::mutex m;
  copyable_mutex() = default;
  copyable_mutex(const copyable_mutex&) noexcept {}
  copyable_mutex& operator=(const copyable_mutex&) noexcept { return *this; }
};
}  // namespace detail

/// A statistic's counter (`pass_context::statistic`): an unsigned 64-bit count that passes running
/// on several threads may add to at once (relaxed atomic additions, as LLVM's `Statistic`).
class statistic_counter {
public:
  statistic_counter(std::uint64_t v = 0) noexcept : v_(v) {}  // NOLINT: a counter is its count
  statistic_counter(const statistic_counter& o) noexcept : v_(o.value()) {}
  statistic_counter& operator=(const statistic_counter& o) noexcept {
    v_.store(o.value(), std::memory_order_relaxed);
    return *this;
  }
  statistic_counter& operator+=(std::uint64_t n) noexcept {
    v_.fetch_add(n, std::memory_order_relaxed);
    return *this;
  }
  statistic_counter& operator++() noexcept { return *this += 1; }
  std::uint64_t operator++(int) noexcept { return v_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }
  operator std::uint64_t() const noexcept { return value(); }  // NOLINT: reads as its count

private:
  std::atomic<std::uint64_t> v_;
};

/// TVM's `testing.immutable_module`: when true, each pass's input module is hashed before and after
/// the pass (`module_traits<M>::structural_hash`), and a pass that changed it fails, named.
inline const pass_config_option<bool> immutable_module_option{
    "testing.immutable_module", "check that no pass modifies the module it is given (structural hash before and after)"};

namespace detail {
/// Not an instrument hook: the bit in a context's hook mask that sends every pass down the
/// instrumented path because the immutable-module check is on.
inline constexpr unsigned immutable_module_bit = 1u << 7;
}  // namespace detail

class pass_context {
public:
  /// A context at opt level 2, with no required or disabled passes, config or instruments.
  pass_context() = default;
  /// A context at `opt_level` (a `usage_error` when negative).
  explicit pass_context(int opt_level) { set_opt_level(opt_level); }

  /// The innermost scoped context on this thread, or this thread's default context.
  static pass_context& current() noexcept;
  /// True when a `pass_context_scope` is open on this thread (`current()` is not the default).
  static bool in_scope() noexcept;

  // ---- opt level, required and disabled passes -------------------------------------------------

  int opt_level() const noexcept { return opt_level_; }
  /// A `usage_error` unless `level >= 0`.
  pass_context& set_opt_level(int level) {
    if (level < 0)
      throw usage_error("kiln::pass_context: opt_level must be 0 or more, not " + std::to_string(level));
    opt_level_ = level;
    return *this;
  }
  const std::vector<std::string>& required_passes() const noexcept { return required_; }
  const std::vector<std::string>& disabled_passes() const noexcept { return disabled_; }
  /// Runs the pass `name` whatever its opt level, without asking instruments' `should_run`.
  pass_context& require(std::string name) {
    required_.push_back(std::move(name));
    refresh();
    return *this;
  }
  /// Skips the pass `name` wherever it appears.
  pass_context& disable(std::string name) {
    disabled_.push_back(std::move(name));
    refresh();
    return *this;
  }
  bool is_required(std::string_view name) const noexcept {
    return std::find(required_.begin(), required_.end(), name) != required_.end();
  }
  bool is_disabled(std::string_view name) const noexcept {
    return std::find(disabled_.begin(), disabled_.end(), name) != disabled_.end();
  }

  /// The design's PassEnabled with TVM's rule: disabled by name → skip; required by name → run;
  /// otherwise run when the context's opt level is at least the pass's.
  skip_reason check_enabled(const pass_info& info) const noexcept {
    if (has_names_) [[unlikely]] {
      if (is_disabled(info.name)) return skip_reason::disabled;
      if (is_required(info.name)) return skip_reason::none;
    }
    return opt_level_ >= info.opt_level ? skip_reason::none : skip_reason::opt_level;
  }

  /// True when a pipeline whose passes are all at `max_opt_level` or below can run every pass
  /// without consulting the context pass by pass: no names, no instruments, level high enough.
  /// (And on one thread: the direct path does not look at the thread count.)
  bool runs_everything_up_to(int max_opt_level) const noexcept {
    return !has_names_ && hooks_ == 0 && opt_level_ >= max_opt_level && num_threads_ == 1;
  }

  // ---- threads ----------------------------------------------------------------------------------

  /// Function and kernel-function passes run on up to `n` threads, each thread taking the next
  /// function (MLIR's multithreaded pass manager; `n` = 1, the default, runs them in order on the
  /// calling thread). The result is the sequential one: each function is transformed on its own,
  /// the module is rebuilt in function order, diagnostics come in function order, and a failure is
  /// the one the first failing function (in order) raised. Instruments are called once per pass,
  /// on the calling thread, before and after all of its functions. A pass's call operator is then
  /// called from several threads at once, so it must not change shared state unsynchronised; one
  /// that does declares `static constexpr bool thread_safe = false` and always runs in order.
  /// Passes run inside a function on a worker thread run in order. The `n - 1` worker threads
  /// start here and live as long as the context (and its copies, which share them); between
  /// passes they spin briefly, then sleep. A `usage_error` unless 1 <= n <= 1024, and from inside
  /// a task on a pool's threads (a function pass running on several threads, a kernel's
  /// parallel_for): replacing the pool there would stop the threads the caller is running on.
  pass_context& set_num_threads(std::size_t n) {
    if (n < 1 || n > 1024)
      throw usage_error("kiln::pass_context::set_num_threads: the thread count must be between 1 and 1024, got " +
                        std::to_string(n));
    if (support::thread_pool::inside_task())
      throw usage_error("kiln::pass_context::set_num_threads: cannot be called from inside a task running on a thread "
                        "pool (a function pass on several threads, or a parallel_for task)");
    if (n == num_threads_) return *this;
    pool_ = n > 1 ? std::make_shared<support::thread_pool>(n) : nullptr;
    num_threads_ = n;
    return *this;
  }
  std::size_t num_threads() const noexcept { return num_threads_; }
  /// The worker threads behind `set_num_threads` (null at one thread).
  support::thread_pool* thread_pool() const noexcept { return pool_.get(); }

  // ---- config -----------------------------------------------------------------------------------

  /// Sets a registered option. A `usage_error` (and no change) when the key is not registered or
  /// the value does not fit the registered type.
  template <class V>
  pass_context& set_config(std::string_view key, V&& value) {
    return set_config_any(key, std::any(std::forward<V>(value)));
  }
  template <class T, class V>
  pass_context& set_config(const pass_config_option<T>& option, V&& value) {
    return set_config_any(option.key(), std::any(std::forward<V>(value)));
  }
  /// Sets a registered option from text, parsed as the registered type (`"16"`, `"true"`).
  pass_context& set_config_from_text(std::string_view key, std::string_view text) {
    pass_config_entry e = pass_config_registry::global().find(key, "kiln::pass_context::set_config_from_text");
    if (!e.parse)
      throw usage_error("kiln::pass_context::set_config_from_text: config option '" + e.key + "' has type " + e.type_name +
                        ", which has no text form");
    std::any v = e.parse(text);
    if (!v.has_value())
      throw usage_error("kiln::pass_context::set_config_from_text: config option '" + e.key + "' takes " + e.type_name +
                        ", and '" + std::string(text) + "' is not one");
    config_.insert_or_assign(e.key, std::move(v));
    refresh();
    return *this;
  }

  /// The value of a registered option, or `fallback` when it is not set. It may be read as
  /// another type than the registered one when its value converts without loss, by the rules
  /// `set_config` applies (`config<std::int64_t>` of an int option; `config<int>` of an int64
  /// option while its value fits). A `usage_error` when the key is not registered, or the type
  /// cannot hold the option's values (a string read as int) or its present value.
  template <class T>
  T config(std::string_view key, T fallback) const {
    pass_config_entry e = pass_config_registry::global().find(key, "kiln::pass_context::config");
    auto it = config_.find(key);
    if (e.type == typeid(T)) return it == config_.end() ? fallback : std::any_cast<T>(it->second);
    const std::any probe = it != config_.end() ? it->second : (e.zero ? e.zero() : std::any());
    std::optional<T> v = probe.has_value() ? detail::coerce<T>(probe) : std::nullopt;
    if (!v)
      throw usage_error("kiln::pass_context::config: config option '" + e.key + "' is registered as " + e.type_name +
                        ", and " + (it != config_.end() ? "its value does not fit " : "cannot be read as ") +
                        detail::config_type_name<T>());
    return it == config_.end() ? fallback : *std::move(v);
  }
  template <class T>
  T config(const pass_config_option<T>& option, T fallback) const {
    return config<T>(option.key(), std::move(fallback));
  }
  bool has_config(std::string_view key) const { return config_.find(key) != config_.end(); }
  /// Every option set, in key order, as text that `set_config_from_text` reads back; nothing for an
  /// option whose type has no text form.
  std::vector<std::pair<std::string, std::optional<std::string>>> config_as_text() const {
    std::vector<std::pair<std::string, std::optional<std::string>>> out;
    for (const auto& [key, value] : config_) {
      const pass_config_entry e = pass_config_registry::global().find(key, "kiln::pass_context::config_as_text");
      out.emplace_back(key, e.format ? std::optional<std::string>(e.format(value)) : std::nullopt);
    }
    return out;
  }

  /// True when `testing.immutable_module` is set to true.
  bool checks_immutable_module() const noexcept { return immutable_module_; }

  // ---- analyses ----------------------------------------------------------------------------------

  /// The result of analysis `A` on `unit` (a module, a function, ...), computed once per unit
  /// object and cached until a pass invalidates it; see `analysis.hpp`.
  template <class A, class Unit>
  auto analysis(const Unit& unit) {  // -> std::shared_ptr<const analysis_result_t<A, Unit>>
    return analyses_.get<A>(unit, *this);
  }
  /// The cached result of `A` on `unit`, or null; never computes it.
  template <class A, class Unit>
  auto cached_analysis(const Unit& unit) const {
    return analyses_.find<A>(unit);
  }
  /// The cache itself: its size, its counts (computed, hits, carried, dropped), `clear()`.
  analysis_cache& analyses() noexcept { return analyses_; }
  const analysis_cache& analyses() const noexcept { return analyses_; }

  // ---- statistics --------------------------------------------------------------------------------

  /// The counter `name` of pass `pass` (LLVM's `-stats`, MLIR's pass statistics), created at zero:
  /// `ctx.statistic("fold_constant", "folded") += n`. Counters add up over every run in this
  /// context until `clear_statistics`.
  /// Safe to call, and to add to, from function passes running on several threads.
  statistic_counter& statistic(std::string_view pass, std::string_view name) {
    const std::lock_guard lock(mutex_.m);
    auto p = statistics_.find(pass);
    if (p == statistics_.end()) p = statistics_.emplace(std::string(pass), statistic_map{}).first;
    auto c = p->second.find(name);
    if (c == p->second.end()) c = p->second.emplace(std::string(name), 0).first;
    return c->second;
  }
  /// The counters of one pass, by name.
  using statistic_map = std::map<std::string, statistic_counter, std::less<>>;
  /// Every counter: pass name → counter name → value, ordered.
  const std::map<std::string, statistic_map, std::less<>>& statistics() const noexcept { return statistics_; }
  /// Clears the counters, the analysis cache's counts included (not its results).
  void clear_statistics() noexcept {
    statistics_.clear();
    analyses_.reset_counts();
  }
  /// The counters as LLVM prints them: `  12 fold_constant - folded`, right-aligned, one per line,
  /// under a header, then what the analysis cache did (`analysis cache - results computed`, found,
  /// carried, dropped) when it was used; empty when there is nothing to say.
  std::string statistics_report() const {
    struct row {
      std::string_view pass, name;
      std::uint64_t count;
    };
    std::vector<row> rows;
    for (const auto& [pass, counters] : statistics_)
      for (const auto& [name, n] : counters) rows.push_back({pass, name, n.value()});
    // What the analysis cache did, when it did anything.
    const analysis_counts a = analyses_.counts();
    const std::pair<std::string_view, std::uint64_t> cache[] = {
        {"results computed", a.computed}, {"results found", a.hits}, {"results carried", a.carried}, {"results dropped", a.dropped}};
    for (auto [name, n] : cache)
      if (n) rows.push_back({"analysis cache", name, n});
    if (rows.empty()) return {};
    std::size_t width = 1, pass_width = 1;
    for (const row& r : rows) {
      width = std::max(width, std::to_string(r.count).size());
      pass_width = std::max(pass_width, r.pass.size());
    }
    std::string out = "===-------------------------------------------------------------------------===\n"
                      "                          ... Statistics Collected ...\n"
                      "===-------------------------------------------------------------------------===\n\n";
    for (const row& r : rows) {
      const std::string count = std::to_string(r.count);
      out.append(width - count.size() + 1, ' ').append(count).append(" ").append(r.pass);
      out.append(pass_width - r.pass.size(), ' ').append(" - ").append(r.name).append("\n");
    }
    return out;
  }

  // ---- diagnostics -------------------------------------------------------------------------------

  /// Reports an error: the pass running now fails when it returns (a `pass_error` that carries it).
  void error(std::string message, std::string where = {}) { report(severity::error, std::move(message), std::move(where)); }
  void warning(std::string message, std::string where = {}) { report(severity::warning, std::move(message), std::move(where)); }
  void note(std::string message, std::string where = {}) { report(severity::note, std::move(message), std::move(where)); }
  void report(kiln::severity s, std::string message, std::string where = {});
  /// Everything reported in this context, each stamped with the pass that reported it.
  const std::vector<diagnostic>& diagnostics() const noexcept { return diagnostics_; }
  std::size_t error_count() const noexcept { return error_count_; }
  void clear_diagnostics() noexcept {
    diagnostics_.clear();
    error_count_ = 0;
  }

  // ---- instruments -------------------------------------------------------------------------------

  const std::vector<instrument>& instruments() const noexcept { return instruments_; }
  /// True when something runs around each pass: an instrument's hook, or the immutable-module check.
  bool has_instruments() const noexcept { return hooks_ != 0; }
  /// True when some instrument has hook `h` (one load and test on the pipeline's path).
  bool has_hook(hook h) const noexcept { return (hooks_ & unsigned(h)) != 0; }

  /// The design's `override_instruments`: exits the current instruments, then enters `list`.
  void override_instruments(std::vector<instrument> list) {
    exit_instruments();
    instruments_ = std::move(list);
    refresh();
    enter_instruments();
  }
  /// Replaces the instruments without calling their enter/exit hooks, for setting up a context
  /// before its scope is entered. A `usage_error` (and no change) while a scope of this context is
  /// open: its instruments have entered, and the new ones would never enter; use
  /// `override_instruments`.
  pass_context& set_instruments(std::vector<instrument> list) {
    if (open_scopes_ > 0)
      throw usage_error("kiln::pass_context::set_instruments: a scope of this context is open, so its instruments have "
                        "entered; replacing them now would leave the new ones never entered and the old ones never "
                        "exited. Use override_instruments, which exits the old ones and enters the new ones.");
    instruments_ = std::move(list);
    refresh();
    return *this;
  }
  /// The number of `pass_context_scope`s of this context open now (a context is scoped on one thread
  /// at a time).
  int open_scopes() const noexcept { return open_scopes_; }

  /// The design's InstrumentEnterPassContext.
  void enter_instruments() {
    if (!has_hook(hook::enter_pass_ctx)) return;
    std::size_t entered = 0;
    try {
      for (; entered < instruments_.size(); ++entered) instruments_[entered].enter_pass_ctx();
    } catch (...) {
      std::vector<instrument> done(instruments_.begin(), instruments_.begin() + static_cast<std::ptrdiff_t>(entered));
      instruments_.clear();
      refresh();
      for (const instrument& i : done) {
        try {
          i.exit_pass_ctx();
        } catch (...) {  // the enter failure is the one to report
        }
      }
      throw;
    }
  }
  /// The design's InstrumentExitPassContext.
  void exit_instruments() {
    if (!has_hook(hook::exit_pass_ctx)) return;
    try {
      for (const instrument& i : instruments_) i.exit_pass_ctx();
    } catch (...) {
      instruments_.clear();
      refresh();
      throw;
    }
  }

private:
  friend class pass_context_scope;
  friend class detail::parallel_task_scope;

  struct thread_state;
  static thread_state& state() noexcept;

  pass_context& set_config_any(std::string_view key, const std::any& value) {
    pass_config_entry e = pass_config_registry::global().find(key, "kiln::pass_context::set_config");
    std::any v = e.coerce(value);
    if (!v.has_value())
      throw usage_error("kiln::pass_context::set_config: config option '" + e.key + "' takes " + e.type_name + ", not " +
                        detail::held_type_name(value));
    config_.insert_or_assign(e.key, std::move(v));
    refresh();
    return *this;
  }

  void refresh() noexcept {
    has_names_ = !required_.empty() || !disabled_.empty();
    hooks_ = 0;
    for (const instrument& i : instruments_) hooks_ |= i.hooks();
    auto it = config_.find(immutable_module_option.key());
    immutable_module_ = it != config_.end() && std::any_cast<bool>(it->second);
    if (immutable_module_) hooks_ |= detail::immutable_module_bit;
  }

  int opt_level_ = 2;
  bool has_names_ = false;
  unsigned hooks_ = 0;
  std::vector<std::string> required_;
  std::vector<std::string> disabled_;
  std::map<std::string, std::any, std::less<>> config_;
  std::vector<diagnostic> diagnostics_;
  std::size_t error_count_ = 0;
  std::vector<instrument> instruments_;
  int open_scopes_ = 0;
  bool immutable_module_ = false;
  std::map<std::string, statistic_map, std::less<>> statistics_;
  std::size_t num_threads_ = 1;
  std::shared_ptr<support::thread_pool> pool_;  // shared by copies of this context
  analysis_cache analyses_;
  detail::copyable_mutex mutex_;  // guards statistics_ and diagnostics_ while function passes run on threads
};

struct pass_context::thread_state {
  struct entry {
    pass_context* context;
    pass_context_scope* scope;
  };
  pass_context default_context;
  std::vector<entry> stack;
  // Inside a function pass's task on several threads (detail::parallel_task_scope): reports to
  // `task_context` go to `task_diagnostics`, kept apart per function until they are merged in order.
  const pass_context* task_context = nullptr;
  std::vector<diagnostic>* task_diagnostics = nullptr;
};
inline pass_context::thread_state& pass_context::state() noexcept {
  thread_local thread_state s;
  return s;
}
inline pass_context& pass_context::current() noexcept {
  thread_state& s = state();
  return s.stack.empty() ? s.default_context : *s.stack.back().context;
}
inline bool pass_context::in_scope() noexcept { return !state().stack.empty(); }

inline void pass_context::report(kiln::severity s, std::string message, std::string where) {
  thread_state& t = state();
  if (t.task_context == this) {  // a function's task on a worker thread: kept apart, merged later
    t.task_diagnostics->push_back({s, {}, std::move(where), std::move(message)});
    return;
  }
  const std::lock_guard lock(mutex_.m);
  diagnostics_.push_back({s, {}, std::move(where), std::move(message)});
  if (s == severity::error) ++error_count_;
}

namespace detail {

/// One function's task of a function pass running on several threads: on the thread that runs it,
/// `pass_context::current()` is the pipeline's context, and what the task reports to that context
/// is collected in `sink` (merged in function order when every task is done). Not an instrument
/// scope: instruments neither enter nor exit.
class parallel_task_scope {
public:
  parallel_task_scope(pass_context& ctx, std::vector<diagnostic>& sink)
      : state_(pass_context::state()), context_(state_.task_context), diagnostics_(state_.task_diagnostics) {
    state_.stack.push_back({&ctx, nullptr});
    state_.task_context = &ctx;
    state_.task_diagnostics = &sink;
  }
  parallel_task_scope(const parallel_task_scope&) = delete;
  parallel_task_scope& operator=(const parallel_task_scope&) = delete;
  ~parallel_task_scope() {
    state_.stack.pop_back();
    state_.task_context = context_;
    state_.task_diagnostics = diagnostics_;
  }
  /// True on a thread that is running a task now (where function passes run in order).
  static bool active() noexcept { return pass_context::state().task_context != nullptr; }
  /// Adds one task's reports to the context, as if the task had reported them directly.
  static void merge(pass_context& ctx, std::vector<diagnostic>& reports) {
    const std::lock_guard lock(ctx.mutex_.m);
    for (diagnostic& d : reports) {
      if (d.severity == severity::error) ++ctx.error_count_;
      ctx.diagnostics_.push_back(std::move(d));
    }
  }

private:
  pass_context::thread_state& state_;
  const pass_context* context_;
  std::vector<diagnostic>* diagnostics_;
};

}  // namespace detail

/// Makes `ctx` the current context of this thread until the scope ends (the design's
/// `with PassContext(...)`), entering its instruments first and exiting them at the end.
/// Scopes nest; the innermost wins, and its end restores the outer one.
///
/// Scopes must end innermost first, on the thread that opened them. One that ends while a scope
/// opened after it is still open (possible when scopes live on the heap, or in a binding to another
/// language) is closed together with the scopes above it: `current()` falls back to what it was
/// before this scope, never to a context that may be gone. The scope's instruments still exit, and
/// then a `usage_error` says what happened (unless another exception is already unwinding). The
/// inner scopes, when they end later, only exit their instruments.
class pass_context_scope {
public:
  explicit pass_context_scope(pass_context& ctx) : ctx_(ctx), uncaught_(std::uncaught_exceptions()) {
    ctx.enter_instruments();  // throws before anything is pushed
    pass_context::state().stack.push_back({&ctx, this});
    ++ctx.open_scopes_;
  }
  pass_context_scope(const pass_context_scope&) = delete;
  pass_context_scope& operator=(const pass_context_scope&) = delete;

  ~pass_context_scope() noexcept(false) {
    auto& stack = pass_context::state().stack;
    --ctx_.open_scopes_;
    std::size_t above = 0;  // scopes opened after this one and still open
    bool found = false;
    for (std::size_t i = stack.size(); i-- > 0;) {
      if (stack[i].scope == this) {
        found = true;
        above = stack.size() - 1 - i;
        for (std::size_t j = i + 1; j < stack.size(); ++j)
          if (stack[j].scope) stack[j].scope->orphaned_ = true;  // null: a function pass's task
        stack.resize(i);
        break;
      }
    }
    const bool unwinding = std::uncaught_exceptions() > uncaught_;
    if (unwinding) {
      try {
        ctx_.exit_instruments();
      } catch (...) {  // keep the exception that is already unwinding
      }
      return;
    }
    ctx_.exit_instruments();
    if (found && above > 0)
      throw usage_error("kiln::pass_context_scope: a scope ended while " + std::to_string(above) +
                        " scope(s) opened after it were still open; scopes must end innermost first. The inner "
                        "scopes were closed with it: pass_context::current() is now the context from before it.");
    if (!found && !orphaned_)
      throw usage_error("kiln::pass_context_scope: a scope ended on another thread than the one that opened it; "
                        "the opening thread's current context is left to it");
  }

  pass_context& context() const noexcept { return ctx_; }

private:
  pass_context& ctx_;
  int uncaught_;
  bool orphaned_ = false;  // closed by an outer scope that ended first
};

}  // namespace kiln
