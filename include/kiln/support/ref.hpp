// SPDX-License-Identifier: Apache-2.0
/// \file
/// Shared, immutable, reference-counted objects and LLVM-style casts on them.
///
/// IR nodes are created once and never modified; they are shared through `ref<T>`, an intrusive
/// pointer to `const T` (Boost's `intrusive_ptr`, with an atomic count in the object). Identity is
/// therefore meaningful: a pass that changes nothing hands back the very same pointer, and
/// "did this pass change the module?" is a pointer comparison.
#pragma once

#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <boost/smart_ptr/intrusive_ref_counter.hpp>

#include <concepts>
#include <utility>

namespace kiln {

/// A shared handle to an immutable object of type `T`.
template <class T>
using ref = boost::intrusive_ptr<const T>;

/// Creates a `T` and returns the first handle to it.
template <class T, class... Args>
ref<T> make_ref(Args&&... args) {
  return ref<T>(new T(std::forward<Args>(args)...));
}

/// Something with a run-time kind that `classof` can test, as in LLVM's RTTI.
template <class To, class From>
concept castable = requires(const From& f) {
  { To::classof(f) } -> std::same_as<bool>;
};

/// True when `p` is non-null and its dynamic kind is `To` (or derived from it).
template <class To, class From>
  requires castable<To, From>
bool isa(const From* p) noexcept {
  return p != nullptr && To::classof(*p);
}
template <class To, class From>
  requires castable<To, From>
bool isa(const ref<From>& p) noexcept {
  return isa<To>(p.get());
}

/// The object as a `const To*` when it is one, otherwise nullptr.
template <class To, class From>
  requires castable<To, From>
const To* dyn_cast(const From* p) noexcept {
  return isa<To>(p) ? static_cast<const To*>(p) : nullptr;
}
template <class To, class From>
  requires castable<To, From>
const To* dyn_cast(const ref<From>& p) noexcept {
  return dyn_cast<To>(p.get());
}

/// The object as a `ref<To>` when it is one, otherwise an empty handle.
template <class To, class From>
  requires castable<To, From>
ref<To> ref_cast(const ref<From>& p) noexcept {
  return isa<To>(p) ? ref<To>(static_cast<const To*>(p.get())) : ref<To>();
}

}  // namespace kiln
