// SPDX-License-Identifier: Apache-2.0
/// \file
/// A key/value cache that grows in place: `kv_cache_append(past, x, axis)` is
/// `concat((past, x), axis)` without copying `past` (TVM's `vm.builtin.attention_kv_cache_append`).
///
/// A transformer decoder's step takes the cache of keys (or values) so far, `past`, and returns it
/// one position longer, `present`. Concatenating copies the whole cache every step, a cost that
/// grows with the context. Here `present` is a view of a *capacity buffer* — the cache's shape with
/// room for `capacity` positions along the growing axis — and an append writes the new positions
/// after the old ones and returns a longer view of the same buffer:
///
///     buffer  [batch, heads, capacity, head_dim]        past = buffer[:, :, :L]   (a strided view)
///     kv_cache_append(past, x, 2)  writes x at buffer[:, :, L:L+n], returns buffer[:, :, :L+n]
///
/// The result is what concat would return, and `past` still reads as it did: positions below L are
/// never written. Writing in place is safe when nothing else can see positions L and up. The
/// buffer tracks its *frontier* (the end of what any view may read) and the newest view, the
/// *head*: an append from a view ending at the frontier writes in place; so does one ending where
/// the head began once the head is gone (re-running a step from the same past, as a benchmark or a
/// retry does). Each view holds its own `storage` borrowing the buffer's bytes, so the buffer
/// learns when the last handle of a view (slices and reshapes of it included) goes. Any other
/// append — from a tensor that is not such a view, from an older view while a newer one lives (two
/// continuations of one past, as beam search makes), or past the capacity — copies into a new
/// buffer: the result is right in every case, and fast in the decoding loop.
///
/// A new buffer has room for `capacity` positions when the caller knows the maximum (the compiler
/// passes the upper bound of the axis from `tir_var_upper_bound`), else for twice what it holds
/// (at least 64), so a cache that outgrows it is copied O(log n) times. `kv_cache_reserve` makes
/// an empty cache with room for a known number of positions up front.
#pragma once

#include <kiln/runtime/tensor.hpp>
#include <kiln/support/error.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace kiln::runtime {

class kv_cache_view_lease;

/// The memory of a growing cache: room for `capacity()` positions along `axis()`, row-major.
class kv_cache_buffer final : public object {
public:
  kv_cache_buffer(dtype t, shape_vector shape, std::size_t axis, allocator& a) : whole_(tensor::empty(std::move(shape), t, a)), axis_(axis) {}
  std::string_view type_name() const noexcept override { return "runtime.KVCacheBuffer"; }

  dtype type() const noexcept { return whole_.type(); }
  /// The shape with the capacity along the growing axis.
  const shape_vector& shape() const noexcept { return whole_.shape(); }
  std::size_t axis() const noexcept { return axis_; }
  std::int64_t capacity() const noexcept { return whole_.shape(axis_); }
  const shape_vector& strides() const noexcept { return whole_.strides(); }
  /// The end, along the axis, of what the views of this buffer may read.
  std::int64_t frontier() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return frontier_;
  }

private:
  friend class kv_cache_view_lease;
  friend tensor kv_cache_append(const tensor& past, const tensor& x, std::int64_t axis, std::int64_t capacity);
  friend tensor kv_cache_reserve(shape_vector shape, std::int64_t axis, std::int64_t capacity, dtype t);
  friend tensor kv_cache_truncate(tensor view, std::int64_t axis, std::int64_t length);

  /// The view of the first `length` positions, as the head (called with the mutex held).
  inline tensor make_head(std::int64_t base, std::int64_t length);
  void released(const kv_cache_view_lease* lease) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (head_ == lease) head_ = nullptr;
  }

  tensor whole_;  ///< every position of the capacity, contiguous: what the views borrow
  std::size_t axis_;
  mutable std::mutex mutex_;
  std::int64_t frontier_ = 0;
  const kv_cache_view_lease* head_ = nullptr;  ///< the newest view, while a handle of it lives
  std::int64_t head_base_ = -1;                ///< where the newest view's own positions begin
};

/// The keeper of one view's storage: tells the buffer when the view's last handle goes.
class kv_cache_view_lease final : public object {
public:
  explicit kv_cache_view_lease(object_ptr<kv_cache_buffer> b) : buffer_(std::move(b)) {}
  ~kv_cache_view_lease() override { buffer_->released(this); }
  std::string_view type_name() const noexcept override { return "runtime.KVCacheView"; }
  kv_cache_buffer& buffer() const noexcept { return *buffer_; }

private:
  object_ptr<kv_cache_buffer> buffer_;
};

inline tensor kv_cache_buffer::make_head(std::int64_t base, std::int64_t length) {
  auto lease = make_object<kv_cache_view_lease>(object_ptr<kv_cache_buffer>(this));
  head_ = lease.get();
  head_base_ = base;
  frontier_ = length;
  const storage& bytes = *whole_.data_storage();
  auto st = make_object<storage>(object_ptr<const object>(std::move(lease)), const_cast<allocator&>(bytes.owner()), bytes.data(),
                                 bytes.nbytes());
  shape_vector s = whole_.shape();
  s[axis_] = length;
  return tensor::from_storage(std::move(st), 0, whole_.type(), std::move(s), whole_.strides());
}

namespace detail {

/// Copies `src` into `dst` (same dtype and shape): one memcpy per run of the trailing axes that
/// both lay out contiguously, else element by element.
inline void copy_slab(const tensor& dst, const tensor& src) {
  const std::size_t nd = dst.ndim(), item = size_of(dst.type());
  if (dst.numel() == 0) return;
  // The first axis from which both tensors' trailing axes are contiguous.
  auto contiguous_from = [&](const tensor& t) {
    std::size_t k = nd;
    std::int64_t step = 1;
    while (k > 0 && (t.shape()[k - 1] == 1 || t.strides()[k - 1] == step)) step *= t.shape()[--k];
    return k;
  };
  const std::size_t k = std::max(contiguous_from(dst), contiguous_from(src));
  if (k == nd) {
    dst.copy_from(src);
    return;
  }
  std::int64_t run = 1;
  for (std::size_t d = k; d < nd; ++d) run *= dst.shape()[d];
  const std::span<const std::int64_t> outer(dst.shape().data(), k);
  std::vector<std::int64_t> to;
  for_each_offset(outer, std::span<const std::int64_t>(dst.strides().data(), k), [&](std::int64_t off) { to.push_back(off); });
  auto* d = static_cast<std::byte*>(dst.data());
  const auto* s = static_cast<const std::byte*>(src.data());
  std::size_t i = 0;
  for_each_offset(outer, std::span<const std::int64_t>(src.strides().data(), k), [&](std::int64_t off) {
    std::memcpy(d + to[i++] * std::int64_t(item), s + off * std::int64_t(item), std::size_t(run) * item);
  });
}

}  // namespace detail

/// `concat((past, x), axis)`, appending in place into `past`'s capacity buffer when it can (see
/// above); `capacity`: the room a new buffer gets along the axis (0: grow geometrically).
inline tensor kv_cache_append(const tensor& past, const tensor& x, std::int64_t axis, std::int64_t capacity = 0) {
  constexpr std::string_view what = "kiln::runtime::kv_cache_append";
  if (!past.defined() || !x.defined()) throw usage_error(std::string(what) + ": a null tensor");
  if (past.type() != x.type())
    throw usage_error(std::string(what) + ": the cache is " + describe(past) + " but the new positions are " + describe(x));
  const auto nd = std::int64_t(past.ndim());
  if (std::int64_t(x.ndim()) != nd)
    throw usage_error(std::string(what) + ": the cache " + describe(past) + " and the new positions " + describe(x) +
                      " differ in rank");
  if (axis < -nd || axis >= nd)
    throw usage_error(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(nd));
  const auto ax = std::size_t(axis < 0 ? axis + nd : axis);
  for (std::size_t d = 0; d < past.ndim(); ++d)
    if (d != ax && past.shape()[d] != x.shape()[d])
      throw usage_error(std::string(what) + ": the cache " + describe(past) + " and the new positions " + describe(x) +
                        " differ in dimension " + std::to_string(d) + " (only axis " + std::to_string(ax) + " may)");
  if (capacity < 0) throw usage_error(std::string(what) + ": capacity " + std::to_string(capacity) + " is negative");
  const std::int64_t length = past.shape()[ax], added = x.shape()[ax];
  std::int64_t total;
  if (__builtin_add_overflow(length, added, &total)) throw usage_error(std::string(what) + ": the cache's length overflows");

  // In place: `past` is a view from the start of a buffer of its dtype and layout with room, and
  // nothing beyond its end can be seen.
  if (auto* lease = dynamic_cast<const kv_cache_view_lease*>(past.data_storage()->keeper())) {
    kv_cache_buffer& b = lease->buffer();
    bool fits = b.type() == past.type() && b.axis() == ax && past.byte_offset() == 0 && b.shape().size() == past.ndim() &&
                total <= b.capacity();
    for (std::size_t d = 0; fits && d < past.ndim(); ++d)
      fits = (d == ax || b.shape()[d] == past.shape()[d]) && (past.shape()[d] == 1 || b.strides()[d] == past.strides()[d]);
    if (fits) {
      std::unique_lock<std::mutex> lock(b.mutex_);
      if (b.frontier_ == length || (b.head_ == nullptr && b.head_base_ == length)) {
        tensor out = b.make_head(length, total);
        lock.unlock();  // the positions from `length` on are this view's alone
        detail::copy_slab(out.slice(ax, length, total), x);
        return out;
      }
    }
  }

  // A new buffer with `past` and `x` copied into it.
  std::int64_t room = capacity > 0 ? std::max(capacity, total) : std::max<std::int64_t>(64, total > (std::int64_t(1) << 61) ? total : 2 * total);
  shape_vector shape = past.shape();
  shape[ax] = room;
  auto buffer = make_object<kv_cache_buffer>(past.type(), std::move(shape), ax, default_allocator());
  tensor out;
  {
    std::lock_guard<std::mutex> lock(buffer->mutex_);
    out = buffer->make_head(length, total);
  }
  detail::copy_slab(out.slice(ax, 0, length), past);
  detail::copy_slab(out.slice(ax, length, total), x);
  return out;
}

/// An empty cache — `shape` with 0 along `axis` — in a buffer with room for `capacity`
/// positions, which `kv_cache_append` fills without copying.
inline tensor kv_cache_reserve(shape_vector shape, std::int64_t axis, std::int64_t capacity, dtype t) {
  constexpr std::string_view what = "kiln::runtime::kv_cache_reserve";
  const auto nd = std::int64_t(shape.size());
  if (axis < -nd || axis >= nd)
    throw usage_error(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(nd));
  if (capacity < 0) throw usage_error(std::string(what) + ": capacity " + std::to_string(capacity) + " is negative");
  if (!is_known(t)) throw usage_error(std::string(what) + ": dtype 'void' has no elements");
  const auto ax = std::size_t(axis < 0 ? axis + nd : axis);
  shape[ax] = capacity;
  auto buffer = make_object<kv_cache_buffer>(t, std::move(shape), ax, default_allocator());
  std::lock_guard<std::mutex> lock(buffer->mutex_);
  return buffer->make_head(0, 0);
}

/// `view`'s first `length` positions along `axis` (at most its length), to append to next. When
/// `view` is the newest view of a capacity buffer and the handle passed is the only one of that
/// buffer (no other view of it lives), the buffer is rewound: the next append writes at `length`,
/// in place. Otherwise it is a slice, and the positions past `length` stay as the other views see
/// them (the next append copies).
inline tensor kv_cache_truncate(tensor view, std::int64_t axis, std::int64_t length) {
  constexpr std::string_view what = "kiln::runtime::kv_cache_truncate";
  if (!view.defined()) throw usage_error(std::string(what) + ": a null tensor");
  const auto nd = std::int64_t(view.ndim());
  if (axis < -nd || axis >= nd)
    throw usage_error(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(nd));
  const auto ax = std::size_t(axis < 0 ? axis + nd : axis);
  if (length < 0 || length > view.shape()[ax])
    throw usage_error(std::string(what) + ": length " + std::to_string(length) + " is outside [0, " + std::to_string(view.shape()[ax]) +
                      "] (the positions of " + describe(view) + " along axis " + std::to_string(ax) + ")");
  if (auto* lease = dynamic_cast<const kv_cache_view_lease*>(view.data_storage()->keeper())) {
    kv_cache_buffer& b = lease->buffer();
    // One handle of one view of the buffer: nothing else can see the positions being dropped.
    if (view.handle()->use_count() == 1 && view.data_storage()->use_count() == 1 && b.use_count() == 1 && view.byte_offset() == 0 &&
        b.axis() == ax) {
      std::lock_guard<std::mutex> lock(b.mutex_);
      if (b.head_ == lease) return b.make_head(length, length);
    }
  }
  return view.slice(ax, 0, length);
}

/// A key or value cache as state a VM program keeps between calls (TVM's `AttentionKVCache`, which
/// `vm.builtin.attention_kv_cache_create`, `_append` and `_view` work on): an object holding the
/// positions appended so far along `axis` in a capacity buffer (`kv_cache_append`). A program
/// takes the cache as an argument, appends the step's new positions (which changes the object:
/// the caller's handle sees them) and reads the whole cache as a view, with no copy. TVM's caches
/// grow along axis 0; kiln's take any axis, so that a cache of [heads, positions, head size]
/// reads as the attention kernel wants it.
class attention_kv_cache final : public object {
public:
  /// A cache of `init`'s first `fill_count` positions along `axis` (all of them when
  /// `fill_count` is -1), with room for `reserve[axis]` positions; `reserve` has `init`'s rank and
  /// its other dimensions.
  attention_kv_cache(const tensor& init, const shape_vector& reserve, std::int64_t fill_count, std::int64_t axis) {
    constexpr std::string_view what = "kiln::runtime::attention_kv_cache";
    if (!init.defined()) throw usage_error(std::string(what) + ": the initial data is a null tensor");
    const auto nd = std::int64_t(init.ndim());
    if (axis < -nd || axis >= nd)
      throw usage_error(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(nd));
    axis_ = axis < 0 ? axis + nd : axis;
    const auto ax = std::size_t(axis_);
    if (reserve.size() != init.ndim())
      throw usage_error(std::string(what) + ": the reserved shape " + shape_to_string(reserve) + " and the initial data " + describe(init) +
                        " differ in rank");
    for (std::size_t d = 0; d < init.ndim(); ++d)
      if (d != ax && reserve[d] != init.shape()[d])
        throw usage_error(std::string(what) + ": the reserved shape " + shape_to_string(reserve) + " and the initial data " + describe(init) +
                          " differ in dimension " + std::to_string(d) + " (only axis " + std::to_string(ax) + " may)");
    const std::int64_t have = init.shape()[ax];
    if (fill_count < -1 || fill_count > have)
      throw usage_error(std::string(what) + ": fill count " + std::to_string(fill_count) + " is outside [-1, " + std::to_string(have) +
                        "] (-1: all of the initial data's " + std::to_string(have) + " positions)");
    capacity_ = std::max(reserve[ax], have);
    shape_vector empty = init.shape();
    empty[ax] = 0;
    view_ = kv_cache_reserve(std::move(empty), axis_, capacity_, init.type());
    const std::int64_t n = fill_count < 0 ? have : fill_count;
    if (n > 0) view_ = kv_cache_append(view_, init.slice(ax, 0, n), axis_, capacity_);
  }

  std::string_view type_name() const noexcept override { return "vm.AttentionKVCache"; }

  /// Appends `x`'s positions (the cache's dtype and, but along the axis, its shape). Past the
  /// room, the cache moves to a buffer twice its new length.
  void append(const tensor& x) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!x.defined() || x.ndim() != view_.ndim()) {
      throw usage_error("kiln::runtime::attention_kv_cache: appending " + (x.defined() ? describe(x) : std::string("a null tensor")) +
                        " to a cache of " + describe(view_));
    }
    const std::int64_t total = view_.shape()[std::size_t(axis_)] + x.shape()[std::size_t(axis_)];
    if (total > capacity_) capacity_ = 2 * total;
    view_ = kv_cache_append(view_, x, axis_, capacity_);
  }
  /// The positions so far, a view of the buffer; `shape` must be the cache's shape (TVM's check
  /// that the caller's idea of the length is the cache's).
  tensor view(std::span<const std::int64_t> shape) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!std::equal(shape.begin(), shape.end(), view_.shape().begin(), view_.shape().end()))
      throw usage_error("kiln::runtime::attention_kv_cache: a view of shape " + shape_to_string(shape) + " asked of a cache of " +
                        describe(view_) + " (" + std::to_string(view_.shape()[std::size_t(axis_)]) + " positions along axis " +
                        std::to_string(axis_) + ")");
    return view_;
  }
  /// The positions so far.
  tensor data() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return view_;
  }
  /// Drops the last `n` positions (TVM's `PopN`): the next append writes where they were, in
  /// place unless a view of them is still held elsewhere (`kv_cache_truncate`).
  void pop_n(std::int64_t n) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::int64_t length = view_.shape()[std::size_t(axis_)];
    if (n < 0 || n > length)
      throw usage_error("kiln::runtime::attention_kv_cache: cannot pop " + std::to_string(n) + " positions of a cache of " + describe(view_) +
                        " (" + std::to_string(length) + " positions along axis " + std::to_string(axis_) + ")");
    view_ = kv_cache_truncate(std::move(view_), axis_, length - n);
  }
  /// Drops every position; the room stays.
  void clear() const {
    std::lock_guard<std::mutex> lock(mutex_);
    view_ = kv_cache_truncate(std::move(view_), axis_, 0);
  }
  /// The number of positions so far.
  std::int64_t length() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return view_.shape()[std::size_t(axis_)];
  }
  std::int64_t axis() const noexcept { return axis_; }

private:
  mutable std::mutex mutex_;
  mutable tensor view_;
  mutable std::int64_t capacity_ = 0;
  std::int64_t axis_ = 0;
};

}  // namespace kiln::runtime
