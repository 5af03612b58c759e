// SPDX-License-Identifier: Apache-2.0
/// \file
/// ONNX tensors and element types as kiln's: `TensorProto` → `ir::ndarray` (and
/// `runtime::tensor`), ONNX's `TensorProto::DataType` → `kiln::dtype`.
///
/// Both storages ONNX allows are read: `raw_data` (little-endian bytes) and the typed fields
/// (`float_data`, `int32_data` — which also carries int8, uint8, bool and float16 bit patterns —
/// `int64_data`, `double_data`). Every count is checked against the dimensions, so a truncated or
/// inconsistent tensor is an `import_error` naming it, never a read past the end. Tensors stored
/// outside the model file (external data, read beforehand by `load_external_data`) and element types kiln has no kernels for (strings,
/// int16, the unsigned types beyond uint8, bfloat16, complex) are errors that say so.
#pragma once

#include <kiln/ir/ndarray.hpp>
#include <kiln/runtime/tensor.hpp>
#include <kiln/support/dtype.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/paged_bytes.hpp>

#include <onnx/onnx_pb.h>

#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::frontend::onnx {

/// A model kiln cannot import: malformed, unsupported, or inconsistent. The message says what and
/// where (the node, its operator type, the input or attribute).
class import_error : public kiln::error {
public:
  using kiln::error::error;
};

/// The kiln dtype of an ONNX element type, or nothing when kiln has none.
inline std::optional<dtype> dtype_of(int onnx_type) noexcept {
  using T = ::onnx::TensorProto;
  switch (onnx_type) {
    case T::FLOAT: return dtype::float32;
    case T::DOUBLE: return dtype::float64;
    case T::FLOAT16: return dtype::float16;
    case T::INT8: return dtype::int8;
    case T::UINT8: return dtype::uint8;
    case T::INT32: return dtype::int32;
    case T::INT64: return dtype::int64;
    case T::BOOL: return dtype::bool_;
    default: return std::nullopt;
  }
}

/// ONNX's name of an element type ("FLOAT", "STRING", ...), for messages.
inline std::string onnx_type_name(int onnx_type) {
  if (::onnx::TensorProto::DataType_IsValid(onnx_type))
    return ::onnx::TensorProto::DataType_Name(static_cast<::onnx::TensorProto::DataType>(onnx_type));
  return "unknown type " + std::to_string(onnx_type);
}

/// The kiln dtype of an ONNX element type; an `import_error` naming `what` when there is none.
inline dtype require_dtype(int onnx_type, const std::string& what) {
  if (auto d = dtype_of(onnx_type)) return *d;
  throw import_error("kiln::frontend::onnx: " + what + " has element type " + onnx_type_name(onnx_type) +
                     ", which kiln does not support (supported: FLOAT, DOUBLE, FLOAT16, INT8, UINT8, INT32, INT64, BOOL)");
}

/// Where a tensor's raw_data lies in the mapped model file it was read from (`skeleton_of`, mapped_model.hpp).
struct mapped_raw_data {
  std::shared_ptr<const kiln::detail::paged_bytes> file;
  std::span<const std::byte> bytes;  ///< within file->bytes()
};

/// The contents of `t` as an `ir::ndarray`; `what` names it in errors ("initializer 'fc.weight'").
/// With `mapped`, the raw_data is `mapped->bytes`, not `t`'s own (the placeholder `skeleton_of` left),
/// and the array holds it where it lies in the file (`ir::ndarray::map`), bool tensors apart
/// (their bytes are normalized to 0 and 1, so copied).
inline ir::ndarray to_ndarray(const ::onnx::TensorProto& t, const std::string& what, const mapped_raw_data* mapped = nullptr) {
  auto fail = [&](const std::string& msg) -> void { throw import_error("kiln::frontend::onnx: " + what + ": " + msg); };
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL)
    fail("its data is stored outside the model file (external data); import the model with import_file, or give "
         "import_options::external_data_dir");
  if (t.has_segment()) fail("it is segmented, which kiln does not support");
  const dtype dt = require_dtype(t.data_type(), what);
  std::vector<std::int64_t> shape(t.dims().begin(), t.dims().end());
  std::size_t numel = 1;
  for (auto d : shape) {
    if (d < 0) fail("negative dimension " + std::to_string(d));
    if (__builtin_mul_overflow(numel, static_cast<std::size_t>(d), &numel) || numel > (std::size_t(1) << 40))
      fail("its dimensions overflow");
  }
  const std::size_t item = size_of(dt);
  auto count_error = [&](const char* field, std::size_t have) {
    fail(std::string(field) + " holds " + std::to_string(have) + " values for " + std::to_string(numel) + " elements");
  };
  if (mapped || t.has_raw_data()) {
    const std::span<const std::byte> raw =
        mapped ? mapped->bytes : std::span<const std::byte>(reinterpret_cast<const std::byte*>(t.raw_data().data()), t.raw_data().size());
    if (raw.size() != numel * item)
      fail("raw_data holds " + std::to_string(raw.size()) + " bytes for " + std::to_string(numel) + " elements of " +
           std::to_string(item) + " bytes");
    if (mapped && dt != dtype::bool_) return ir::ndarray::map(dt, std::move(shape), mapped->file, raw);
    if (dt != dtype::bool_) return ir::ndarray::copy(dt, std::move(shape), raw);  // one copy, into the constant's own block
    std::vector<std::byte> bits(raw.begin(), raw.end());
    if (mapped) mapped->file->evict(raw);
    for (auto& b : bits) b = std::byte(b != std::byte{0});
    return ir::ndarray(dt, std::move(shape), bits);
  }
  std::vector<std::byte> bytes(numel * item);
  auto copy_each = [&](const auto& field, const char* name, auto convert) {
    if (static_cast<std::size_t>(field.size()) != numel) count_error(name, static_cast<std::size_t>(field.size()));
    for (std::size_t i = 0; i < numel; ++i) convert(bytes.data() + i * item, field.Get(static_cast<int>(i)));
  };
  switch (dt) {
    case dtype::float32: copy_each(t.float_data(), "float_data", [](std::byte* p, float v) { std::memcpy(p, &v, 4); }); break;
    case dtype::float64: copy_each(t.double_data(), "double_data", [](std::byte* p, double v) { std::memcpy(p, &v, 8); }); break;
    case dtype::int64: copy_each(t.int64_data(), "int64_data", [](std::byte* p, std::int64_t v) { std::memcpy(p, &v, 8); }); break;
    case dtype::int32: copy_each(t.int32_data(), "int32_data", [](std::byte* p, std::int32_t v) { std::memcpy(p, &v, 4); }); break;
    case dtype::int8: copy_each(t.int32_data(), "int32_data", [](std::byte* p, std::int32_t v) { *p = std::byte(std::int8_t(v)); }); break;
    case dtype::uint8: copy_each(t.int32_data(), "int32_data", [](std::byte* p, std::int32_t v) { *p = std::byte(std::uint8_t(v)); }); break;
    case dtype::bool_: copy_each(t.int32_data(), "int32_data", [](std::byte* p, std::int32_t v) { *p = std::byte(v != 0); }); break;
    case dtype::float16:
      copy_each(t.int32_data(), "int32_data", [](std::byte* p, std::int32_t v) {
        const auto bits = static_cast<std::uint16_t>(v);
        std::memcpy(p, &bits, 2);
      });
      break;
    case dtype::void_: break;
  }
  return ir::ndarray(dt, std::move(shape), std::move(bytes));
}

/// The contents of `t` as a run-time tensor (inputs and expected outputs of test data).
inline runtime::tensor to_tensor(const ::onnx::TensorProto& t, const std::string& what) {
  const ir::ndarray a = to_ndarray(t, what);
  runtime::tensor out = runtime::tensor::empty(a.shape(), a.dt());
  if (!a.bytes().empty()) std::memcpy(out.data(), a.bytes().data(), a.bytes().size());
  return out;
}

/// A `TensorProto` parsed from bytes (the `.pb` files of ONNX's test data).
inline ::onnx::TensorProto parse_tensor(const std::string& bytes, const std::string& what) {
  ::onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) throw import_error("kiln::frontend::onnx: " + what + " is not a serialized TensorProto");
  return t;
}

}  // namespace kiln::frontend::onnx
