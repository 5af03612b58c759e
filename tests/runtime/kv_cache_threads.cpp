// SPDX-License-Identifier: Apache-2.0
// kv_cache_append from several threads on one past (ThreadSanitizer runs this suite): appends in
// place, copies, and releases of the newest view race, and every result is still concat's.
#include <kiln/runtime/kv_cache.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

using namespace kiln;
using namespace kiln::runtime;

TEST_CASE("kv_cache_append from four threads on one past: every result is concat's, and some append in place") {
  const tensor past = kv_cache_append(kv_cache_reserve({1, 4, 0, 8}, 2, 64, dtype::float32),
                                      tensor::zeros({1, 4, 16, 8}, dtype::float32), 2);
  const std::vector<float> before = past.to_vector<float>();
  std::atomic<int> wrong{0}, in_place{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        tensor x = tensor::empty({1, 4, 1, 8}, dtype::float32);
        std::iota(x.data<float>(), x.data<float>() + x.numel(), float(1000 * t + i));
        const tensor r = kv_cache_append(past, x, 2);
        if (r.data() == past.data()) ++in_place;
        // Positions 0..15 are the past's zeros; position 16 of head h holds x's row h.
        for (std::int64_t h = 0; h < 4; ++h)
          for (std::int64_t d = 0; d < 8; ++d) {
            if (r.at<float>({0, h, 3, d}) != 0) ++wrong;
            if (r.at<float>({0, h, 16, d}) != float(1000 * t + i) + float(h * 8 + d)) ++wrong;
          }
      }
    });
  for (auto& th : pool) th.join();
  CHECK(wrong == 0);
  CHECK(in_place > 0);
  CHECK(past.to_vector<float>() == before);
}
