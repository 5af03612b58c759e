// SPDX-License-Identifier: Apache-2.0
// Data movement against index-arithmetic references. Every result is exact.
#include <kiln/kernels/transform.hpp>

#include "../common/message_of.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln_test;

namespace {

/// 0, 1, 2, ... as a contiguous tensor of `shape` (values identify their source position).
template <class T>
tensor iota(shape_vector shape) {
  tensor t = tensor::empty(std::move(shape), runtime::dtype_of<T>);
  T* p = t.data<T>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = T(i);
  return t;
}

/// The element at a full index of `t`, any layout.
template <class T>
T at(const tensor& t, const shape_vector& idx) {
  std::int64_t off = 0;
  for (std::size_t i = 0; i < idx.size(); ++i) off += idx[i] * t.strides()[i];
  return static_cast<const T*>(t.data())[off];
}

std::span<const std::int64_t> sp(const shape_vector& v) { return v; }

}  // namespace

TEST_CASE("copy and broadcast_to: every broadcasting pattern, into contiguous and strided outputs, every element size") {
  const std::vector<std::pair<shape_vector, shape_vector>> cases = {
      {{}, {3, 4}}, {{4}, {3, 4}}, {{3, 1}, {3, 4}}, {{1, 4}, {2, 3, 4}}, {{2, 1, 5}, {2, 7, 5}}, {{1}, {1}}, {{3, 0}, {2, 3, 0}}, {{5, 1, 1}, {5, 6, 33}}};
  unsigned seed = 1;
  for (const auto& c : cases) {
    const shape_vector& from = c.first;  // not a structured binding: Clang 14 cannot capture one
    const shape_vector& to = c.second;
    CAPTURE(runtime::shape_to_string(from));
    CAPTURE(runtime::shape_to_string(to));
    const tensor x = random_tensor<float>(from, -5, 5, seed++);
    const tensor b = broadcast_to(x, sp(to));
    CHECK(b.shape() == to);
    CHECK(b.is_contiguous());
    std::vector<float> want;
    for_each_index(to, [&](const shape_vector& idx) { want.push_back(broadcast_at<float>(x, idx)); });
    CHECK(b.to_vector<float>() == want);
    const tensor v = broadcast_view(x, sp(to));
    CHECK(v.to_vector<float>() == want);
    if (x.numel() > 0) CHECK(v.data() == x.data());
    // into a strided output: every other column of a wider tensor
    if (!to.empty()) {
      shape_vector wide = to;
      wide.back() *= 2;
      const tensor big = tensor::zeros(wide, dtype::float32);
      const tensor out = big.slice(to.size() - 1, 0, wide.back(), 2);
      broadcast_to(x, out);
      CHECK(out.to_vector<float>() == want);
    }
  }
  // Element sizes 1, 2 (float16, moved as bytes), 4 and 8.
  for (dtype t : {dtype::uint8, dtype::float16, dtype::int32, dtype::float64}) {
    CAPTURE(name(t));
    const tensor raw = iota<std::uint8_t>({6, 1, 5 * std::int64_t(size_of(t))});
    const tensor x = tensor::from_storage(raw.data_storage(), 0, t, {6, 1, 5});
    const tensor out = tensor::empty({6, 4, 5}, t);
    broadcast_to(x, out);
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t j = 0; j < 4; ++j)
        CHECK(std::memcmp(static_cast<const char*>(out.data()) + (i * 20 + j * 5) * std::int64_t(size_of(t)),
                          static_cast<const char*>(x.data()) + i * 5 * std::int64_t(size_of(t)), 5 * size_of(t)) == 0);
  }
}

TEST_CASE("copy and broadcast_to: errors") {
  const tensor x = random_tensor<float>({3, 4}, 0, 1, 1);
  CHECK(message_of([&] { (void)broadcast_to(x, {3, 5}); }) == "kiln::kernels::broadcast_to: cannot broadcast float32[3, 4] to shape [3, 5]");
  CHECK(message_of([&] { (void)broadcast_to(x, {4}); }) == "kiln::kernels::broadcast_to: cannot broadcast float32[3, 4] to shape [4]");
  CHECK(message_of([&] { broadcast_to(x, tensor::empty({2, 3, 4}, dtype::float64)); }) ==
        "kiln::kernels::broadcast_to: the output float64[2, 3, 4] must have the input's dtype float32");
  CHECK(message_of([&] { copy(x, x.slice(0, 0, 3)); }) ==
        "kiln::kernels::copy: the output float32[3, 4] overlaps the input float32[3, 4]; write into a separate tensor");
}

TEST_CASE("permute_dims: every permutation of rank 3 and 4, strided inputs, the tiled transposition") {
  const tensor x3 = iota<float>({3, 5, 7});
  std::vector<std::int64_t> perm = {0, 1, 2};
  do {
    CAPTURE(runtime::shape_to_string(perm));
    const tensor t = permute_dims(x3, sp(perm));
    CHECK(t.is_contiguous());
    CHECK(t.to_vector<float>() == x3.permute(perm).to_vector<float>());
  } while (std::next_permutation(perm.begin(), perm.end()));
  const tensor x4 = iota<std::int64_t>({2, 3, 17, 19});
  perm = {0, 1, 2, 3};
  do {
    CAPTURE(runtime::shape_to_string(perm));
    CHECK(permute_dims(x4, sp(perm)).to_vector<std::int64_t>() == x4.permute(perm).to_vector<std::int64_t>());
  } while (std::next_permutation(perm.begin(), perm.end()));
  // Large transpositions cross several 64-byte tiles with ragged edges, for each element size.
  const tensor big = iota<float>({67, 131});
  CHECK(permute_dims(big).to_vector<float>() == big.permute({1, 0}).to_vector<float>());
  const tensor bytes = iota<std::uint8_t>({70, 90});
  CHECK(permute_dims(bytes).to_vector<std::uint8_t>() == bytes.permute({1, 0}).to_vector<std::uint8_t>());
  const tensor batched = iota<std::int32_t>({3, 40, 50});  // whole 16 x 16 tiles (in registers on AVX2) per batch
  CHECK(permute_dims(batched, {0, 2, 1}).to_vector<std::int32_t>() == batched.permute({0, 2, 1}).to_vector<std::int32_t>());
  const tensor doubles = iota<double>({33, 9, 20});
  CHECK(permute_dims(doubles, {2, 1, 0}).to_vector<double>() == doubles.permute({2, 1, 0}).to_vector<double>());
  // A strided input and a strided output.
  const tensor sliced = big.slice(1, 1, 131, 3);
  const tensor dst_big = tensor::zeros({sliced.shape(1), sliced.shape(0) * 2}, dtype::float32);
  const tensor dst = dst_big.slice(1, 0, sliced.shape(0) * 2, 2);
  permute_dims(sliced, {1, 0}, dst);
  CHECK(dst.to_vector<float>() == sliced.permute({1, 0}).to_vector<float>());
  // Negative axes; the empty list reverses.
  CHECK(permute_dims(x3, {-1, 0, 1}).shape() == shape_vector{7, 3, 5});
  CHECK(permute_dims(x3).shape() == shape_vector{7, 5, 3});
  CHECK(message_of([&] { (void)permute_dims(x3, {0, 1}); }) == "kiln::kernels::permute_dims: axes [0, 1] must list each of the 3 axes of float32[3, 5, 7] once");
  CHECK(message_of([&] { (void)permute_dims(x3, {0, 1, -3}); }) == "kiln::kernels::permute_dims: axes [0, 1, -3] name axis 0 twice");
  CHECK(message_of([&] { (void)permute_dims(x3, {0, 1, 3}); }) == "kiln::kernels::permute_dims: axis 3 is out of range for a 3-d tensor");
  CHECK(message_of([&] { permute_dims(x3, {2, 1, 0}, tensor::empty({3, 5, 7}, dtype::float32)); }) ==
        "kiln::kernels::permute_dims: the output must be float32[7, 5, 3], got float32[3, 5, 7]");
}

TEST_CASE("reshape: a view whenever the layout allows, a copy otherwise, and the DPS form") {
  const tensor x = iota<float>({4, 6});
  const tensor v = reshape(x, {3, -1});
  CHECK(v.shape() == shape_vector{3, 8});
  CHECK(v.data() == x.data());
  CHECK(v.to_vector<float>() == x.to_vector<float>());
  // Columns 0 and 2: [4, 2] with strides [6, 2]. Splitting or adding unit axes keeps a view;
  // merging the two axes needs a copy.
  const tensor s = x.slice(1, 0, 4, 2);
  const tensor s1 = reshape(s, {2, 2, 1, 2});
  CHECK(s1.data() == s.data());
  CHECK(s1.strides() == shape_vector{12, 6, 1, 2});
  CHECK(s1.to_vector<float>() == s.to_vector<float>());
  const tensor s2 = reshape(s, {8});
  CHECK(s2.data() != s.data());
  CHECK(s2.to_vector<float>() == s.to_vector<float>());
  // A transposed tensor flattened reads in the transposed order.
  const tensor t = x.permute({1, 0});
  CHECK(reshape(t, {-1}).to_vector<float>() == t.to_vector<float>());
  CHECK(reshape(t, {6, 2, 2}).to_vector<float>() == t.to_vector<float>());
  CHECK(reshape(t, {6, 2, 2}).data() == x.data());  // splitting a transposed axis is a view
  // Empty tensors and scalars.
  // Columns 0, 2 and 4 are evenly spaced, so even merging them is a view.
  CHECK(reshape(x.slice(1, 0, 6, 2), {12}).data() == x.data());
  CHECK(reshape(tensor::empty({0, 3}, dtype::float32), {3, -1}).shape() == shape_vector{3, 0});
  CHECK(message_of([&] { (void)reshape(tensor::empty({0, 3}, dtype::float32), {0, -1}); }) ==
        "kiln::kernels::reshape: cannot reshape float32[0, 3] to [0, -1]: no size for -1 gives 0 elements");
  CHECK(reshape(iota<float>({1, 1}), std::span<const std::int64_t>()).ndim() == 0);
  // DPS into a strided output.
  const tensor big = tensor::zeros({8, 6}, dtype::float32);
  const tensor out = big.slice(0, 0, 8, 2);  // [4, 6], strides [12, 1]
  reshape(t, out);
  CHECK(out.to_vector<float>() == t.to_vector<float>());
  CHECK(message_of([&] { (void)reshape(x, {5, -1}); }) == "kiln::kernels::reshape: cannot reshape float32[4, 6] to [5, -1]: no size for -1 gives 24 elements");
  CHECK(message_of([&] { (void)reshape(x, {5, 5}); }) == "kiln::kernels::reshape: cannot reshape float32[4, 6] (24 elements) to [5, 5] (25 elements)");
  CHECK(message_of([&] { (void)reshape(x, {-1, -1}); }) == "kiln::kernels::reshape: bad target shape [-1, -1] (one -1 and no other negative dimension)");
  CHECK(message_of([&] { reshape(x, tensor::empty({5}, dtype::float32)); }) ==
        "kiln::kernels::reshape: cannot reshape float32[4, 6] into float32[5]: the element counts differ");
}

TEST_CASE("concat and split: round trips along every axis, views in and out, errors") {
  const tensor a = random_tensor<float>({2, 3, 4}, -1, 1, 1), b = random_tensor<float>({2, 3, 4}, -1, 1, 2);
  for (std::int64_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    const std::size_t ax = std::size_t(axis < 0 ? axis + 3 : axis);
    const tensor part = b.slice(ax, 1, b.shape(ax));  // a strided piece
    const tensor c = concat({a, part}, axis);
    shape_vector want_shape = a.shape();
    want_shape[ax] += part.shape(ax);
    CHECK(c.shape() == want_shape);
    for_each_index(c.shape(), [&](const shape_vector& idx) {
      shape_vector j = idx;
      const bool first = idx[ax] < a.shape(ax);
      if (!first) j[ax] -= a.shape(ax);
      CHECK(at<float>(c, idx) == (first ? at<float>(a, j) : at<float>(part, j)));
    });
    const std::vector<tensor> parts = split(c, {a.shape(ax)}, axis);
    REQUIRE(parts.size() == 2);
    CHECK(same_tensor(parts[0], a));
    CHECK(same_tensor(parts[1], part));
  }
  const tensor x = iota<std::int32_t>({6, 5});
  const auto thirds = split(x, std::int64_t{3}, 0);
  REQUIRE(thirds.size() == 3);
  CHECK(thirds[2].to_vector<std::int32_t>() == std::vector<std::int32_t>{20, 21, 22, 23, 24, 25, 26, 27, 28, 29});
  const auto uneven = split(x, {0, 2, 2}, 1);
  REQUIRE(uneven.size() == 4);
  CHECK(uneven[0].shape() == shape_vector{6, 0});
  CHECK(uneven[1].shape() == shape_vector{6, 2});
  CHECK(uneven[2].shape() == shape_vector{6, 0});
  CHECK(uneven[3].shape() == shape_vector{6, 3});
  CHECK(uneven[3].to_vector<std::int32_t>()[0] == 2);
  CHECK(message_of([&] { (void)concat({a, random_tensor<float>({2, 4, 4}, 0, 1, 3)}, 0); }) ==
        "kiln::kernels::concat: input 1 is float32[2, 4, 4] and input 0 is float32[2, 3, 4]; they must have the same dtype and shape except along axis 0");
  CHECK(message_of([&] { (void)concat({a, iota<double>({2, 3, 4})}, 0); }).find("same dtype") != std::string::npos);
  CHECK(message_of([&] { (void)concat({a, tensor()}, 0); }) == "kiln::kernels::concat: input 1 is undefined");
  CHECK(message_of([&] { (void)concat(std::span<const tensor>(), 0); }) == "kiln::kernels::concat: needs at least one tensor");
  CHECK(message_of([&] { (void)split(x, std::int64_t{4}, 0); }) == "kiln::kernels::split: cannot split axis 0 of int32[6, 5] into 4 equal sections");
  CHECK(message_of([&] { (void)split(x, {3, 2}, 0); }) ==
        "kiln::kernels::split: split indices [3, 2] must be non-decreasing and at most 6 (axis 0 of int32[6, 5])");
  const std::vector<tensor> short_outs = {tensor::empty({2, 5}, dtype::int32), tensor::empty({3, 5}, dtype::int32)};
  CHECK(message_of([&] { split(x, 0, short_outs); }) == "kiln::kernels::split: the outputs take 5 positions of axis 0 but int32[6, 5] has 6");
  // An output that overlaps an input is refused before anything is written.
  const tensor into = tensor::zeros({4, 3, 4}, dtype::float32);
  CHECK(message_of([&] { concat({a, into.slice(0, 0, 2)}, 0, into); }).find("overlaps the input") != std::string::npos);
}

TEST_CASE("strided_slice: Python's rules for negative and clamped bounds and negative strides") {
  const tensor x = iota<float>({7, 9});
  struct slice_case {
    std::int64_t b, e, s;
  };
  const std::vector<slice_case> cases = {{0, 7, 1}, {1, -1, 2}, {-3, 100, 1}, {6, -100, -1}, {-1, 0, -2}, {5, 2, 1}, {2, 5, -1}, {-100, 100, 3}, {3, 3, 1}};
  for (const auto& c : cases) {
    CAPTURE(c.b);
    CAPTURE(c.e);
    CAPTURE(c.s);
    // reference: Python's range semantics on axis 0 (extent 7) and the same on axis 1 (extent 9)
    auto positions = [&](std::int64_t n) {
      std::vector<std::int64_t> p;
      auto norm = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
      const std::int64_t b = c.s > 0 ? norm(c.b, 0, n) : norm(c.b, -1, n - 1), e = c.s > 0 ? norm(c.e, 0, n) : norm(c.e, -1, n - 1);
      for (std::int64_t i = b; c.s > 0 ? i < e : i > e; i += c.s) p.push_back(i);
      return p;
    };
    const auto rows = positions(7), cols = positions(9);
    const shape_vector axes = {0, 1}, begin = {c.b, c.b}, end = {c.e, c.e}, strides = {c.s, c.s};
    const tensor v = strided_slice_view(x, axes, begin, end, strides);
    REQUIRE(v.shape() == shape_vector{std::int64_t(rows.size()), std::int64_t(cols.size())});
    std::vector<float> want;
    for (auto r : rows)
      for (auto q : cols) want.push_back(float(r * 9 + q));
    CHECK(v.to_vector<float>() == want);
    const tensor copied = strided_slice(x, axes, begin, end, strides);
    CHECK(copied.is_contiguous());
    CHECK(copied.to_vector<float>() == want);
  }
  // One axis only; strides default to 1.
  const tensor last = strided_slice(x, {-1}, {-2}, {9});
  CHECK(last.shape() == shape_vector{7, 2});
  CHECK(last.to_vector<float>()[1] == 8);
  CHECK(message_of([&] { (void)strided_slice(x, {0}, {0}, {1}, {0}); }) == "kiln::kernels::strided_slice: the stride of axis 0 is 0");
  CHECK(message_of([&] { (void)strided_slice(x, {0, 0}, {0, 0}, {1, 1}); }) == "kiln::kernels::strided_slice: axis 0 is sliced twice");
  CHECK(message_of([&] { (void)strided_slice(x, {0}, {0, 1}, {1}); }) ==
        "kiln::kernels::strided_slice: axes, begin, end and strides must have the same length, got 1, 2, 1 and 0");
}

TEST_CASE("take: along each axis and flattened, negative indices, and errors that leave the output untouched") {
  const tensor x = iota<float>({4, 5, 3});
  const tensor idx = tensor::from_values<std::int64_t>({2, 2}, {2, -1, 0, 1});
  for (std::int64_t axis : {0, 1, 2}) {
    CAPTURE(axis);
    const tensor g = take(x, idx, axis);
    const auto ax = std::size_t(axis);
    shape_vector want_shape(x.shape().begin(), x.shape().begin() + std::ptrdiff_t(ax));
    want_shape.insert(want_shape.end(), {2, 2});
    want_shape.insert(want_shape.end(), x.shape().begin() + std::ptrdiff_t(ax) + 1, x.shape().end());
    REQUIRE(g.shape() == want_shape);
    for_each_index(g.shape(), [&](const shape_vector& o) {
      std::int64_t k = at<std::int64_t>(idx, {o[ax], o[ax + 1]});
      if (k < 0) k += x.shape(ax);
      shape_vector src(o.begin(), o.begin() + std::ptrdiff_t(ax));
      src.push_back(k);
      src.insert(src.end(), o.begin() + std::ptrdiff_t(ax) + 2, o.end());
      CHECK(at<float>(g, o) == at<float>(x, src));
    });
  }
  // Flattened, int32 indices, from a transposed input into a strided output.
  const tensor xt = x.permute({2, 1, 0});
  const tensor i32 = tensor::from_values<std::int32_t>({3}, {0, 1, -1});
  const tensor big = tensor::zeros({6}, dtype::float32);
  const tensor out = big.slice(0, 0, 6, 2);
  take(xt, i32, std::nullopt, out);
  const auto flat = xt.to_vector<float>();
  CHECK(out.to_vector<float>() == std::vector<float>{flat[0], flat[1], flat.back()});
  // Errors are found before anything is written.
  const tensor bad = tensor::from_values<std::int64_t>({3}, {0, 4, 1});
  const tensor dst = tensor::zeros({3, 5, 3}, dtype::float32);
  CHECK(message_of([&] { take(x, bad, 0, dst); }) == "kiln::kernels::take: index 4 (element 1 of the indices) is out of range for axis 0 of extent 4");
  CHECK(dst.to_vector<float>() == std::vector<float>(45, 0.0f));
  CHECK(message_of([&] { (void)take(x, tensor::from_values<float>({1}, {0.f}), 0); }) ==
        "kiln::kernels::take: the indices must be int32 or int64, got float32[1]");
  CHECK(message_of([&] { (void)take(tensor(), bad); }) == "kiln::kernels::take: an operand is undefined");
  CHECK(message_of([&] { (void)take(x, bad, 3); }) == "kiln::kernels::take: axis 3 is out of range for a 3-d tensor");
}

TEST_CASE("gather_elements: along each axis, negative indices, shorter indices, strided operands, and errors") {
  const tensor x = iota<float>({4, 5, 3});
  for (std::int64_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    const auto ax = std::size_t(axis < 0 ? axis + 3 : axis);
    // Indices shorter than x on the other axes, with negative entries.
    shape_vector ishape{3, 2, 2};
    ishape[ax] = 4;
    tensor idx = tensor::empty(ishape, dtype::int64);
    for (std::int64_t i = 0; i < idx.numel(); ++i) idx.data<std::int64_t>()[i] = (i * 7) % x.shape(ax) - (i % 3 == 0 ? x.shape(ax) : 0);
    const tensor g = gather_elements(x, idx, axis);
    REQUIRE(g.shape() == ishape);
    for_each_index(g.shape(), [&](const shape_vector& o) {
      std::int64_t k = at<std::int64_t>(idx, o);
      if (k < 0) k += x.shape(ax);
      shape_vector src = o;
      src[ax] = k;
      CHECK(at<float>(g, o) == at<float>(x, src));
    });
  }
  // A transposed input, int32 indices, a strided output.
  const tensor xt = x.permute({2, 1, 0});  // [3, 5, 4]
  const tensor i32 = tensor::from_values<std::int32_t>({1, 2, 2}, {4, 0, -1, 2});
  const tensor big = tensor::zeros({1, 2, 4}, dtype::float32);
  const tensor out = big.slice(2, 0, 4, 2);
  gather_elements(xt, i32, 1, out);
  CHECK(out.contiguous().to_vector<float>() == std::vector<float>{at<float>(xt, {0, 4, 0}), at<float>(xt, {0, 0, 1}), at<float>(xt, {0, 4, 0}),
                                                                  at<float>(xt, {0, 2, 1})});
  const tensor dst = tensor::zeros({2, 2, 2}, dtype::float32);
  const tensor bad = tensor::from_values<std::int64_t>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 1, 0});
  CHECK(message_of([&] { gather_elements(x, bad, 0, dst); }) ==
        "kiln::kernels::gather_elements: index 4 (element 4 of the indices) is out of range for axis 0 of extent 4");
  CHECK(dst.to_vector<float>() == std::vector<float>(8, 0.0f));
  CHECK(message_of([&] { (void)gather_elements(x, tensor::zeros({2, 2}, dtype::int64), 0); }) ==
        "kiln::kernels::gather_elements: the indices int64[2, 2] must have the rank of x float32[4, 5, 3]");
  CHECK(message_of([&] { (void)gather_elements(x, tensor::zeros({2, 6, 1}, dtype::int64), 0); }) ==
        "kiln::kernels::gather_elements: the indices int64[2, 6, 1] are longer than x float32[4, 5, 3] along axis 1");
  CHECK(message_of([&] { (void)gather_elements(x, tensor::zeros({2, 2, 2}, dtype::float32), 0); }) ==
        "kiln::kernels::gather_elements: the indices must be int32 or int64, got float32[2, 2, 2]");
  CHECK(message_of([&] { (void)gather_elements(x, bad, 3); }) == "kiln::kernels::gather_elements: axis 3 is out of range for a 3-d tensor");
}

TEST_CASE("scatter_elements: ONNX's examples, every reduction, duplicates, negative indices, and errors that write nothing") {
  // ONNX's ScatterElements example with axis 1: data [[1, 2, 3, 4, 5]], indices [[1, 3]], updates [[1.1, 2.1]].
  const tensor data = tensor::from_values<float>({1, 5}, {1, 2, 3, 4, 5});
  const tensor idx = tensor::from_values<std::int64_t>({1, 2}, {1, -2});
  const tensor upd = tensor::from_values<float>({1, 2}, {1.5f, 2.5f});
  CHECK(scatter_elements(data, idx, upd, 1).to_vector<float>() == std::vector<float>{1, 1.5f, 3, 2.5f, 5});
  // Axis 0 on a 3x3, the indices shorter than the data along axis 1.
  const tensor sq = tensor::zeros({3, 3}, dtype::float32);
  const tensor i2 = tensor::from_values<std::int64_t>({2, 2}, {1, 0, 2, 1});
  const tensor u2 = tensor::from_values<float>({2, 2}, {1, 2, 3, 4});
  CHECK(scatter_elements(sq, i2, u2, 0).to_vector<float>() == std::vector<float>{0, 2, 0, 1, 4, 0, 3, 0, 0});
  // Duplicates: update keeps the last, add and mul combine them all.
  const tensor dup = tensor::from_values<std::int32_t>({2}, {1, 1});
  const tensor two = tensor::from_values<float>({2}, {3, 5});
  const tensor base = tensor::from_values<float>({3}, {2, 2, 2});
  CHECK(scatter_elements(base, dup, two, 0, scatter_reduction::update).to_vector<float>() == std::vector<float>{2, 5, 2});
  CHECK(scatter_elements(base, dup, two, 0, scatter_reduction::add).to_vector<float>() == std::vector<float>{2, 10, 2});
  CHECK(scatter_elements(base, dup, two, 0, scatter_reduction::mul).to_vector<float>() == std::vector<float>{2, 30, 2});
  CHECK(scatter_elements(base, dup, two, 0, scatter_reduction::max).to_vector<float>() == std::vector<float>{2, 5, 2});
  CHECK(scatter_elements(base, dup, two, 0, scatter_reduction::min).to_vector<float>() == std::vector<float>{2, 2, 2});
  // Errors: nothing written.
  tensor out = tensor::zeros({1, 5}, dtype::float32);
  CHECK(message_of([&] { scatter_elements(data, tensor::from_values<std::int64_t>({1, 2}, {1, 5}), upd, 1, scatter_reduction::update, out); }) ==
        "kiln::kernels::scatter_elements: index 5 (element 1 of the indices) is out of range for axis 1 of extent 5");
  CHECK(out.to_vector<float>() == std::vector<float>(5, 0.0f));
  CHECK(message_of([&] { (void)scatter_elements(data, idx, tensor::zeros({1, 3}, dtype::float32), 1); }) ==
        "kiln::kernels::scatter_elements: the updates must be float32[1, 2] (x's dtype, the indices' shape), got float32[1, 3]");
  CHECK(message_of([&] { (void)scatter_elements(tensor::zeros({2}, dtype::bool_), dup, tensor::zeros({2}, dtype::bool_), 0, scatter_reduction::add); }) ==
        "kiln::kernels::scatter_elements: cannot combine bool elements; only 'update' takes them");
  CHECK(message_of([&] { (void)parse_scatter_reduction("scatter_elements", "sum"); }) ==
        "kiln::kernels::scatter_elements: the reduction must be 'update', 'add', 'mul', 'max' or 'min', not 'sum'");
  CHECK(message_of([&] { scatter_elements(out, idx, upd, 1, scatter_reduction::update, out); }) ==
        "kiln::kernels::scatter_elements: the output float32[1, 5] overlaps the input float32[1, 5]; write into a separate tensor");
}

TEST_CASE("pad: constant, edge and reflect against a reference, on every axis at once") {
  const tensor row = tensor::from_values<float>({3}, {1, 2, 3});
  CHECK(pad(row, {2, 2}, pad_mode::reflect).to_vector<float>() == std::vector<float>{3, 2, 1, 2, 3, 2, 1});
  CHECK(pad(row, {2, 1}, pad_mode::edge).to_vector<float>() == std::vector<float>{1, 1, 1, 2, 3, 3});
  CHECK(pad(row, {1, 0}, pad_mode::constant, -7).to_vector<float>() == std::vector<float>{-7, 1, 2, 3});
  const tensor x = random_tensor<float>({3, 4, 5}, -1, 1, 9).permute({1, 0, 2});  // strided
  const shape_vector widths = {1, 2, 0, 2, 3, 4};
  for (pad_mode mode : {pad_mode::constant, pad_mode::edge, pad_mode::reflect}) {
    CAPTURE(int(mode));
    const tensor p = pad(x, sp(widths), mode, 0.5);
    REQUIRE(p.shape() == shape_vector{4 + 3, 3 + 2, 5 + 7});
    for_each_index(p.shape(), [&](const shape_vector& o) {
      shape_vector src(3);
      bool inside = true;
      for (std::size_t a = 0; a < 3; ++a) {
        const std::int64_t n = x.shape(a);
        std::int64_t q = o[a] - widths[2 * a];
        inside = inside && q >= 0 && q < n;
        if (mode == pad_mode::edge) q = std::clamp<std::int64_t>(q, 0, n - 1);
        if (mode == pad_mode::reflect) q = q < 0 ? -q : q >= n ? 2 * (n - 1) - q : q;
        src[a] = q;
      }
      const float want = mode == pad_mode::constant && !inside ? 0.5f : at<float>(x, src);
      CHECK(at<float>(p, o) == want);
    });
  }
  // Integer constants must be representable; bool pads with 0 or 1.
  const tensor ints = iota<std::int8_t>({2, 2});
  CHECK(pad(ints, {0, 0, 1, 0}, pad_mode::constant, -128).to_vector<std::int8_t>() == std::vector<std::int8_t>{-128, 0, 1, -128, 2, 3});
  CHECK(message_of([&] { (void)pad(ints, {0, 0, 1, 0}, pad_mode::constant, 1.5); }) == "kiln::kernels::pad: the pad value 1.5 is not a int8");
  CHECK(message_of([&] { (void)pad(ints, {0, 0, 1, 0}, pad_mode::constant, 300); }) == "kiln::kernels::pad: the pad value 300 is not a int8");
  CHECK(message_of([&] { (void)pad(row, {3, 0}, pad_mode::reflect); }) == "kiln::kernels::pad: reflect padding (3, 0) of axis 0 must be smaller than its extent 3");
  CHECK(message_of([&] { (void)pad(tensor::empty({0}, dtype::float32), {1, 0}, pad_mode::edge); }) ==
        "kiln::kernels::pad: edge padding of axis 0 needs a non-empty axis");
  CHECK(message_of([&] { (void)pad(row, {1}); }) == "kiln::kernels::pad: pad_width must have 2 values (before, after) per axis of float32[3], got 1");
  CHECK(message_of([&] { (void)pad(tensor(), {1, 0}); }) == "kiln::kernels::pad: the input is undefined");
  CHECK(message_of([&] { (void)pad(row, {-1, 0}); }) == "kiln::kernels::pad: pad_width of axis 0 is negative (-1, 0)");
  CHECK(message_of([&] { (void)parse_pad_mode("wrap"); }) == "kiln::kernels::pad: unknown pad mode \"wrap\" (constant, edge or reflect)");
}

TEST_CASE("gather_nd and scatter_nd: tuples pick slices, batch axes, negative indices, duplicates combine in order, errors") {
  const tensor x = tensor::from_values<std::int32_t>({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // whole tuples pick elements, shorter ones pick rows
  CHECK(gather_nd(x, tensor::from_values<std::int64_t>({2, 3}, {1, 0, 2, -2, -1, -1})).to_vector<std::int32_t>() == std::vector<std::int32_t>{8, 5});
  const tensor rows = gather_nd(x, tensor::from_values<std::int64_t>({1, 2, 2}, {1, 1, 0, 0}));
  CHECK(rows.shape() == shape_vector{1, 2, 3});
  CHECK(rows.to_vector<std::int32_t>() == std::vector<std::int32_t>{9, 10, 11, 0, 1, 2});
  // batch_dims 1: each batch element indexes its own [2, 3]
  const tensor batched = gather_nd(x, tensor::from_values<std::int32_t>({2, 1, 1}, {1, 0}), 1);
  CHECK(batched.shape() == shape_vector{2, 1, 3});
  CHECK(batched.to_vector<std::int32_t>() == std::vector<std::int32_t>{3, 4, 5, 6, 7, 8});
  // scatter: update (the last duplicate wins), add (duplicates accumulate)
  const tensor idx = tensor::from_values<std::int64_t>({3, 1}, {1, 0, 1});
  const tensor upd = tensor::from_values<std::int32_t>({3, 2, 3}, std::vector<std::int32_t>(18, 1));
  const tensor big = tensor::from_values<std::int32_t>({3, 2, 3}, {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3});
  CHECK(scatter_nd(x, idx, big).to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3});
  CHECK(scatter_nd(x, idx, upd, scatter_reduction::add).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13});
  CHECK(scatter_nd(x, tensor::from_values<std::int64_t>({1, 3}, {0, 1, -1}), tensor::from_values<std::int32_t>({1}, {-7}), scatter_reduction::min)
            .to_vector<std::int32_t>()[5] == -7);
  tensor in_place = x.clone();  // out may be x itself
  scatter_nd(in_place, idx, big, scatter_reduction::update, in_place);
  CHECK(in_place.to_vector<std::int32_t>() == scatter_nd(x, idx, big).to_vector<std::int32_t>());
  CHECK(message_of([&] { (void)gather_nd(x, tensor::from_values<std::int64_t>({1, 2}, {2, 0})); }) ==
        "kiln::kernels::gather_nd: index 2 (tuple 0, position 0) is out of range for axis 0 of extent 2");
  CHECK(message_of([&] { (void)gather_nd(x, tensor::from_values<std::int64_t>({1, 4}, {0, 0, 0, 0})); }) ==
        "kiln::kernels::gather_nd: index tuples of length 4 do not fit x int32[2, 2, 3] after 0 batch axes");
  CHECK(message_of([&] { (void)gather_nd(x, tensor::from_values<std::int64_t>({3, 1}, {0, 0, 0}), 1); }) ==
        "kiln::kernels::gather_nd: batch axis 0 of the indices int64[3, 1] differs from x int32[2, 2, 3]");
  CHECK(message_of([&] { (void)gather_nd(x, tensor::from_values<float>({1}, {0})); }) ==
        "kiln::kernels::gather_nd: the indices must be int32 or int64, got float32[1]");
  CHECK(message_of([&] { (void)scatter_nd(x, idx, upd.slice(0, 0, 2)); }) ==
        "kiln::kernels::scatter_nd: the updates must be int32[3, 2, 3], got int32[2, 2, 3]");
  CHECK(message_of([&] { (void)scatter_nd(tensor::zeros({2}, dtype::bool_), tensor::from_values<std::int64_t>({1, 1}, {0}), tensor::zeros({1}, dtype::bool_),
                                          scatter_reduction::add); }) == "kiln::kernels::scatter_nd: cannot combine bool elements; only 'update' takes them");
}
