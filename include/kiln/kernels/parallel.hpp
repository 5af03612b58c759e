// SPDX-License-Identifier: Apache-2.0
/// \file
/// A small parallel-for for the kernels, with a thread count the user chooses (default: one
/// thread, i.e. everything runs on the calling thread).
///
///     kernels::set_num_threads(2);                          // the caller and one worker
///     kernels::parallel_for(tasks, [&](std::int64_t i) { ... });
///
/// The workers are created when the count is set and wait on a condition variable between jobs.
/// A job hands out task indices through one atomic counter; the calling thread takes part and
/// returns when every task is done, rethrowing the first exception a task threw. A parallel_for
/// inside a task, or one started while the pool is busy with another thread's job, runs on its
/// caller's thread: it never waits for the pool, so it cannot deadlock.
#pragma once

#include <kiln/kernels/common.hpp>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::kernels {

namespace detail {

class thread_pool {
public:
  static thread_pool& instance() {
    static thread_pool pool;
    return pool;
  }

  void resize(std::size_t threads) {
    if (inside_task()) fail("set_num_threads", "cannot be called from inside a parallel_for task");
    std::lock_guard job(job_mutex_);  // not while a job runs
    stop_workers();
    threads_ = threads;
    for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  std::size_t size() const noexcept { return threads_; }

  /// Runs task(0..n-1) on the pool and the calling thread; false when the pool was not free (the
  /// caller then runs the tasks itself).
  bool run(std::int64_t n, const std::function<void(std::int64_t)>& task) {
    if (inside_task() || threads_ <= 1) return false;
    std::unique_lock job(job_mutex_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    {
      std::lock_guard lock(mutex_);
      task_ = &task;
      count_ = n;
      next_.store(0);
      busy_ = workers_.size();
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

  static bool& inside_task() {
    thread_local bool inside = false;
    return inside;
  }

  ~thread_pool() { stop_workers(); }

private:
  thread_pool() = default;

  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
    stopping_ = false;
  }

  /// Takes tasks until none are left.
  void drain() {
    inside_task() = true;
    for (std::int64_t i; (i = next_.fetch_add(1)) < count_;) {
      try {
        (*task_)(i);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    inside_task() = false;
  }

  void work() {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      drain();
      std::lock_guard lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::mutex job_mutex_;  ///< one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::size_t threads_ = 1;
  const std::function<void(std::int64_t)>* task_ = nullptr;
  std::int64_t count_ = 0;
  std::atomic<std::int64_t> next_{0};
  std::size_t busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace detail

/// Sets how many threads the kernels use, the calling thread included (1: no workers).
inline void set_num_threads(std::size_t n) {
  if (n < 1 || n > 1024) fail("set_num_threads", kiln::detail::concat("the thread count must be between 1 and 1024, got ", n));
  detail::thread_pool::instance().resize(n);
}
/// How many threads the kernels use.
inline std::size_t num_threads() { return detail::thread_pool::instance().size(); }

/// Calls `f(i)` for every i in [0, n), spread over the kernels' threads; returns when all calls
/// are done and rethrows the first exception one of them threw. With one thread, inside another
/// parallel_for, or while the pool is busy, the calls run in order on the calling thread.
template <class F>
void parallel_for(std::int64_t n, F&& f) {
  if (n <= 0) return;
  if (n > 1) {
    const std::function<void(std::int64_t)> task = std::ref(f);
    if (detail::thread_pool::instance().run(n, task)) return;
  }
  for (std::int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace kiln::kernels
