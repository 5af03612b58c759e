// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::runtime::tensor`: an n-dimensional array on a device, the value VM registers and
/// kernels pass around.
///
/// A tensor is a handle to an immutable descriptor — dtype, shape, strides (in elements, as in
/// DLPack), byte offset and the `storage` it views. Views (`view`, `permute`, `slice`) make new
/// descriptors over the same storage, so writing through one is seen through the others; `clone`
/// makes an independent contiguous copy. Shapes and strides are checked when a tensor is made,
/// so every element of a tensor lies inside its storage.
#pragma once

#include <kiln/runtime/allocator.hpp>
#include <kiln/support/dtype.hpp>
#include <kiln/support/error.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::runtime {

using shape_vector = std::vector<std::int64_t>;

namespace detail {
__extension__ typedef __int128 wide_int;  // bounds arithmetic that cannot overflow (GCC and Clang)
}

/// The dtype whose elements are stored as `T` (bool, int8, int32, int64, uint8, float, double).
template <class T>
inline constexpr dtype dtype_of = [] {
  static_assert(std::is_same_v<T, bool> || std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::int32_t> ||
                    std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint8_t> ||
                    std::is_same_v<T, float> || std::is_same_v<T, double>,
                "kiln::runtime::dtype_of<T>: T must be bool, int8_t, int32_t, int64_t, uint8_t, float or double "
                "(float16 elements are reached through tensor::data())");
  if constexpr (std::is_same_v<T, bool>) return dtype::bool_;
  else if constexpr (std::is_same_v<T, std::int8_t>) return dtype::int8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::int32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return dtype::int64;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return dtype::uint8;
  else if constexpr (std::is_same_v<T, float>) return dtype::float32;
  else return dtype::float64;
}();

/// "[2, 3]".
inline std::string shape_to_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s.append(i ? ", " : "").append(std::to_string(shape[i]));
  return s + "]";
}

/// Number of elements of `shape`; throws when a dimension is negative or the count overflows.
inline std::int64_t checked_numel(std::span<const std::int64_t> shape, std::string_view what) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw usage_error(std::string(what) + ": shape " + shape_to_string(shape) + " has a negative dimension");
    if (__builtin_mul_overflow(n, d, &n))
      throw usage_error(std::string(what) + ": shape " + shape_to_string(shape) + " has more than 2^63 elements");
  }
  return n;
}

/// Row-major (C order) strides of `shape`, in elements (a dimension of 0 counts as 1, so a tensor
/// with no elements still has the strides its shape implies). A `usage_error` when they do not fit
/// in int64: possible with no elements, as (0, 2^32, 2^32), where the element count is 0 but the
/// outer stride would be 2^64 — a shape from an untrusted file must fail here, not overflow.
inline shape_vector contiguous_strides(std::span<const std::int64_t> shape,
                                       std::string_view what = "kiln::runtime::contiguous_strides") {
  shape_vector s(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    if (i > 0 && __builtin_mul_overflow(step, std::max<std::int64_t>(shape[i], 1), &step))
      throw usage_error(std::string(what) + ": shape " + shape_to_string(shape) +
                        " is too large: its row-major strides do not fit in int64");
  }
  return s;
}

/// Calls `f(offset)` with the element offset of every index of `shape`, in row-major order.
template <class F>
void for_each_offset(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, F&& f) {
  const std::size_t nd = shape.size();
  for (std::int64_t d : shape)
    if (d == 0) return;
  std::vector<std::int64_t> index(nd, 0);
  std::int64_t offset = 0;
  for (;;) {
    f(offset);
    std::size_t axis = nd;
    while (axis > 0) {
      --axis;
      if (++index[axis] < shape[axis]) {
        offset += strides[axis];
        break;
      }
      offset -= strides[axis] * (shape[axis] - 1);
      index[axis] = 0;
      if (axis == 0) return;
    }
    if (nd == 0) return;
  }
}

class tensor_node final : public object {
public:
  std::string_view type_name() const noexcept override { return "runtime.Tensor"; }

  object_ptr<const storage> data;
  std::size_t byte_offset = 0;
  dtype type = dtype::float32;
  shape_vector shape;
  shape_vector strides;  ///< in elements
};

class tensor {
public:
  tensor() = default;
  explicit tensor(object_ptr<const tensor_node> n) noexcept : n_(std::move(n)) {}

  // ---- making tensors -------------------------------------------------------------------------
  /// An uninitialised contiguous tensor.
  static tensor empty(shape_vector shape, dtype t, allocator& a = default_allocator()) {
    if (!is_known(t)) throw usage_error("kiln::runtime::tensor::empty: dtype 'void' has no elements");
    const std::int64_t n = checked_numel(shape, "kiln::runtime::tensor::empty");
    std::size_t bytes;
    if (__builtin_mul_overflow(std::size_t(n), size_of(t), &bytes))
      throw usage_error("kiln::runtime::tensor::empty: " + shape_to_string(shape) + " elements do not fit in memory");
    auto strides = contiguous_strides(shape, "kiln::runtime::tensor::empty");  // before allocating
    auto st = make_storage(bytes, a);
    return make(std::move(st), 0, t, std::move(shape), std::move(strides));
  }
  /// A contiguous tensor filled with zero bytes.
  static tensor zeros(shape_vector shape, dtype t, allocator& a = default_allocator()) {
    tensor r = empty(std::move(shape), t, a);
    std::memset(r.data(), 0, r.nbytes());
    return r;
  }
  /// A contiguous tensor with the given elements in row-major order.
  template <class T>
  static tensor from_values(shape_vector shape, std::span<const T> values, allocator& a = default_allocator()) {
    tensor r = empty(std::move(shape), dtype_of<T>, a);
    if (std::size_t(r.numel()) != values.size())
      throw usage_error("kiln::runtime::tensor::from_values: shape " + shape_to_string(r.shape()) + " has " +
                        std::to_string(r.numel()) + " elements but " + std::to_string(values.size()) + " were given");
    if (!values.empty()) std::memcpy(r.data(), values.data(), values.size() * sizeof(T));
    return r;
  }
  template <class T>
  static tensor from_values(shape_vector shape, std::initializer_list<T> values, allocator& a = default_allocator()) {
    return from_values<T>(std::move(shape), std::span<const T>(values.begin(), values.size()), a);
  }
  /// A tensor over existing storage; checks that every element lies inside it.
  static tensor from_storage(object_ptr<const storage> st, std::size_t byte_offset, dtype t, shape_vector shape,
                             shape_vector strides = {}) {
    constexpr std::string_view what = "kiln::runtime::tensor::from_storage";
    if (!st) throw usage_error(std::string(what) + ": storage is null");
    if (!is_known(t)) throw usage_error(std::string(what) + ": dtype 'void' has no elements");
    if (strides.empty()) strides = contiguous_strides(shape, what);
    if (strides.size() != shape.size())
      throw usage_error(std::string(what) + ": " + std::to_string(strides.size()) + " strides for " +
                        std::to_string(shape.size()) + " dimensions");
    const std::int64_t n = checked_numel(shape, what);
    if (n > 0) {
      // Lowest and highest element offsets reachable, which must lie inside the storage.
      using detail::wide_int;
      wide_int lo = 0, hi = 0;
      for (std::size_t i = 0; i < shape.size(); ++i) {
        const wide_int reach = wide_int(strides[i]) * (shape[i] - 1);
        (reach < 0 ? lo : hi) += reach;
      }
      const wide_int item = wide_int(size_of(t));
      const wide_int first = wide_int(byte_offset) + lo * item, end = wide_int(byte_offset) + (hi + 1) * item;
      if (first < 0 || end > wide_int(st->nbytes()))
        throw usage_error(std::string(what) + ": a " + std::string(name(t)) + " tensor of shape " +
                          shape_to_string(shape) + " at byte offset " + std::to_string(byte_offset) +
                          " does not fit in a storage of " + std::to_string(st->nbytes()) + " bytes");
    }
    return make(std::move(st), byte_offset, t, std::move(shape), std::move(strides));
  }

  // ---- descriptor -----------------------------------------------------------------------------
  bool defined() const noexcept { return n_ != nullptr; }
  explicit operator bool() const noexcept { return defined(); }
  dtype type() const noexcept { return n_->type; }
  const shape_vector& shape() const noexcept { return n_->shape; }
  const shape_vector& strides() const noexcept { return n_->strides; }
  std::int64_t shape(std::size_t axis) const noexcept { return n_->shape[axis]; }
  std::size_t ndim() const noexcept { return n_->shape.size(); }
  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (auto d : n_->shape) n *= d;
    return n;
  }
  /// Bytes of the elements (numel x element size), whatever the layout.
  std::size_t nbytes() const noexcept { return std::size_t(numel()) * size_of(type()); }
  std::size_t byte_offset() const noexcept { return n_->byte_offset; }
  device dev() const noexcept { return n_->data->dev(); }
  const object_ptr<const storage>& data_storage() const noexcept { return n_->data; }
  const tensor_node* node() const noexcept { return n_.get(); }
  const object_ptr<const tensor_node>& handle() const noexcept { return n_; }

  /// Whether the elements are laid out row-major without gaps (an empty tensor always is).
  bool is_contiguous() const noexcept {
    if (numel() == 0) return true;
    std::int64_t step = 1;
    for (std::size_t i = ndim(); i-- > 0;) {
      if (n_->shape[i] != 1 && n_->strides[i] != step) return false;
      step *= n_->shape[i];
    }
    return true;
  }

  // ---- elements -------------------------------------------------------------------------------
  /// Address of the element at index (0, ..., 0).
  void* data() const noexcept { return n_->data->data() + n_->byte_offset; }
  template <class T>
  T* data() const {
    check_dtype<T>("data");
    return static_cast<T*>(data());
  }
  /// The element at `index` (one entry per dimension).
  template <class T>
  T& at(std::initializer_list<std::int64_t> index) const {
    check_dtype<T>("at");
    if (index.size() != ndim())
      throw usage_error("kiln::runtime::tensor::at: " + std::to_string(index.size()) + " indices for a " +
                        std::to_string(ndim()) + "-d tensor");
    std::int64_t off = 0;
    std::size_t axis = 0;
    for (std::int64_t i : index) {
      if (i < 0 || i >= n_->shape[axis])
        throw usage_error("kiln::runtime::tensor::at: index " + std::to_string(i) + " is out of range for axis " +
                          std::to_string(axis) + " of size " + std::to_string(n_->shape[axis]));
      off += i * n_->strides[axis++];
    }
    return static_cast<T*>(data())[off];
  }
  /// The elements in row-major order, whatever the layout.
  template <class T>
  std::vector<T> to_vector() const {
    check_dtype<T>("to_vector");
    std::vector<T> out;
    out.reserve(std::size_t(numel()));
    const T* base = static_cast<const T*>(data());
    for_each_offset(shape(), strides(), [&](std::int64_t off) { out.push_back(base[off]); });
    return out;
  }

  // ---- views and copies -----------------------------------------------------------------------
  /// The same elements with another shape (one dimension may be -1). Needs a contiguous tensor.
  tensor view(shape_vector new_shape) const {
    constexpr std::string_view what = "kiln::runtime::tensor::view";
    if (!is_contiguous())
      throw usage_error(std::string(what) + ": a tensor with strides " + shape_to_string(strides()) +
                        " is not contiguous; clone() it first");
    std::int64_t known = 1;
    int infer = -1;
    for (std::size_t i = 0; i < new_shape.size(); ++i) {
      if (new_shape[i] == -1 && infer < 0) infer = int(i);
      else if (new_shape[i] < 0) throw usage_error(std::string(what) + ": bad shape " + shape_to_string(new_shape));
      else if (__builtin_mul_overflow(known, new_shape[i], &known))
        throw usage_error(std::string(what) + ": shape " + shape_to_string(new_shape) + " has more than 2^63 elements");
    }
    if (infer >= 0 && known != 0 && numel() % known == 0) new_shape[std::size_t(infer)] = numel() / known;
    if (infer >= 0 && new_shape[std::size_t(infer)] < 0)
      throw usage_error(std::string(what) + ": cannot infer -1 in " + shape_to_string(new_shape) + " for " +
                        std::to_string(numel()) + " elements");
    if (checked_numel(new_shape, what) != numel())
      throw usage_error(std::string(what) + ": shape " + shape_to_string(new_shape) + " has " +
                        std::to_string(checked_numel(new_shape, what)) + " elements, the tensor " +
                        shape_to_string(shape()) + " has " + std::to_string(numel()));
    auto strides = contiguous_strides(new_shape, what);
    return make(n_->data, n_->byte_offset, type(), std::move(new_shape), std::move(strides));
  }
  /// The axes reordered: axis i of the result is axis `perm[i]` of this tensor.
  tensor permute(std::span<const std::int64_t> perm) const {
    bool ok = perm.size() == ndim();
    std::vector<bool> seen(ndim(), false);
    for (std::size_t i = 0; ok && i < perm.size(); ++i) {
      ok = perm[i] >= 0 && std::size_t(perm[i]) < ndim() && !seen[std::size_t(perm[i])];
      if (ok) seen[std::size_t(perm[i])] = true;
    }
    if (!ok)
      throw usage_error("kiln::runtime::tensor::permute: " + shape_to_string(perm) + " is not a permutation of the " +
                        std::to_string(ndim()) + " axes");
    shape_vector s(ndim()), st(ndim());
    for (std::size_t i = 0; i < perm.size(); ++i) {
      s[i] = shape()[std::size_t(perm[i])];
      st[i] = strides()[std::size_t(perm[i])];
    }
    return make(n_->data, n_->byte_offset, type(), std::move(s), std::move(st));
  }
  tensor permute(std::initializer_list<std::int64_t> perm) const {
    return permute(std::span<const std::int64_t>(perm.begin(), perm.size()));
  }
  /// Elements begin, begin+step, ... (< end) of `axis`; `step` > 0.
  tensor slice(std::size_t axis, std::int64_t begin, std::int64_t end, std::int64_t step = 1) const {
    if (axis >= ndim() || step <= 0 || begin < 0 || begin > end || end > shape(axis))
      throw usage_error("kiln::runtime::tensor::slice: [" + std::to_string(begin) + ":" + std::to_string(end) + ":" +
                        std::to_string(step) + "] on axis " + std::to_string(axis) + " of shape " +
                        shape_to_string(shape()) + " is out of range");
    shape_vector s = shape(), st = strides();
    s[axis] = (end - begin + step - 1) / step;
    st[axis] *= step;
    const std::size_t off = n_->byte_offset + std::size_t(begin * strides()[axis]) * size_of(type());
    return make(n_->data, off, type(), std::move(s), std::move(st));
  }
  /// An independent contiguous copy.
  tensor clone(allocator& a = default_allocator()) const {
    tensor r = empty(shape(), type(), a);
    r.copy_from(*this);
    return r;
  }
  /// This tensor when contiguous, otherwise a contiguous copy.
  tensor contiguous() const { return is_contiguous() ? *this : clone(); }
  /// Copies `src`'s elements into this tensor (same dtype and shape; any layouts).
  void copy_from(const tensor& src) const {
    if (src.type() != type() || src.shape() != shape())
      throw usage_error("kiln::runtime::tensor::copy_from: cannot copy a " + describe(src) + " into a " + describe(*this));
    const std::size_t item = size_of(type());
    if (is_contiguous() && src.is_contiguous()) {
      if (nbytes()) std::memmove(data(), src.data(), nbytes());
      return;
    }
    std::vector<std::int64_t> dst_offsets;
    dst_offsets.reserve(std::size_t(numel()));
    for_each_offset(shape(), strides(), [&](std::int64_t off) { dst_offsets.push_back(off); });
    const auto* from = static_cast<const std::byte*>(src.data());
    auto* to = static_cast<std::byte*>(data());
    std::size_t k = 0;
    for_each_offset(src.shape(), src.strides(), [&](std::int64_t off) {
      std::memcpy(to + dst_offsets[k++] * std::int64_t(item), from + off * std::int64_t(item), item);
    });
  }

  /// "float32[2, 3]".
  friend std::string describe(const tensor& t) {
    if (!t.defined()) return "null tensor";
    return std::string(name(t.type())) + shape_to_string(t.shape());
  }
  /// Same dtype, same shape and the same element bytes (layouts may differ).
  friend bool equal(const tensor& a, const tensor& b) {
    if (a.type() != b.type() || a.shape() != b.shape()) return false;
    tensor ca = a.contiguous(), cb = b.contiguous();
    return a.nbytes() == 0 || std::memcmp(ca.data(), cb.data(), a.nbytes()) == 0;
  }

private:
  static tensor make(object_ptr<const storage> st, std::size_t off, dtype t, shape_vector shape, shape_vector strides) {
    auto n = make_object<tensor_node>();
    n->data = std::move(st);
    n->byte_offset = off;
    n->type = t;
    n->shape = std::move(shape);
    n->strides = std::move(strides);
    return tensor(std::move(n));
  }
  template <class T>
  void check_dtype(std::string_view fn) const {
    if (dtype_of<T> != type())
      throw usage_error("kiln::runtime::tensor::" + std::string(fn) + ": asked for " + std::string(name(dtype_of<T>)) +
                        " elements of a " + describe(*this) + " tensor");
  }

  object_ptr<const tensor_node> n_;
};

}  // namespace kiln::runtime
