// SPDX-License-Identifier: Apache-2.0
// support::thread_pool, under the kernels' parallel_for and the pass manager's function passes:
// every index once, jobs back to back (workers still spinning) and after a pause (workers asleep),
// exceptions, nesting, two callers at once, resizing. Part of thread_tests (run under TSan).
#include <kiln/support/thread_pool.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using kiln::support::thread_pool;

namespace {

/// Runs a job of `n` indices and checks that each ran once; the threads that took part.
std::set<std::thread::id> run_once_each(thread_pool& pool, std::int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::mutex m;
  std::set<std::thread::id> ids;
  const bool ran = pool.try_run(n, [&](std::int64_t i) {
    ++hits[static_cast<std::size_t>(i)];
    const std::lock_guard lock(m);
    ids.insert(std::this_thread::get_id());
  });
  CHECK(ran);
  for (const auto& h : hits) CHECK(h.load() == 1);
  return ids;
}

}  // namespace

TEST_CASE("a thread pool runs every index once, for jobs back to back and after its workers fell asleep") {
  thread_pool pool(3);
  CHECK(pool.size() == 3);
  std::set<std::thread::id> all;
  for (int job = 0; job < 200; ++job) {  // back to back: the workers are still spinning
    const auto ids = run_once_each(pool, 1 + job % 37);
    all.insert(ids.begin(), ids.end());
  }
  CHECK(all.size() <= 3);
  CHECK(all.count(std::this_thread::get_id()) == 1);  // the caller takes part
  for (int job = 0; job < 3; ++job) {                  // after a pause: the workers sleep, then wake
    std::this_thread::sleep_for(thread_pool::spin_time * 5);
    run_once_each(pool, 64);
  }
  // Work that lasts: more than one thread takes part (the workers wake while the caller works).
  std::mutex m;
  std::set<std::thread::id> ids;
  CHECK(pool.try_run(64, [&](std::int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::lock_guard lock(m);
    ids.insert(std::this_thread::get_id());
  }));
  CHECK(ids.size() >= 2);
}

TEST_CASE("a thread pool gives each thread the same index on every job: the caller 0, worker w index w + 1") {
  thread_pool pool(3);
  // A job of one index per thread whose tasks wait for each other: nobody finishes early and takes
  // another's index, so the threads are those that came for their own.
  auto owners = [&] {
    std::vector<std::thread::id> owner(3);
    std::atomic<int> started{0};
    CHECK(pool.try_run(3, [&](std::int64_t i) {
      owner[static_cast<std::size_t>(i)] = std::this_thread::get_id();
      ++started;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (started.load() < 3 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    }));
    CHECK(started.load() == 3);
    return owner;
  };
  const auto first = owners();
  CHECK(first[0] == std::this_thread::get_id());
  CHECK(first[1] != first[2]);
  CHECK(first[1] != first[0]);
  for (int job = 0; job < 20; ++job) {
    if (job % 5 == 0) std::this_thread::sleep_for(thread_pool::spin_time * 5);  // and after the workers slept
    CHECK(owners() == first);
  }
}

TEST_CASE("a thread pool rethrows the first exception once every index is done, and stays usable") {
  thread_pool pool(2);
  std::atomic<int> ran = 0;
  try {
    pool.try_run(100, [&](std::int64_t i) {
      ++ran;
      if (i == 41) throw std::invalid_argument("index 41");
    });
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "index 41");
  }
  CHECK(ran.load() == 100);  // the other indices still ran
  run_once_each(pool, 50);
}

TEST_CASE("a thread pool declines what it cannot take, so that nothing waits on it") {
  thread_pool none(1);  // no workers: nothing to gain
  CHECK(none.size() == 1);
  CHECK_FALSE(none.try_run(10, [](std::int64_t) {}));
  thread_pool pool(2);
  CHECK_FALSE(pool.try_run(0, [](std::int64_t) { FAIL("called"); }));
  CHECK_FALSE(thread_pool::inside_task());
  // Inside a task (of this pool or any other) it declines: the caller runs the inner loop itself.
  std::atomic<int> declined = 0;
  CHECK(pool.try_run(8, [&](std::int64_t) {
    CHECK(thread_pool::inside_task());
    if (!pool.try_run(4, [](std::int64_t) {})) ++declined;
    if (!none.try_run(4, [](std::int64_t) {})) ++declined;
  }));
  CHECK(declined.load() == 16);
  CHECK_FALSE(thread_pool::inside_task());
  // Two callers at once: each job runs in full, on the pool or on its caller's thread.
  std::atomic<int> total = 0, declined_by_busy = 0;
  auto caller = [&] {
    for (int job = 0; job < 50; ++job) {
      auto body = [&](std::int64_t) { ++total; };
      if (!pool.try_run(20, body)) {
        ++declined_by_busy;
        for (int i = 0; i < 20; ++i) body(i);
      }
    }
  };
  std::thread other(caller);
  caller();
  other.join();
  CHECK(total.load() == 2 * 50 * 20);
}

TEST_CASE("a thread pool can be resized, and stops its workers when destroyed") {
  thread_pool pool(2);
  run_once_each(pool, 10);
  pool.resize(4);
  CHECK(pool.size() == 4);
  run_once_each(pool, 100);
  pool.resize(1);
  CHECK(pool.size() == 1);
  CHECK_FALSE(pool.try_run(10, [](std::int64_t) {}));
  pool.resize(3);
  run_once_each(pool, 10);
  // Not from inside a task (of this pool or another): the task would wait on its own job.
  std::atomic<int> refused{0};
  thread_pool other(2);
  CHECK(pool.try_run(6, [&](std::int64_t) {
    for (thread_pool* p : {&pool, &other}) {
      try {
        p->resize(2);
      } catch (const std::logic_error& e) {
        if (std::string(e.what()) == "kiln::support::thread_pool::resize: cannot be called from inside a task") ++refused;
      }
    }
  }));
  CHECK(refused == 12);
  CHECK(pool.size() == 3);
  run_once_each(pool, 10);
  { thread_pool brief(4); }  // destroyed at once: its workers, spinning or asleep, stop
  {
    thread_pool brief(2);
    std::this_thread::sleep_for(thread_pool::spin_time * 5);
  }
}
