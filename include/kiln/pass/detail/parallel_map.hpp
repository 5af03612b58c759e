// SPDX-License-Identifier: Apache-2.0
/// \file
/// A function pass over a module on several threads (`pass_context::set_num_threads`): the
/// functions are listed through `map_functions`, transformed by worker threads that each take the
/// next one, and put back through `map_functions` in the same order, so the result is the
/// sequential result whatever the interleaving.
#pragma once

#include <kiln/pass/pass_context.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::detail {

/// `map(m, each)` with the calls of `each` spread over up to `ctx.num_threads()` threads (the
/// calling thread among them). `map` must visit the same functions in the same order on every
/// call, as `module_traits::map_functions` does for an unchanged module. On a thread that is
/// already running such a task, `map(m, each)` in order (no nested thread pools).
///
/// Failure: the tasks after a failed one are not started (those already running finish), the
/// diagnostics of the functions before the first failure are kept, in order, and the first
/// failing function's exception is rethrown, as a run in order would have done. Statistics added
/// by tasks that ran after it are not taken back.
template <class Function, class Module, class Map, class Each>
Module parallel_map(const Module& m, pass_context& ctx, Map map, Each& each) {
  struct task {
    std::string name;
    Function function;  // a copy: map_functions may hand out temporaries
    std::optional<Function> result;
    std::vector<diagnostic> reports;
    std::exception_ptr error;
  };
  if (parallel_task_scope::active()) return map(m, each);
  std::vector<task> tasks;
  (void)map(m, [&](std::string_view name, const Function& f) -> Function {
    tasks.push_back({std::string(name), f, std::nullopt, {}, nullptr});
    return f;
  });
  const std::size_t count = tasks.size();
  if (count < 2) return map(m, each);

  std::atomic<std::size_t> first_failure{count};
  auto work = [&](std::int64_t index) {
    const auto i = static_cast<std::size_t>(index);
    if (i > first_failure.load(std::memory_order_acquire)) return;  // a run in order stops at the failure
    task& t = tasks[i];
    try {
      const parallel_task_scope scope(ctx, t.reports);
      t.result.emplace(each(std::string_view(t.name), std::as_const(t.function)));
    } catch (...) {
      t.error = std::current_exception();
      std::size_t seen = first_failure.load(std::memory_order_relaxed);
      while (i < seen && !first_failure.compare_exchange_weak(seen, i, std::memory_order_acq_rel)) {
      }
    }
  };
  support::thread_pool* pool = ctx.thread_pool();
  if (pool == nullptr || !pool->try_run(static_cast<std::int64_t>(count), work))
    for (std::size_t i = 0; i < count; ++i) work(static_cast<std::int64_t>(i));

  const std::size_t failed = first_failure.load();
  for (std::size_t i = 0; i < std::min(failed + 1, count); ++i) parallel_task_scope::merge(ctx, tasks[i].reports);
  if (failed < count) std::rethrow_exception(tasks[failed].error);

  std::size_t k = 0;
  return map(m, [&](std::string_view name, const Function&) -> Function {
    if (k >= count || tasks[k].name != name)
      throw usage_error("kiln: module_traits<" + std::string(ir_name_of<Module>()) +
                        ">::map_functions visited the functions of one module in two different orders; a function pass "
                        "on several threads needs one order");
    return std::move(*tasks[k++].result);
  });
}

/// Replaces `cur` by `next` in a pipeline on several threads, releasing what `cur` alone held —
/// typically every function a pass rewrote — on the context's threads instead of on this one
/// (freeing a large module costs as much as a quick pass over it). Plain assignment at one
/// thread, inside a task, or when the pass returned the module unchanged.
template <class Module>
void replace_module(Module& cur, Module&& next, pass_context& ctx) {
  using traits = module_traits<Module>;
  support::thread_pool* pool = ctx.thread_pool();
  if (pool == nullptr || parallel_task_scope::active() || traits::same(cur, next)) {
    cur = std::move(next);
    return;
  }
  using function = typename traits::function_type;
  std::vector<std::optional<function>> functions;
  (void)traits::map_functions(cur, [&](std::string_view, const function& f) -> function {
    functions.emplace_back(f);
    return f;
  });
  cur = std::move(next);  // the old functions now live in `functions` (and wherever else they are shared)
  if (!pool->try_run(static_cast<std::int64_t>(functions.size()), [&](std::int64_t i) { functions[static_cast<std::size_t>(i)].reset(); }))
    functions.clear();
}

}  // namespace kiln::detail
