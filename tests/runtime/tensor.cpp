// SPDX-License-Identifier: Apache-2.0
#include <kiln/runtime/tensor.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

using namespace kiln;
using namespace kiln::runtime;
using kiln_test::message_of;

TEST_CASE("a new tensor is contiguous, 64-byte aligned and knows its size") {
  auto t = tensor::empty({2, 3, 4}, dtype::float32);
  CHECK(t.ndim() == 3);
  CHECK(t.numel() == 24);
  CHECK(t.nbytes() == 96);
  CHECK(t.strides() == shape_vector{12, 4, 1});
  CHECK(t.is_contiguous());
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
  CHECK(t.dev() == cpu());
  CHECK(describe(t) == "float32[2, 3, 4]");
}

TEST_CASE("scalars and empty tensors are tensors too") {
  auto s = tensor::from_values<double>({}, {2.5});
  CHECK(s.ndim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.to_vector<double>() == std::vector<double>{2.5});
  auto e = tensor::zeros({3, 0}, dtype::int32);
  CHECK(e.numel() == 0);
  CHECK(e.to_vector<std::int32_t>().empty());
  CHECK(equal(e, tensor::zeros({3, 0}, dtype::int32)));
}

TEST_CASE("views share storage: view, permute and slice see writes through each other") {
  auto t = tensor::from_values<std::int32_t>({2, 3}, {0, 1, 2, 3, 4, 5});
  auto flat = t.view({-1});
  CHECK(flat.shape() == shape_vector{6});
  auto tr = t.permute({1, 0});
  CHECK(tr.shape() == shape_vector{3, 2});
  CHECK_FALSE(tr.is_contiguous());
  CHECK(tr.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 3, 1, 4, 2, 5});
  auto col = t.slice(1, 0, 3, 2);  // columns 0 and 2
  CHECK(col.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 2, 3, 5});
  tr.at<std::int32_t>({2, 1}) = 42;  // element (1, 2) of t
  CHECK(t.at<std::int32_t>({1, 2}) == 42);
  CHECK(flat.at<std::int32_t>({5}) == 42);
  CHECK(col.at<std::int32_t>({1, 1}) == 42);
  CHECK(t.data_storage().get() == tr.data_storage().get());
}

TEST_CASE("clone and copy_from work across layouts and make independent copies") {
  auto t = tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto c = t.permute({1, 0}).clone();
  CHECK(c.is_contiguous());
  CHECK(c.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  c.at<float>({0, 0}) = 9;
  CHECK(t.at<float>({0, 0}) == 1);
  auto dst = tensor::zeros({3, 2}, dtype::float32);
  dst.permute({1, 0}).copy_from(t);
  CHECK(dst.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(equal(dst, t.permute({1, 0})));
  CHECK_FALSE(equal(dst, t));
}

TEST_CASE("from_storage places tensors inside a storage and rejects ones that do not fit") {
  auto st = make_storage(64);
  auto a = tensor::from_storage(st, 0, dtype::float32, {4});
  auto b = tensor::from_storage(st, 16, dtype::float32, {2, 2});
  a.data<float>()[0] = 1;
  b.data<float>()[0] = 7;
  CHECK(a.data<float>()[0] == 1);
  CHECK(reinterpret_cast<float*>(st->data() + 16)[0] == 7);
  CHECK(message_of([&] { tensor::from_storage(st, 48, dtype::float32, {8}); }) ==
        "kiln::runtime::tensor::from_storage: a float32 tensor of shape [8] at byte offset 48 does not fit in a storage of 64 bytes");
  CHECK(message_of([&] { tensor::from_storage(st, 0, dtype::float32, {2, 2}, {-1, 1}); }).find("does not fit") != std::string::npos);
  CHECK(message_of([&] { tensor::from_storage(st, 0, dtype::float32, {2}, {1, 1}); }) ==
        "kiln::runtime::tensor::from_storage: 2 strides for 1 dimensions");
}

TEST_CASE("misuse of the tensor API says what is wrong") {
  auto t = tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(message_of([&] { tensor::empty({2, -1}, dtype::float32); }) ==
        "kiln::runtime::tensor::empty: shape [2, -1] has a negative dimension");
  CHECK(message_of([&] { tensor::empty({1 << 30, 1 << 30, 1 << 30}, dtype::float32); }).find("more than 2^63") != std::string::npos);
  CHECK(message_of([&] { t.data<double>(); }) == "kiln::runtime::tensor::data: asked for float64 elements of a float32[2, 3] tensor");
  CHECK(message_of([&] { t.at<float>({2, 0}); }) == "kiln::runtime::tensor::at: index 2 is out of range for axis 0 of size 2");
  CHECK(message_of([&] { t.view({4, 2}); }) ==
        "kiln::runtime::tensor::view: shape [4, 2] has 8 elements, the tensor [2, 3] has 6");
  CHECK(message_of([&] { t.view({-1, 4}); }) == "kiln::runtime::tensor::view: cannot infer -1 in [-1, 4] for 6 elements");
  CHECK(message_of([&] { t.permute({1, 0}).view({6}); }).find("is not contiguous") != std::string::npos);
  CHECK(message_of([&] { t.permute({0, 0}); }) == "kiln::runtime::tensor::permute: [0, 0] is not a permutation of the 2 axes");
  CHECK(message_of([&] { t.slice(1, 2, 4); }) == "kiln::runtime::tensor::slice: [2:4:1] on axis 1 of shape [2, 3] is out of range");
  // No elements, but strides that would overflow int64: an error, not undefined behaviour.
  CHECK(message_of([&] { tensor::empty({0, std::int64_t(1) << 32, std::int64_t(1) << 32}, dtype::float32); }) ==
        "kiln::runtime::tensor::empty: shape [0, 4294967296, 4294967296] is too large: its row-major strides do not "
        "fit in int64");
  CHECK_NOTHROW(tensor::empty({0, std::int64_t(1) << 31, std::int64_t(1) << 31}, dtype::float32));  // 2^62: fits
  CHECK(message_of([&] { t.view({-1, std::int64_t(1) << 40, std::int64_t(1) << 40}); }) ==
        "kiln::runtime::tensor::view: shape [-1, 1099511627776, 1099511627776] has more than 2^63 elements");
  CHECK(message_of([&] { tensor::from_values<float>({2}, {1.f, 2.f, 3.f}); }) ==
        "kiln::runtime::tensor::from_values: shape [2] has 2 elements but 3 were given");
  CHECK(message_of([&] { tensor::zeros({2}, dtype::float32).copy_from(t); }) ==
        "kiln::runtime::tensor::copy_from: cannot copy a float32[2, 3] into a float32[2]");
}
