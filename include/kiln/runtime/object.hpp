// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::runtime::object`: the base of every reference-counted run-time object (tensors, storage,
/// strings, shapes, tuples, closures, and users' own opaque objects carried by VM registers).
///
/// The count lives in the object (intrusive), so a VM register holds one pointer and copying a
/// register costs one atomic increment. Unlike IR nodes (`kiln::ref`), run-time objects may have
/// mutable contents (a tensor's elements), so handles point to non-const objects.
#pragma once

#include <boost/smart_ptr/intrusive_ptr.hpp>

#include <atomic>
#include <cstdint>
#include <string_view>
#include <utility>

namespace kiln::runtime {

class object {
public:
  object() = default;
  object(const object&) = delete;
  object& operator=(const object&) = delete;
  virtual ~object() = default;

  /// A short name of the dynamic type, used in error messages ("runtime.Tensor", "my.Cache").
  virtual std::string_view type_name() const noexcept = 0;

  /// Number of handles to this object.
  std::uint32_t use_count() const noexcept { return refs_.load(std::memory_order_relaxed); }

  void add_ref() const noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  /// Drops one handle and deletes the object when it was the last.
  void release() const noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

private:
  mutable std::atomic<std::uint32_t> refs_{0};
};

inline void intrusive_ptr_add_ref(const object* p) noexcept { p->add_ref(); }
inline void intrusive_ptr_release(const object* p) noexcept { p->release(); }

/// A shared handle to a run-time object.
template <class T>
using object_ptr = boost::intrusive_ptr<T>;

/// Creates a `T` and returns the first handle to it.
template <class T, class... Args>
object_ptr<T> make_object(Args&&... args) {
  return object_ptr<T>(new T(std::forward<Args>(args)...));
}

}  // namespace kiln::runtime
