// SPDX-License-Identifier: Apache-2.0
/// \file
/// `ndarray`: the immutable host tensor that IR constants hold.
#pragma once

#include <kiln/support/dtype.hpp>
#include <kiln/support/error.hpp>

#include <boost/container_hash/hash.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::ir {

/// A dense, row-major host tensor with shared, immutable bytes.
class ndarray {
public:
  ndarray() = default;

  /// Wraps raw little-endian bytes; their size must match the shape and dtype.
  ndarray(dtype dt, std::vector<std::int64_t> shape, std::vector<std::byte> bytes)
      : dt_(dt), shape_(std::move(shape)) {
    if (!is_known(dt_)) throw error("kiln::ir::ndarray: a constant needs a known dtype, not void");
    for (auto d : shape_)
      if (d < 0) throw error("kiln::ir::ndarray: negative dimension " + std::to_string(d));
    if (bytes.size() != numel() * size_of(dt_))
      throw error("kiln::ir::ndarray: " + std::to_string(bytes.size()) + " bytes given, but shape and dtype " +
                  std::string(name(dt_)) + " need " + std::to_string(numel() * size_of(dt_)));
    hash_ = hash_bytes(bytes);
    data_ = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  }

  /// A tensor of `shape` holding `values` converted to `dt`.
  template <class T>
  static ndarray from(dtype dt, std::vector<std::int64_t> shape, std::span<const T> values) {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d < 0 ? 0 : d);
    if (values.size() != n)
      throw error("kiln::ir::ndarray: " + std::to_string(values.size()) + " values given for a shape of " +
                  std::to_string(n) + " elements");
    std::vector<std::byte> bytes(n * size_of(dt));
    for (std::size_t i = 0; i < n; ++i) store(dt, bytes.data() + i * size_of(dt), static_cast<double>(values[i]));
    return ndarray(dt, std::move(shape), std::move(bytes));
  }
  template <class T>
  static ndarray from(dtype dt, std::vector<std::int64_t> shape, std::initializer_list<T> values) {
    return from<T>(dt, std::move(shape), std::span<const T>(values.begin(), values.size()));
  }
  /// A rank-0 tensor.
  static ndarray scalar(dtype dt, double value) {
    return from<double>(dt, {}, std::span<const double>(&value, 1));
  }

  dtype dt() const noexcept { return dt_; }
  const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  std::size_t numel() const noexcept {
    std::size_t n = 1;
    for (auto d : shape_) n *= static_cast<std::size_t>(d);
    return n;
  }
  std::span<const std::byte> bytes() const noexcept {
    return data_ ? std::span<const std::byte>(*data_) : std::span<const std::byte>();
  }

  /// Element `i` (row-major) converted to double.
  double element(std::size_t i) const noexcept {
    const std::byte* p = data_->data() + i * size_of(dt_);
    switch (dt_) {
      case dtype::bool_: return std::to_integer<int>(*p) != 0 ? 1.0 : 0.0;
      case dtype::int8: return load<std::int8_t>(p);
      case dtype::uint8: return load<std::uint8_t>(p);
      case dtype::int32: return load<std::int32_t>(p);
      case dtype::int64: return static_cast<double>(load<std::int64_t>(p));
      case dtype::float16: return half_to_float(load<std::uint16_t>(p));
      case dtype::float32: return load<float>(p);
      case dtype::float64: return load<double>(p);
      case dtype::void_: break;
    }
    return 0;
  }
  /// Element `i` of an integer tensor, exactly.
  std::int64_t element_int(std::size_t i) const noexcept {
    const std::byte* p = data_->data() + i * size_of(dt_);
    if (dt_ == dtype::int64) return load<std::int64_t>(p);
    return static_cast<std::int64_t>(element(i));
  }

  /// A hash of the bytes, computed once when the array is made (structural hashing of a module
  /// meets each weight many times; a model's weights are megabytes).
  std::size_t content_hash() const noexcept { return hash_; }

  /// Same dtype, shape and bytes.
  friend bool operator==(const ndarray& a, const ndarray& b) noexcept {
    if (a.dt_ != b.dt_ || a.shape_ != b.shape_ || a.hash_ != b.hash_) return false;
    if (a.data_ == b.data_) return true;
    auto x = a.bytes(), y = b.bytes();
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size()) == 0);
  }

  /// Writes `v` converted to `dt` at `p`.
  static void store(dtype dt, std::byte* p, double v) noexcept {
    switch (dt) {
      case dtype::bool_: *p = std::byte(v != 0 ? 1 : 0); break;
      case dtype::int8: put(p, saturate<std::int8_t>(v)); break;
      case dtype::uint8: put(p, saturate<std::uint8_t>(v)); break;
      case dtype::int32: put(p, saturate<std::int32_t>(v)); break;
      case dtype::int64: put(p, saturate<std::int64_t>(v)); break;
      case dtype::float16: put(p, float_to_half(static_cast<float>(v))); break;
      case dtype::float32: put(p, static_cast<float>(v)); break;
      case dtype::float64: put(p, v); break;
      case dtype::void_: break;
    }
  }

private:
  /// Eight bytes at a time, then the tail.
  static std::size_t hash_bytes(const std::vector<std::byte>& bytes) noexcept {
    std::size_t h = bytes.size(), i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, bytes.data() + i, 8);
      boost::hash_combine(h, w);
    }
    for (; i < bytes.size(); ++i) boost::hash_combine(h, static_cast<unsigned char>(bytes[i]));
    return h;
  }

  /// Converts to an integer type, clamping out-of-range values and mapping NaN to 0 (a plain
  /// cast would be undefined behaviour).
  template <class T>
  static T saturate(double v) noexcept {
    if (v != v) return T(0);
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::min();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
  template <class T>
  static T load(const std::byte* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  template <class T>
  static void put(std::byte* p, T v) noexcept {
    std::memcpy(p, &v, sizeof v);
  }

  dtype dt_ = dtype::void_;
  std::vector<std::int64_t> shape_;
  std::shared_ptr<const std::vector<std::byte>> data_;
  std::size_t hash_ = 0;  ///< content_hash()
};

}  // namespace kiln::ir
