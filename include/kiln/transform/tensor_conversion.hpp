// SPDX-License-Identifier: Apache-2.0
/// \file
/// Between the IR's constants (`ir::ndarray`, immutable host bytes) and the run time's tensors:
/// code generation puts constants in the executable's pool, constant folding reads results back.
#pragma once

#include <kiln/ir/ndarray.hpp>
#include <kiln/runtime/tensor.hpp>

#include <cstring>

namespace kiln::transform {

/// A new contiguous tensor holding a copy of `a`.
inline runtime::tensor to_tensor(const ir::ndarray& a) {
  runtime::tensor t = runtime::tensor::empty(runtime::shape_vector(a.shape().begin(), a.shape().end()), a.dt());
  if (!a.bytes().empty()) std::memcpy(t.data(), a.bytes().data(), a.bytes().size());
  return t;
}

/// An IR constant holding a copy of `t`'s elements (in row-major order, whatever its strides).
inline ir::ndarray to_ndarray(const runtime::tensor& t) {
  const runtime::tensor c = t.contiguous();
  std::vector<std::byte> bytes(c.nbytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), c.data(), bytes.size());
  return ir::ndarray(c.type(), std::vector<std::int64_t>(c.shape().begin(), c.shape().end()), std::move(bytes));
}

}  // namespace kiln::transform
