// SPDX-License-Identifier: Apache-2.0
/// \file
/// A pool of worker threads that runs one job at a time: `try_run(n, f)` calls `f(i)` for every
/// i in [0, n) on the workers and on the calling thread, which takes part and returns when every
/// call is done. The kernels' `parallel_for` and the pass manager's function passes on several
/// threads both sit on it.
///
///     support::thread_pool pool(2);                 // the caller and one worker
///     pool.try_run(tasks, [&](std::int64_t i) { ... });
///
/// Each thread first takes its own index, the same on every job — the caller index 0, worker w
/// index w + 1 — so that a kernel that cuts its work into one part per thread finds, on each
/// call, the data its last call left in this core's caches (a layer's rows it wrote, which the
/// next layer reads; a GEMM's share of the weights). ONNX Runtime's pool keeps a preferred
/// worker per part for the same reason. The indices past the threads' own ones are handed out
/// through one atomic counter; a thread with nothing left takes the own indices of threads that
/// have not come for them yet (a worker still waking up), so no job waits for a late thread.
/// Between jobs a worker spins for a short
/// while (`spin_time`) before it sleeps on a condition variable, so jobs that follow each other
/// closely — a GEMM's blocks, one function pass after another — start without a kernel wake-up;
/// a caller whose job is done but whose workers are still busy spins the same way before it
/// sleeps. Neither notifies anybody who is not asleep.
///
/// `try_run` returns false, and runs nothing, when the pool has no workers, when it is called from
/// inside one of its own (or any pool's) tasks, and when another thread's job holds the pool: the
/// caller then does the work itself, so nested or concurrent use never waits and cannot deadlock.
/// The first exception a call throws is rethrown once all calls are done; the others are dropped
/// (callers that need every failure catch inside `f`).
#pragma once

#include <kiln/support/config.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::support {

namespace detail {
/// Whether this thread is running a task of some pool: one flag per thread and process, defined
/// out of line (`impl/thread_pool.ipp`) so that code compiled for several instruction sets sees
/// the same one.
KILN_DECL bool& inside_task_flag() noexcept;
}  // namespace detail

class thread_pool {
public:
  /// How long an idle worker, or a caller waiting for its workers, polls before it sleeps.
  static constexpr std::chrono::microseconds spin_time{100};

  /// A pool of `threads` threads, the calling thread included: `threads - 1` workers (fewer when
  /// the system refuses to start more).
  explicit thread_pool(std::size_t threads = 1) { start(threads); }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() { stop(); }

  /// Stops the workers and starts `threads - 1` new ones; waits for another thread's job on this
  /// pool to end first. A `std::logic_error` from inside a task of any pool: a task would wait for
  /// the job it belongs to, or join its own thread.
  void resize(std::size_t threads) {
    if (inside_task()) throw std::logic_error("kiln::support::thread_pool::resize: cannot be called from inside a task");
    std::lock_guard job(job_mutex_);
    stop();
    start(threads);
  }
  /// The thread count, the calling thread included.
  std::size_t size() const noexcept { return workers_.size() + 1; }

  /// True on a thread that is running a task of some pool.
  static bool inside_task() noexcept { return inside_task_flag(); }

  /// Calls `f(i)` for i in [0, n) on the workers and this thread and returns true when all calls
  /// are done (rethrowing the first exception one threw); returns false without calling anything
  /// when the pool cannot take the job (see the file comment).
  template <class F>
  bool try_run(std::int64_t n, F&& f) {
    if (workers_.empty() || n <= 0 || inside_task()) return false;
    std::unique_lock job(job_mutex_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    using fn = std::remove_reference_t<F>;
    call_ = [](void* p, std::int64_t i) { (*static_cast<fn*>(p))(i); };
    target_ = const_cast<void*>(static_cast<const void*>(&f));
    count_ = n;
    owned_ = std::min<std::int64_t>(n, std::int64_t(size()));
    for (std::int64_t i = 0; i < owned_; ++i) taken_[std::size_t(i)].store(false, std::memory_order_relaxed);
    next_.store(owned_, std::memory_order_relaxed);
    error_ = nullptr;
    busy_.store(workers_.size(), std::memory_order_relaxed);
    {
      std::lock_guard lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);
      if (sleepers_ > 0) wake_.notify_all();
    }
    drain(0);
    if (!spin_until([&] { return busy_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return busy_.load(std::memory_order_acquire) == 0; });
    }
    call_ = nullptr;
    target_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }

private:
  static bool& inside_task_flag() noexcept { return detail::inside_task_flag(); }

  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
  }

  /// Polls `ready` for up to `spin_time`; whether it became true.
  template <class Ready>
  static bool spin_until(Ready ready) {
    const auto deadline = std::chrono::steady_clock::now() + spin_time;
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (ready()) return true;
        pause();
      }
      if (std::chrono::steady_clock::now() >= deadline) return ready();
    }
  }

  void start(std::size_t threads) {
    stopping_ = false;
    const std::size_t extra = threads > 1 ? threads - 1 : 0;
    workers_.reserve(extra);
    taken_ = std::make_unique<std::atomic<bool>[]>(extra + 1);
    try {
      for (std::size_t w = 0; w < extra; ++w)
        workers_.emplace_back([this, own = std::int64_t(w) + 1, seen = generation_.load()] { work(own, seen); });
    } catch (const std::system_error&) {  // no more threads: the ones started and the caller do it all
    }
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      generation_.fetch_add(1, std::memory_order_release);
      wake_.notify_all();
    }
    for (std::thread& w : workers_) w.join();
    workers_.clear();
  }

  /// Runs this thread's own index `own` unless another thread took it, then takes indices until
  /// none are left: the counter's, then the own indices nobody has taken yet.
  void drain(std::int64_t own) {
    inside_task_flag() = true;
    if (own < owned_) take(own);
    for (std::int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < count_;) call(i);
    for (std::int64_t i = 0; i < owned_; ++i) take(i);
    inside_task_flag() = false;
  }
  void take(std::int64_t i) {
    if (!taken_[std::size_t(i)].load(std::memory_order_relaxed) && !taken_[std::size_t(i)].exchange(true, std::memory_order_relaxed)) call(i);
  }
  void call(std::int64_t i) {
    try {
      call_(target_, i);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void work(std::int64_t own, std::uint64_t seen) {
    for (;;) {
      if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
        std::unique_lock lock(mutex_);
        ++sleepers_;
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        --sleepers_;
      }
      seen = generation_.load(std::memory_order_acquire);
      {
        std::lock_guard lock(mutex_);  // stopping_ is written under the mutex
        if (stopping_) return;
      }
      drain(own);
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // The caller may be between its check of busy_ and its wait: taking the mutex orders this
        // notification after either.
        { std::lock_guard lock(mutex_); }
        done_.notify_one();
      }
    }
  }

  std::mutex job_mutex_;  ///< one job at a time
  std::mutex mutex_;      ///< guards sleepers_, stopping_, error_ and the condition variables
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> generation_{0};  ///< bumped for each job (and to stop)
  std::atomic<std::size_t> busy_{0};          ///< workers not yet done with the current job
  std::unique_ptr<std::atomic<bool>[]> taken_;  ///< whether own index i of the current job was taken
  std::atomic<std::int64_t> next_{0};          ///< the next index past the own ones
  std::int64_t count_ = 0, owned_ = 0;         ///< the job's indices; how many are some thread's own
  void (*call_)(void*, std::int64_t) = nullptr;
  void* target_ = nullptr;
  std::size_t sleepers_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace kiln::support

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/support/impl/thread_pool.ipp>
#endif
