// SPDX-License-Identifier: Apache-2.0
// parallel_for and the kernels that use it: the same results on one thread and on several.
#include <kiln/kernels/attention.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/nn.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/reduce.hpp>

#include "../common/message_of.hpp"
#include "../common/pool_threads.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <set>
#include <thread>

using namespace kiln;
using namespace kiln::kernels;
using kiln_test::message_of;
using kiln_test::pool_threads;

TEST_CASE("parallel_for runs every index once, on several threads, and rethrows a task's exception") {
  CHECK(num_threads() == 1);  // the default
  const pool_threads scope(3);
  CHECK(num_threads() == 3);
  std::vector<std::atomic<int>> hits(1000);
  std::mutex m;
  std::set<std::thread::id> ids;
  parallel_for(1000, [&](std::int64_t i) {
    ++hits[std::size_t(i)];
    std::lock_guard lock(m);
    ids.insert(std::this_thread::get_id());
  });
  for (auto& h : hits) CHECK(h.load() == 1);
  CHECK(ids.size() >= 1);
  // An exception in one task reaches the caller; the pool stays usable.
  CHECK(message_of<kiln::error>([&] {
          parallel_for(100, [](std::int64_t i) {
            if (i == 37) throw kiln::error("task 37 failed");
          });
        }) == "task 37 failed");
  std::atomic<std::int64_t> sum = 0;
  parallel_for(100, [&](std::int64_t i) { sum += i; });
  CHECK(sum.load() == 4950);
  // Nested: the inner loop runs on the task's thread.
  std::atomic<int> inner = 0;
  parallel_for(4, [&](std::int64_t) { parallel_for(5, [&](std::int64_t) { ++inner; }); });
  CHECK(inner.load() == 20);
  CHECK(message_of<kernel_error>([&] { parallel_for(2, [](std::int64_t) { set_num_threads(2); }); }) ==
        "kiln::kernels::set_num_threads: cannot be called from inside a parallel_for task");
  CHECK(message_of<kernel_error>([&] { set_num_threads(0); }) ==
        "kiln::kernels::set_num_threads: the thread count must be between 1 and 1024, got 0");
}

TEST_CASE("matmul gives bit-identical results on one thread and on two") {
  const tensor a = kiln_test::random_tensor<float>({150, 400}, -1, 1, 1), b = kiln_test::random_tensor<float>({400, 333}, -1, 1, 2);
  const tensor one = matmul(a, b);
  const pool_threads scope(2);
  const tensor two = matmul(a, b);
  CHECK(one.to_vector<float>() == two.to_vector<float>());
  // Two user threads at once: one gets the pool, the other runs on its own thread.
  tensor r1, r2;
  std::thread t([&] { r1 = matmul(a, b); });
  r2 = matmul(a, b);
  t.join();
  CHECK(r1.to_vector<float>() == one.to_vector<float>());
  CHECK(r2.to_vector<float>() == one.to_vector<float>());
}

TEST_CASE("attention on two threads (heads and row blocks shared out, a buffer per thread) equals one thread bit for bit") {
  const tensor q = kiln_test::random_tensor<float>({1, 4, 40, 32}, -1, 1, 5), k = kiln_test::random_tensor<float>({1, 4, 300, 32}, -1, 1, 6),
               v = kiln_test::random_tensor<float>({1, 4, 300, 32}, -1, 1, 7);
  tensor causal = tensor::empty({40, 300}, dtype::bool_);
  for (std::int64_t i = 0; i < 40 * 300; ++i) static_cast<std::uint8_t*>(causal.data())[i] = i % 300 <= 260 + i / 300;
  const fused_expr scale = fused_expr::parse("(divide x0 5.65)");
  const attention_scores s{&scale, causal, true, -1e30, nullptr};
  const tensor one = attention(q, k, v, true, s);
  const pool_threads scope(2);
  const tensor two = attention(q, k, v, true, s);
  CHECK(one.to_vector<float>() == two.to_vector<float>());
  const tensor q1 = kiln_test::random_tensor<float>({1, 4, 1, 32}, -1, 1, 8);  // a decode step: one row per head
  CHECK(attention(q1, k, v).to_vector<float>() == [&] {
    const pool_threads single(1);
    return attention(q1, k, v).to_vector<float>();
  }());
}

TEST_CASE("the GEMM cut into rectangles per thread gives bit-identical products, epilogues and convolutions") {
  // Shapes that cut by columns (M <= N), by rows (M > N), into fewer parts than threads (few
  // panels), and below the size worth handing out; each at 1, 2 and 3 threads.
  const std::int64_t shapes[][3] = {{150, 400, 333}, {500, 64, 40}, {13, 300, 35}, {700, 50, 20}, {64, 784, 512}, {30, 30, 30}};
  unsigned seed = 40;
  for (const auto& s : shapes) {
    const std::int64_t m = s[0], k = s[1], n = s[2];
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    const tensor a = kiln_test::random_tensor<float>({m, k}, -1, 1, seed++), b = kiln_test::random_tensor<float>({k, n}, -1, 1, seed++);
    const tensor bias = kiln_test::random_tensor<float>({n}, -1, 1, seed++), res = kiln_test::random_tensor<float>({m, n}, -1, 1, seed++);
    const fused_expr e = fused_expr::parse("(add (relu (add x0 x1)) x2)");
    auto fused = [&] {
      const tensor out = tensor::empty({m, n}, dtype::float32);
      matmul_fused(a, b, e, {bias, res}, out);
      return out.to_vector<float>();
    };
    const std::vector<float> one = matmul(a, b).to_vector<float>(), one_t = matmul(a, b.permute({1, 0}).contiguous(), false, true).to_vector<float>();
    const std::vector<float> one_fused = fused();
    // The same product from a prepacked weight: the panels read in place, equal bit for bit.
    const tensor packed = prepack_weight(b);
    const packed_weight_layout layout = native_weight_layout(dtype::float32, k, n);
    auto prepacked = [&] {
      const tensor out = tensor::empty({m, n}, dtype::float32);
      matmul_prepacked(a, packed, layout, out);
      return out.to_vector<float>();
    };
    auto fused_prepacked = [&] {
      const tensor out = tensor::empty({m, n}, dtype::float32);
      matmul_fused_prepacked(a, packed, layout, e, {bias, res}, out);
      return out.to_vector<float>();
    };
    CHECK(prepacked() == one);
    CHECK(fused_prepacked() == one_fused);
    for (std::size_t threads : {2u, 3u}) {
      CAPTURE(threads);
      const pool_threads scope(threads);
      CHECK(matmul(a, b).to_vector<float>() == one);
      CHECK(matmul(a, b.permute({1, 0}).contiguous(), false, true).to_vector<float>() == one_t);
      CHECK(fused() == one_fused);
      CHECK(prepacked() == one);
      CHECK(fused_prepacked() == one_fused);
    }
  }
  // A prepacked weight at one to four rows: column blocks shared out, the same sums.
  for (const std::int64_t m : {1, 3}) {
    CAPTURE(m);
    const tensor a = kiln_test::random_tensor<float>({m, 512}, -1, 1, seed++), b = kiln_test::random_tensor<float>({512, 1000}, -1, 1, seed++);
    const tensor packed = prepack_weight(b);
    const packed_weight_layout layout = native_weight_layout(dtype::float32, 512, 1000);
    const tensor one = tensor::empty({m, 1000}, dtype::float32), two = tensor::empty({m, 1000}, dtype::float32);
    matmul_prepacked(a, packed, layout, one);
    const pool_threads scope(2);
    matmul_prepacked(a, packed, layout, two);
    CHECK(one.to_vector<float>() == two.to_vector<float>());
  }
  // Convolutions: 3x3 through the direct kernel (each thread's 1,152 positions, 96 or 192 tiles
  // of them, and the fused epilogue over them); 1x1 through the plain GEMM.
  const tensor x = kiln_test::random_tensor<float>({2, 16, 48, 48}, -1, 1, 7);
  for (const std::int64_t kernel : {3, 1}) {
    CAPTURE(kernel);
    const tensor w = kiln_test::random_tensor<float>({24, 16, kernel, kernel}, -1, 1, 8);
    const tensor bias = kiln_test::random_tensor<float>({24}, -1, 1, 9);
    conv2d_params p;
    if (kernel == 3) p.padding = {1, 1, 1, 1};
    const std::vector<float> one = conv2d(x, w, bias, p).to_vector<float>();
    const tensor residual = conv2d(x, w, bias, p);
    auto fused = [&] {
      const tensor out = tensor::empty(residual.shape(), dtype::float32);
      conv2d_fused(x, w, bias, p, fused_expr::parse("(relu (add x0 x1))"), {residual}, out);
      return out.to_vector<float>();
    };
    const std::vector<float> one_fused = fused();
    const pool_threads scope(2);
    CHECK(conv2d(x, w, bias, p).to_vector<float>() == one);
    CHECK(fused() == one_fused);
  }
  // Grouped convolutions (groups of 8 channels, as RegNet's; 2 groups, fewer than 3 threads): the
  // groups shared out among the threads, each product on one; the fused epilogue on each.
  for (const std::int64_t groups : {2, 4}) {
    CAPTURE(groups);
    const tensor w = kiln_test::random_tensor<float>({8 * groups, 16 / groups, 3, 3}, -1, 1, 10);
    conv2d_params p;
    p.padding = {1, 1, 1, 1};
    p.groups = groups;
    const std::vector<float> one = conv2d(x, w, tensor{}, p).to_vector<float>();
    const tensor shift = kiln_test::random_tensor<float>({8 * groups, 1, 1}, -1, 1, 11);
    auto fused = [&] {
      const tensor out = tensor::empty({2, 8 * groups, 48, 48}, dtype::float32);
      conv2d_fused(x, w, tensor{}, p, fused_expr::parse("(relu (add x0 x1))"), {shift}, out);
      return out.to_vector<float>();
    };
    const std::vector<float> one_fused = fused();
    for (std::size_t threads : {2u, 3u}) {
      CAPTURE(threads);
      const pool_threads scope(threads);
      CHECK(conv2d(x, w, tensor{}, p).to_vector<float>() == one);
      CHECK(fused() == one_fused);
    }
  }
  // A matrix times a vector: blocks of 256 rows among the threads, or all on the calling thread
  // below the size worth handing out.
  for (const std::int64_t k : {8, 1000}) {
    CAPTURE(k);
    const tensor a = kiln_test::random_tensor<float>({1100, k}, -1, 1, 12), v = kiln_test::random_tensor<float>({k, 1}, -1, 1, 13);
    const std::vector<float> one = matmul(a, v).to_vector<float>();
    const pool_threads scope(2);
    CHECK(matmul(a, v).to_vector<float>() == one);
  }
}

TEST_CASE("the direct convolution on several threads, or run in order inside another task: the same sums") {
  // Each thread takes a share of blocks x tiles and copies the padded rows its share reads (all
  // of them when it spans two blocks of output channels). Inside a task of another parallel_for,
  // the shares all run in order on one thread, each copying its rows over the last one's. Two
  // images: the second's rows are not the first's. Output channels 8 (part of a block), 24 and
  // 72 (blocks of 8, 16 or 32 channels, by ISA: shares that span two blocks), strides 1 and 2
  // (1,665 and 437 positions: at least 256 take the direct kernel, `use_direct_conv`).
  const tensor x = kiln_test::random_tensor<float>({2, 5, 45, 37}, -1, 1, 70);
  unsigned seed = 71;
  for (const std::int64_t o : {8, 24, 72})
    for (const std::int64_t stride : {1, 2}) {
      CAPTURE(o);
      CAPTURE(stride);
      const tensor w = kiln_test::random_tensor<float>({o, 5, 3, 3}, -1, 1, seed++);
      conv2d_params p;
      p.padding = {1, 2, 1, 0};
      p.strides = {stride, stride};
      const std::vector<float> one = conv2d(x, w, tensor{}, p).to_vector<float>();
      for (std::size_t threads : {2u, 3u}) {
        CAPTURE(threads);
        const pool_threads scope(threads);
        CHECK(conv2d(x, w, tensor{}, p).to_vector<float>() == one);
        std::vector<float> nested;
        parallel_for(2, [&](std::int64_t i) {
          if (i == 0) nested = conv2d(x, w, tensor{}, p).to_vector<float>();
        });
        CHECK(nested == one);
      }
    }
}

TEST_CASE("elementwise kernels and the global average pool share their elements out: every element once, the same bits") {
  // 32 x 112 x 112 (a squeeze-and-excitation scale's broadcast multiply), sizes above
  // min_parallel_elements that are not a multiple of the 1,024-element cut, and a strided output
  // whose gaps must stay untouched; a small global pool (one thread) beside a large one.
  const tensor x = kiln_test::random_tensor<float>({1, 32, 112, 112}, -2, 2, 80);
  const tensor s = kiln_test::random_tensor<float>({1, 32, 1, 1}, -2, 2, 81);
  const tensor odd_a = kiln_test::random_tensor<float>({200003}, -2, 2, 82), odd_b = kiln_test::random_tensor<float>({200003}, -2, 2, 83);
  const tensor wide = kiln_test::random_tensor<float>({400, 401}, -2, 2, 84);
  const tensor planes = kiln_test::random_tensor<float>({2, 144, 56, 56}, -2, 2, 85);
  const tensor small = kiln_test::random_tensor<float>({2, 3, 5, 5}, -2, 2, 86);
  struct results {
    std::vector<float> scaled, sum, exp, where, pooled, small_pool, strided;
    std::vector<std::uint8_t> less;
    std::vector<std::int32_t> cast;
  };
  const auto run = [&] {
    results r;
    r.scaled = multiply(x, s).to_vector<float>();
    r.sum = add(odd_a, odd_b).to_vector<float>();
    r.exp = exp(odd_a).to_vector<float>();
    const tensor lt = less(odd_a, odd_b);
    r.less = kiln_test::bools(lt);
    r.where = where(lt, odd_a, odd_b).to_vector<float>();
    r.cast = cast(multiply(odd_a, tensor::from_values<float>({}, {1000.0f})), dtype::int32).to_vector<std::int32_t>();
    r.pooled = global_avg_pool2d(planes).to_vector<float>();
    r.small_pool = global_avg_pool2d(small).to_vector<float>();
    // Into every other column of a buffer filled with 7s: the gaps keep their 7s.
    tensor buffer = tensor::empty({400, 802}, dtype::float32);
    std::fill_n(static_cast<float*>(buffer.data()), 400 * 802, 7.0f);
    subtract(wide, tensor::from_values<float>({}, {1.0f}), buffer.slice(1, 0, 802, 2));
    r.strided = buffer.to_vector<float>();
    return r;
  };
  const results one = run();
  for (std::size_t j = 0; j < one.strided.size(); j += 2) REQUIRE(one.strided[j + 1] == 7.0f);
  for (std::size_t threads : {2u, 3u}) {
    CAPTURE(threads);
    const pool_threads scope(threads);
    const results many = run();
    CHECK(many.scaled == one.scaled);
    CHECK(many.sum == one.sum);
    CHECK(many.exp == one.exp);
    CHECK(many.less == one.less);
    CHECK(many.where == one.where);
    CHECK(many.cast == one.cast);
    CHECK(many.pooled == one.pooled);
    CHECK(many.small_pool == one.small_pool);
    CHECK(many.strided == one.strided);
  }
  // parallel_for_each_run's ranges cover every element once, cut inside rows (a transposed view
  // of 400 x 401: runs of 400 elements, ranges cut at multiples of 1,024).
  const tensor columns = wide.permute({1, 0});
  const loop_plan<1> plan({&columns});
  std::vector<std::atomic<int>> hits(std::size_t(wide.numel()));
  std::mutex m;
  std::set<std::thread::id> ids;
  {
    const pool_threads scope(3);
    parallel_for_each_run(plan, [&](std::int64_t n, const std::array<char*, 1>& p, const std::array<std::int64_t, 1>& st) {
      for (std::int64_t i = 0; i < n; ++i) ++hits[std::size_t((p[0] + i * st[0] - static_cast<char*>(wide.data())) / 4)];
      std::lock_guard lock(m);
      ids.insert(std::this_thread::get_id());
    });
  }
  for (auto& h : hits) REQUIRE(h.load() == 1);
  CHECK(ids.size() >= 1);
  // An error in one range (an integer division by zero far into the tensor) reaches the caller.
  const pool_threads scope(2);
  tensor num = tensor::zeros({200000}, dtype::int32), den = tensor::zeros({200000}, dtype::int32);
  std::fill_n(static_cast<std::int32_t*>(den.data()), 199999, 1);
  CHECK(message_of<kernel_error>([&] { floor_divide(num, den); }) == "kiln::kernels::floor_divide: integer division by zero");
}

TEST_CASE("a loop writing an output element twice (a broadcast view) stays on one thread") {
  // distinct_elements: whether the output's elements are all at different addresses.
  const tensor base = tensor::zeros({256, 1024}, dtype::float32);
  CHECK(loop_plan<1>({&base}).distinct_elements(0));
  const tensor transposed = base.permute({1, 0});
  CHECK(loop_plan<1>({&transposed}).distinct_elements(0));
  const tensor every_third = base.slice(1, 0, 1024, 3);
  CHECK(loop_plan<1>({&every_third}).distinct_elements(0));
  const tensor broadcast = tensor::from_storage(base.data_storage(), 0, dtype::float32, {256, 1024}, {0, 1});
  CHECK(!loop_plan<1>({&broadcast}).distinct_elements(0));
  const tensor overlapping = tensor::from_storage(base.data_storage(), 0, dtype::float32, {256, 1024}, {512, 1});
  CHECK(!loop_plan<1>({&overlapping}).distinct_elements(0));
  // 2^18 elements written in order, on two threads: the shared row holds the last row's values.
  const tensor rows = kiln_test::random_tensor<float>({256, 1024}, -1, 1, 87);
  const pool_threads scope(2);
  add(rows, tensor::from_values<float>({}, {0.0f}), broadcast);
  const std::vector<float> all = rows.to_vector<float>();
  CHECK(std::vector<float>(static_cast<const float*>(base.data()), static_cast<const float*>(base.data()) + 1024) ==
        std::vector<float>(all.end() - 1024, all.end()));
}
