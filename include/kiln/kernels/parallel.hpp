// SPDX-License-Identifier: Apache-2.0
/// \file
/// A small parallel-for for the kernels, with a thread count the user chooses (default: one
/// thread, i.e. everything runs on the calling thread).
///
///     kernels::set_num_threads(2);                          // the caller and one worker
///     kernels::parallel_for(tasks, [&](std::int64_t i) { ... });
///
/// The workers are created when the count is set; between jobs they spin briefly, then sleep
/// (`support::thread_pool`). Each thread first takes its own task index, the same on every job
/// (the calling thread 0, worker w index w + 1), so that a kernel cut into one part per thread
/// finds its last call's data in the same core's cache; the other indices are handed out through
/// one atomic counter. The calling thread takes part and returns when every task is done,
/// rethrowing the first exception a task threw. A parallel_for inside a task, or one started while the pool is busy with another
/// thread's job, runs on its caller's thread: it never waits for the pool, so it cannot deadlock.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/common.hpp>
#include <kiln/support/thread_pool.hpp>

#include <cstdint>

namespace kiln::kernels {

namespace detail {

/// The kernels' pool (see support/thread_pool.hpp), one per process: defined out of line
/// (`impl/parallel.ipp`), so that kernels compiled for several instruction sets share it.
KILN_DECL support::thread_pool& pool();

}  // namespace detail

/// Sets how many threads the kernels use, the calling thread included (1: no workers).
inline void set_num_threads(std::size_t n) {
  if (n < 1 || n > 1024) fail("set_num_threads", kiln::detail::concat("the thread count must be between 1 and 1024, got ", n));
  if (support::thread_pool::inside_task()) fail("set_num_threads", "cannot be called from inside a parallel_for task");
  detail::pool().resize(n);
}
/// How many threads the kernels use.
inline std::size_t num_threads() { return detail::pool().size(); }

/// Calls `f(i)` for every i in [0, n), spread over the kernels' threads; returns when all calls
/// are done and rethrows the first exception one of them threw. With one thread, inside another
/// parallel_for, or while the pool is busy, the calls run in order on the calling thread.
template <class F>
void parallel_for(std::int64_t n, F&& f) {
  if (n <= 0) return;
  if (n > 1 && detail::pool().try_run(n, f)) return;
  for (std::int64_t i = 0; i < n; ++i) f(i);
}

/// Elements below which an elementwise kernel runs on the calling thread alone. Handing a share
/// to another thread and waiting for it costs one to two microseconds on a shared VM's vCPUs, and
/// a multiply of 2^16 elements (cache-resident) takes under 3 us: only from 2^17 on does a second
/// thread win.
inline constexpr std::int64_t min_parallel_elements = std::int64_t(1) << 17;

namespace detail {

/// How many ranges `parallel_ranges` cuts a loop of `total` elements into.
inline std::int64_t parallel_parts(std::int64_t total, std::int64_t block, std::int64_t min_total) {
  return total < min_total ? 1 : std::min<std::int64_t>(std::int64_t(num_threads()), (total + block - 1) / block);
}

}  // namespace detail

/// Calls `f(begin, end)` for contiguous ranges that partition [0, total), one per thread, cut at
/// multiples of `block` (so that threads do not write one cache line); a single call on the
/// calling thread when `total` is below `min_total`.
template <class F>
void parallel_ranges(std::int64_t total, std::int64_t block, std::int64_t min_total, F&& f) {
  const std::int64_t blocks = (total + block - 1) / block;
  const std::int64_t parts = detail::parallel_parts(total, block, min_total);
  if (parts <= 1) return f(std::int64_t(0), total);
  parallel_for(parts, [&](std::int64_t part) { f(part * blocks / parts * block, std::min(total, (part + 1) * blocks / parts * block)); });
}

/// `plan.for_each_run(f)`, shared out among the kernels' threads by `parallel_ranges` of the
/// loop's row-major order from `min_parallel_elements` on. For loops whose elements are
/// independent, each computed alike whatever range holds it (the same bits on any thread count).
/// On the calling thread alone when operand 0, the output, writes some address twice (a broadcast
/// view: the order of the writes then decides the result).
template <std::size_t N, class F>
void parallel_for_each_run(const loop_plan<N>& plan, F&& f, std::int64_t block = 1024) {
  if (detail::parallel_parts(plan.numel(), block, min_parallel_elements) <= 1 || !plan.distinct_elements(0)) return plan.for_each_run(f);
  parallel_ranges(plan.numel(), block, min_parallel_elements, [&](std::int64_t begin, std::int64_t end) { plan.for_each_run_between(begin, end, f); });
}

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/parallel.ipp>
#endif
