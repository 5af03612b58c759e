// SPDX-License-Identifier: Apache-2.0
#include <kiln/runtime/allocator.hpp>
#include <kiln/runtime/tensor.hpp>

#include <doctest/doctest.h>

using namespace kiln;
using namespace kiln::runtime;

TEST_CASE("size classes: multiples of 64 up to 1 KiB, then quarter steps of a power of two") {
  CHECK(pooled_allocator::size_class(0) == 64);
  CHECK(pooled_allocator::size_class(1) == 64);
  CHECK(pooled_allocator::size_class(65) == 128);
  CHECK(pooled_allocator::size_class(1024) == 1024);
  CHECK(pooled_allocator::size_class(1025) == 1280);
  CHECK(pooled_allocator::size_class(4096) == 4096);
  CHECK(pooled_allocator::size_class(4097) == 5120);
  CHECK(pooled_allocator::size_class(7000) == 7168);
  for (std::size_t n : {1u, 100u, 5000u, 123456u, 9999999u}) {
    CHECK(pooled_allocator::size_class(n) >= n);
    CHECK(pooled_allocator::size_class(n) <= n + n / 4 + 64);
  }
}

TEST_CASE("the pooled allocator reuses a freed block of the same size class") {
  auto pool = make_object<pooled_allocator>();
  void* first;
  {
    auto t = tensor::empty({250}, dtype::float32, *pool);  // 1000 bytes -> class 1024
    first = t.data();
    CHECK(pool->stats().live_bytes == 1024);
  }
  auto s = pool->stats();
  CHECK(s.live_bytes == 0);
  CHECK(s.cached_bytes == 1024);
  auto again = tensor::empty({256}, dtype::float32, *pool);  // 1024 bytes, same class
  CHECK(again.data() == first);
  s = pool->stats();
  CHECK(s.allocations == 2);
  CHECK(s.reused == 1);
  CHECK(s.system_allocations == 1);
  CHECK(s.cached_bytes == 0);
  CHECK(s.peak_live_bytes == 1024);
  auto other = tensor::empty({1000}, dtype::float32, *pool);  // another class: a new block
  CHECK(pool->stats().system_allocations == 2);
}

TEST_CASE("the naive allocator never caches, and release_cached empties a pool") {
  auto naive = make_object<naive_allocator>();
  { auto t = tensor::empty({10}, dtype::float64, *naive); }
  { auto t = tensor::empty({10}, dtype::float64, *naive); }
  CHECK(naive->stats().system_allocations == 2);
  CHECK(naive->stats().live_bytes == 0);
  CHECK(naive->kind() == allocator_kind::naive);
  auto pool = make_object<pooled_allocator>();
  { auto t = tensor::empty({10}, dtype::float64, *pool); }
  CHECK(pool->stats().cached_bytes == 128);
  pool->release_cached();
  CHECK(pool->stats().cached_bytes == 0);
}

TEST_CASE("a tensor keeps its allocator alive after every other handle is gone") {
  tensor t;
  {
    auto pool = make_allocator(allocator_kind::pooled);
    t = tensor::zeros({4}, dtype::int64, *pool);
  }
  t.data<std::int64_t>()[3] = 5;
  CHECK(t.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0, 0, 5});
  CHECK(t.data_storage()->owner().stats().live_bytes == 64);
}
