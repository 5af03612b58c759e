// SPDX-License-Identifier: Apache-2.0
#include <kiln/runtime/kv_cache.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

#include <numeric>

using namespace kiln;
using namespace kiln::runtime;
using kiln_test::message_of;

namespace {

/// A float32 [batch, heads, n, dim] tensor whose elements are `first`, first + 1, ...
tensor iota(shape_vector shape, float first) {
  tensor t = tensor::empty(std::move(shape), dtype::float32);
  std::iota(t.data<float>(), t.data<float>() + t.numel(), first);
  return t;
}

/// concat((a, b), axis) element by element, as the reference.
std::vector<float> joined(const tensor& a, const tensor& b, std::size_t axis) {
  shape_vector s = a.shape();
  s[axis] += b.shape()[axis];
  tensor out = tensor::empty(s, dtype::float32);
  out.slice(axis, 0, a.shape()[axis]).copy_from(a);
  out.slice(axis, a.shape()[axis], s[axis]).copy_from(b);
  return out.to_vector<float>();
}

const kv_cache_buffer* buffer_of(const tensor& t) {
  auto* lease = dynamic_cast<const kv_cache_view_lease*>(t.data_storage()->keeper());
  return lease ? &lease->buffer() : nullptr;
}

}  // namespace

TEST_CASE("kv_cache_append returns concat's values, as a view of a capacity buffer, and leaves the past as it was") {
  const tensor past = iota({2, 3, 5, 4}, 0), x = iota({2, 3, 1, 4}, 1000);
  const std::vector<float> before = past.to_vector<float>();
  const tensor out = kv_cache_append(past, x, 2);
  CHECK(out.shape() == shape_vector{2, 3, 6, 4});
  CHECK(out.to_vector<float>() == joined(past, x, 2));
  CHECK(past.to_vector<float>() == before);
  REQUIRE(buffer_of(out) != nullptr);
  CHECK(buffer_of(out)->capacity() == 64);  // no capacity given: twice the length, at least 64
  CHECK(out.strides() == shape_vector{3 * 64 * 4, 64 * 4, 4, 1});
  CHECK_FALSE(out.is_contiguous());
  CHECK(kv_cache_append(past, x, -2).to_vector<float>() == joined(past, x, 2));
}

TEST_CASE("kv_cache_append: a decoding loop writes only the new positions into one buffer") {
  tensor cache = kv_cache_append(tensor::empty({2, 3, 0, 4}, dtype::float32), iota({2, 3, 7, 4}, 0), 2, 32);
  const kv_cache_buffer* b = buffer_of(cache);
  REQUIRE(b != nullptr);
  CHECK(b->capacity() == 32);
  for (int step = 0; step < 25; ++step) {
    const tensor x = iota({2, 3, 1, 4}, float(100 * step));
    const std::vector<float> want = joined(cache, x, 2);
    tensor next = kv_cache_append(cache, x, 2, 32);
    CHECK(buffer_of(next) == b);
    CHECK(next.data() == cache.data());
    CHECK(next.to_vector<float>() == want);
    cache = next;
  }
  CHECK(b->frontier() == 32);
  // Past the capacity: a new buffer, twice the length, with everything copied.
  const tensor x = iota({2, 3, 2, 4}, -50);
  const tensor grown = kv_cache_append(cache, x, 2, 0);
  CHECK(buffer_of(grown) != b);
  CHECK(buffer_of(grown)->capacity() == 68);
  CHECK(grown.to_vector<float>() == joined(cache, x, 2));
}

TEST_CASE("kv_cache_append: a second continuation of a past copies while the first lives, and reuses the room once it is gone") {
  const tensor past = kv_cache_append(tensor::empty({1, 2, 0, 3}, dtype::float32), iota({1, 2, 4, 3}, 0), 2);
  const tensor a = iota({1, 2, 1, 3}, 100), c = iota({1, 2, 1, 3}, 200);
  tensor first = kv_cache_append(past, a, 2);
  CHECK(first.data() == past.data());
  const tensor second = kv_cache_append(past, c, 2);  // `first` still reads position 4
  CHECK(second.data() != past.data());
  CHECK(first.to_vector<float>() == joined(past, a, 2));
  CHECK(second.to_vector<float>() == joined(past, c, 2));

  // A benchmark's or a retry's pattern: the same past again once the result is gone.
  first = tensor();
  const tensor third = kv_cache_append(past, c, 2);
  CHECK(third.data() == past.data());
  CHECK(third.to_vector<float>() == joined(past, c, 2));
}

TEST_CASE("kv_cache_append: a view of the newest result keeps its positions from being overwritten") {
  const tensor past = kv_cache_append(tensor::empty({1, 1, 0, 2}, dtype::float32), iota({1, 1, 3, 2}, 0), 2);
  tensor head = kv_cache_append(past, iota({1, 1, 1, 2}, 10), 2);
  const tensor kept = head.slice(3, 0, 1);  // shares the head's storage
  const std::vector<float> kept_values = kept.to_vector<float>();
  head = tensor();
  const tensor other = kv_cache_append(past, iota({1, 1, 1, 2}, 20), 2);
  CHECK(other.data() != past.data());
  CHECK(kept.to_vector<float>() == kept_values);
  // A prefix of a view along the axis is a past like any other: its append copies (the frontier is beyond it).
  const tensor prefix = other.slice(2, 0, 2);
  const tensor from_prefix = kv_cache_append(prefix, iota({1, 1, 1, 2}, 30), 2);
  CHECK(from_prefix.to_vector<float>() == joined(prefix, iota({1, 1, 1, 2}, 30), 2));
  CHECK(other.to_vector<float>() == joined(past, iota({1, 1, 1, 2}, 20), 2));
}

TEST_CASE("kv_cache_reserve makes an empty cache that fills without copying") {
  tensor cache = kv_cache_reserve({1, 2, 0, 4}, 2, 10, dtype::float32);
  CHECK(cache.shape() == shape_vector{1, 2, 0, 4});
  const void* base = cache.data();
  for (int step = 0; step < 5; ++step) {
    cache = kv_cache_append(cache, iota({1, 2, 2, 4}, float(step * 16)), 2);
    CHECK(cache.data() == base);
  }
  CHECK(cache.shape() == shape_vector{1, 2, 10, 4});
  const std::vector<float> v = cache.to_vector<float>();
  CHECK(v[0] == 0);
  CHECK(v[4 * 9 + 3] == 16 * 4 + 7);  // head 0, position 9: step 4's second position, last element
  CHECK(message_of([] { kv_cache_reserve({1, 2}, 2, 4, dtype::float32); }) ==
        "kiln::runtime::kv_cache_reserve: axis 2 is out of range for rank 2");
  CHECK(message_of([] { kv_cache_reserve({1, 2}, 1, -1, dtype::float32); }) ==
        "kiln::runtime::kv_cache_reserve: capacity -1 is negative");
}

TEST_CASE("kv_cache_append refuses what concat would, naming both tensors") {
  const tensor past = iota({1, 2, 3, 4}, 0);
  CHECK(message_of([&] { kv_cache_append(past, tensor::empty({1, 2, 1, 4}, dtype::float64), 2); }) ==
        "kiln::runtime::kv_cache_append: the cache is float32[1, 2, 3, 4] but the new positions are float64[1, 2, 1, 4]");
  CHECK(message_of([&] { kv_cache_append(past, iota({2, 1, 4}, 0), 2); }) ==
        "kiln::runtime::kv_cache_append: the cache float32[1, 2, 3, 4] and the new positions float32[2, 1, 4] differ in rank");
  CHECK(message_of([&] { kv_cache_append(past, iota({1, 3, 1, 4}, 0), 2); }) ==
        "kiln::runtime::kv_cache_append: the cache float32[1, 2, 3, 4] and the new positions float32[1, 3, 1, 4] differ in "
        "dimension 1 (only axis 2 may)");
  CHECK(message_of([&] { kv_cache_append(past, iota({1, 2, 1, 4}, 0), 4); }) ==
        "kiln::runtime::kv_cache_append: axis 4 is out of range for rank 4");
  CHECK(message_of([&] { kv_cache_append(past, tensor(), 2); }) == "kiln::runtime::kv_cache_append: a null tensor");
}

TEST_CASE("kv_cache_truncate rewinds the buffer when nothing else sees the dropped positions, and slices otherwise") {
  tensor cache = kv_cache_reserve({1, 2, 0, 4}, 2, 16, dtype::float32);
  cache = kv_cache_append(cache, iota({1, 2, 5, 4}, 0), 2);
  const tensor before = cache;  // a second handle: the positions 3 and 4 are still seen
  tensor sliced = kv_cache_truncate(cache, 2, 3);
  CHECK(sliced.shape() == shape_vector{1, 2, 3, 4});
  CHECK(buffer_of(sliced) == buffer_of(before));
  const tensor after_slice = kv_cache_append(sliced, iota({1, 2, 1, 4}, 100), 2);
  CHECK(buffer_of(after_slice) != buffer_of(before));  // copied: `before` keeps its positions
  CHECK(before.to_vector<float>() == iota({1, 2, 5, 4}, 0).to_vector<float>());

  // The only handle: the buffer is rewound, and the next append writes in place.
  tensor only = kv_cache_append(kv_cache_reserve({1, 2, 0, 4}, 2, 16, dtype::float32), iota({1, 2, 5, 4}, 0), 2);
  const kv_cache_buffer* buffer = buffer_of(only);
  const std::vector<float> first3 = only.slice(2, 0, 3).contiguous().to_vector<float>();
  tensor rewound = kv_cache_truncate(std::move(only), 2, 3);
  CHECK(rewound.shape() == shape_vector{1, 2, 3, 4});
  CHECK(buffer->frontier() == 3);
  const tensor next = kv_cache_append(rewound, iota({1, 2, 1, 4}, 100), 2);
  CHECK(buffer_of(next) == buffer);
  CHECK(next.slice(2, 0, 3).contiguous().to_vector<float>() == first3);
  CHECK(next.slice(2, 3, 4).contiguous().to_vector<float>() == iota({1, 2, 1, 4}, 100).to_vector<float>());

  CHECK(message_of([&] { kv_cache_truncate(next, 2, 5); }) ==
        "kiln::runtime::kv_cache_truncate: length 5 is outside [0, 4] (the positions of float32[1, 2, 4, 4] along axis 2)");
  CHECK(message_of([&] { kv_cache_truncate(next, 7, 1); }) == "kiln::runtime::kv_cache_truncate: axis 7 is out of range for rank 4");
  CHECK(kv_cache_truncate(iota({2, 3}, 0), 1, 2).to_vector<float>() == std::vector<float>{0, 1, 3, 4});  // any tensor: a slice
}

TEST_CASE("attention_kv_cache: pop_n and clear drop positions and append over them in place") {
  const attention_kv_cache cache(iota({2, 0, 4}, 0), {2, 8, 4}, 0, 1);
  cache.append(iota({2, 5, 4}, 0));
  const void* buffer = cache.data().data();
  cache.pop_n(2);
  CHECK(cache.length() == 3);
  cache.append(iota({2, 1, 4}, 50));
  CHECK(cache.length() == 4);
  CHECK(cache.data().data() == buffer);  // in place: nothing else held a view
  CHECK(cache.data().slice(1, 3, 4).contiguous().to_vector<float>() == iota({2, 1, 4}, 50).to_vector<float>());
  CHECK(message_of([&] { cache.pop_n(5); }) ==
        "kiln::runtime::attention_kv_cache: cannot pop 5 positions of a cache of float32[2, 4, 4] (4 positions along axis 1)");
  CHECK(cache.length() == 4);
  {
    const tensor held = cache.data();  // a view the caller keeps: popping then appending copies
    cache.pop_n(1);
    cache.append(iota({2, 1, 4}, 70));
    CHECK(cache.data().data() != held.data());
    CHECK(held.slice(1, 3, 4).contiguous().to_vector<float>() == iota({2, 1, 4}, 50).to_vector<float>());
  }
  cache.clear();
  CHECK(cache.length() == 0);
  cache.append(iota({2, 2, 4}, 0));
  CHECK(cache.length() == 2);
}
