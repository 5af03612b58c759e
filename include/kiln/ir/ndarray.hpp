// SPDX-License-Identifier: Apache-2.0
/// \file
/// `ndarray`: the immutable host tensor that IR constants hold.
#pragma once

#include <kiln/support/dtype.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/paged_bytes.hpp>

#include <boost/container_hash/hash.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::ir {

/// A dense, row-major host tensor with shared, immutable bytes.
class ndarray {
public:
  ndarray() = default;

  /// Alignment of the bytes an ndarray allocates, a run-time tensor's: the executable's constants
  /// and the kernels use them where they are (`transform::to_tensor`).
  static constexpr std::size_t alignment = 64;

  /// A copy of raw little-endian bytes; their size must match the shape and dtype.
  ndarray(dtype dt, std::vector<std::int64_t> shape, const std::vector<std::byte>& bytes) : dt_(dt), shape_(std::move(shape)) {
    init(bytes);
  }
  static ndarray copy(dtype dt, std::vector<std::int64_t> shape, std::span<const std::byte> bytes) {
    ndarray a;
    a.dt_ = dt;
    a.shape_ = std::move(shape);
    a.init(bytes);
    return a;
  }

  /// Bytes owned elsewhere, without a copy: `data` keeps their owner alive (a shared_ptr aliasing
  /// it), and nothing may write them from now on.
  static ndarray share(dtype dt, std::vector<std::int64_t> shape, std::shared_ptr<const std::byte> data, std::size_t nbytes) {
    ndarray a;
    a.dt_ = dt;
    a.shape_ = std::move(shape);
    a.check(nbytes);
    if (!data && nbytes) throw error("kiln::ir::ndarray::share: null data for " + std::to_string(nbytes) + " bytes");
    a.data_ = std::move(data);
    a.nbytes_ = nbytes;
    a.hash_ = hash_bytes(a.bytes());
    return a;
  }

  /// Bytes where they lie in a mapped file (`range`, a part of `file->bytes()`), without a copy:
  /// the array keeps the file mapped. Its pages are evicted once the content hash is computed,
  /// so that an array made this way costs no memory until it is read; `to_tensor` copies it and
  /// evicts it again, and `evict` is there for any other reader done with it.
  static ndarray map(dtype dt, std::vector<std::int64_t> shape, std::shared_ptr<const kiln::detail::paged_bytes> file,
                     std::span<const std::byte> range) {
    if (!file) throw error("kiln::ir::ndarray::map: no file");
    const std::span<const std::byte> all = file->bytes();
    const auto begin = reinterpret_cast<std::uintptr_t>(all.data()), at = reinterpret_cast<std::uintptr_t>(range.data());
    if (at < begin || at - begin > all.size() || range.size() > all.size() - (at - begin))
      throw error("kiln::ir::ndarray::map: the range is not inside the bytes of " + std::string(file->name()));
    const kiln::detail::paged_bytes* mapping = file.get();
    ndarray a = share(dt, std::move(shape), std::shared_ptr<const std::byte>(std::move(file), range.data()), range.size());
    a.mapping_ = mapping;
    a.evict();
    return a;
  }

  /// Whether the bytes lie in a mapped file (`map`).
  bool is_mapped() const noexcept { return mapping_ != nullptr; }
  /// A hint that the bytes will not be read soon: the pages of a mapped array leave the resident
  /// set (a read maps them in again); nothing for any other.
  void evict() const noexcept {
    if (mapping_) mapping_->evict(bytes());
  }
  /// For a mapped array, throws a `kiln::error` when its file was truncated or written in place
  /// since it was mapped (`mapped_file::check_unchanged`); nothing for any other.
  void check_source(std::string_view who) const {
    if (mapping_) mapping_->check_unchanged(who);
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
    return data_ ? std::span<const std::byte>(data_.get(), nbytes_) : std::span<const std::byte>();
  }

  /// The bytes' owner, for holding them without a copy (`transform::to_tensor`).
  const std::shared_ptr<const std::byte>& shared_bytes() const noexcept { return data_; }

  /// Element `i` (row-major) converted to double.
  double element(std::size_t i) const noexcept {
    const std::byte* p = data_.get() + i * size_of(dt_);
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
    const std::byte* p = data_.get() + i * size_of(dt_);
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
    const bool same = x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size()) == 0);
    a.evict();  // mapped bytes read for the comparison only
    b.evict();
    return same;
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
  void init(std::span<const std::byte> bytes) {
    check(bytes.size());
    auto* block = static_cast<std::byte*>(::operator new(std::max<std::size_t>(bytes.size(), 1), std::align_val_t{alignment}));
    if (!bytes.empty()) std::memcpy(block, bytes.data(), bytes.size());
    data_ = std::shared_ptr<const std::byte>(block, [](const std::byte* b) { ::operator delete(const_cast<std::byte*>(b), std::align_val_t{alignment}); });
    nbytes_ = bytes.size();
    hash_ = hash_bytes(this->bytes());
  }
  void check(std::size_t nbytes) const {
    if (!is_known(dt_)) throw error("kiln::ir::ndarray: a constant needs a known dtype, not void");
    for (auto d : shape_)
      if (d < 0) throw error("kiln::ir::ndarray: negative dimension " + std::to_string(d));
    if (nbytes != numel() * size_of(dt_))
      throw error("kiln::ir::ndarray: " + std::to_string(nbytes) + " bytes given, but shape and dtype " + std::string(name(dt_)) +
                  " need " + std::to_string(numel() * size_of(dt_)));
  }

  /// Eight bytes at a time, then the tail.
  static std::size_t hash_bytes(std::span<const std::byte> bytes) noexcept {
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
  std::shared_ptr<const std::byte> data_;
  std::size_t nbytes_ = 0;
  std::size_t hash_ = 0;  ///< content_hash()
  const kiln::detail::paged_bytes* mapping_ = nullptr;  ///< the file the bytes lie in (`map`), kept mapped by data_
};

}  // namespace kiln::ir
