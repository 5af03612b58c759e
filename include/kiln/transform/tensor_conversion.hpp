// SPDX-License-Identifier: Apache-2.0
/// \file
/// Between the IR's constants (`ir::ndarray`, immutable host bytes) and the run time's tensors:
/// code generation puts constants in the executable's pool, constant folding reads results back.
#pragma once

#include <kiln/ir/ndarray.hpp>
#include <kiln/runtime/tensor.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

namespace kiln::transform {

namespace detail {

/// Keeps an IR constant's bytes alive for the tensors that read them in place.
class ndarray_bytes final : public runtime::object {
public:
  explicit ndarray_bytes(std::shared_ptr<const std::byte> b) noexcept : bytes(std::move(b)) {}
  std::string_view type_name() const noexcept override { return "transform.ConstantBytes"; }
  std::shared_ptr<const std::byte> bytes;
};

}  // namespace detail

/// `a` as a contiguous tensor: over `a`'s own bytes, without a copy, when they are aligned as a
/// tensor's (every ndarray kiln allocates is), else a copy. The tensor must not be written: it
/// is the constant. Bytes mapped from a file (`ir::ndarray::map`) are always copied, and then
/// evicted: what the compiler makes of a constant (an executable's pool, a packed weight, a
/// folded result) never reads the file again, and the file's pages never count twice.
inline runtime::tensor to_tensor(const ir::ndarray& a) {
  runtime::shape_vector shape(a.shape().begin(), a.shape().end());
  const std::span<const std::byte> b = a.bytes();
  if (a.is_mapped()) {
    a.check_source("kiln::transform::to_tensor");
    runtime::tensor t = runtime::tensor::empty(std::move(shape), a.dt());
    if (!b.empty()) std::memcpy(t.data(), b.data(), b.size());
    a.evict();
    return t;
  }
  if (!b.empty() && reinterpret_cast<std::uintptr_t>(b.data()) % runtime::storage_alignment == 0) {
    auto keeper = runtime::make_object<detail::ndarray_bytes>(a.shared_bytes());
    auto st = runtime::make_object<runtime::storage>(runtime::object_ptr<const runtime::object>(std::move(keeper)), runtime::default_allocator(),
                                                     const_cast<std::byte*>(b.data()), b.size());
    return runtime::tensor::from_storage(std::move(st), 0, a.dt(), std::move(shape));
  }
  runtime::tensor t = runtime::tensor::empty(std::move(shape), a.dt());
  if (!b.empty()) std::memcpy(t.data(), b.data(), b.size());
  return t;
}

/// An IR constant holding `t`'s elements (in row-major order, whatever its strides): over `t`'s
/// own memory when it is contiguous and aligned, else a copy. `t` must not be written afterwards
/// (a kernel's fresh result, as constant folding and weight packing make, never is).
inline ir::ndarray to_ndarray(const runtime::tensor& t) {
  std::vector<std::int64_t> shape(t.shape().begin(), t.shape().end());
  if (t.is_contiguous() && t.nbytes() && reinterpret_cast<std::uintptr_t>(t.data()) % runtime::storage_alignment == 0) {
    auto holder = std::make_shared<const runtime::tensor>(t);
    return ir::ndarray::share(t.type(), std::move(shape), std::shared_ptr<const std::byte>(holder, static_cast<const std::byte*>(t.data())),
                              t.nbytes());
  }
  const runtime::tensor c = t.contiguous();
  return ir::ndarray::copy(c.type(), std::move(shape), std::span<const std::byte>(static_cast<const std::byte*>(c.data()), c.nbytes()));
}

}  // namespace kiln::transform
