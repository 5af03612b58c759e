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

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/parallel.ipp>
#endif
