// SPDX-License-Identifier: Apache-2.0
/// \file
/// Memory for tensors: allocators and the reference-counted `storage` blocks they hand out.
///
/// As in the design, every device of a VM gets an allocator, either *naive* (every request goes to
/// the system) or *pooled* (the default): a freed block goes to a free list for its size class
/// and the next request of that class takes it back, so a model that runs many times allocates
/// from the system only on its first run. Blocks are 64-byte aligned (a cache line, and the
/// widest SIMD register). A `storage` keeps its allocator alive and returns its block on release,
/// so tensors may outlive the VM that made them.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/runtime/device.hpp>
#include <kiln/runtime/object.hpp>
#include <kiln/support/error.hpp>

#include <bit>
#include <cstddef>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::runtime {

/// An allocation the system cannot serve; the message names the size.
class out_of_memory : public error {
public:
  using error::error;
};

/// Alignment of every block kiln allocates.
inline constexpr std::size_t storage_alignment = 64;

enum class allocator_kind : std::uint8_t { naive, pooled };

/// Counters an allocator keeps; all sizes in bytes.
struct allocator_stats {
  std::size_t live_bytes = 0;           ///< handed out and not yet freed (rounded to the size class)
  std::size_t peak_live_bytes = 0;      ///< the largest `live_bytes` seen
  std::size_t cached_bytes = 0;         ///< held in free lists (pooled only)
  std::size_t allocations = 0;          ///< requests served
  std::size_t reused = 0;               ///< requests served from a free list (pooled only)
  std::size_t system_allocations = 0;   ///< requests that went to the system
};

class allocator : public object {
public:
  virtual allocator_kind kind() const noexcept = 0;
  /// A block of at least `nbytes` bytes, 64-byte aligned (never null; zero bytes gives a block too).
  virtual void* allocate(std::size_t nbytes) = 0;
  /// Gives back a block `allocate(nbytes)` returned.
  virtual void free(void* block, std::size_t nbytes) noexcept = 0;
  virtual allocator_stats stats() const = 0;
  device dev() const noexcept { return dev_; }

protected:
  explicit allocator(device d) : dev_(d) {}
  /// A block from the system; a request it cannot serve is an `out_of_memory` naming the size.
  static void* system_allocate(std::size_t nbytes) {
    try {
      return ::operator new(nbytes, std::align_val_t{storage_alignment});
    } catch (const std::bad_alloc&) {
      throw_out_of_memory(nbytes);
    }
  }
  /// Requests above this are refused before any rounding (which would overflow near 2^64).
  static constexpr std::size_t max_request = std::size_t(1) << 60;
  static void check_request(std::size_t nbytes) {
    if (nbytes > max_request) [[unlikely]]
      throw_out_of_memory(nbytes);
  }
  [[noreturn]] __attribute__((noinline, cold)) static void throw_out_of_memory(std::size_t nbytes) {
    throw out_of_memory("kiln::runtime: cannot allocate " + std::to_string(nbytes) + " bytes (" + human_bytes(nbytes) +
                        "): more than this machine can give");
  }
  static std::string human_bytes(std::size_t n) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = double(n);
    std::size_t u = 0;
    while (v >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
  }
  static void system_free(void* p) noexcept { ::operator delete(p, std::align_val_t{storage_alignment}); }

private:
  device dev_;
};

/// Every request goes to the system.
class naive_allocator final : public allocator {
public:
  explicit naive_allocator(device d = cpu()) : allocator(d) {}
  std::string_view type_name() const noexcept override { return "runtime.NaiveAllocator"; }
  allocator_kind kind() const noexcept override { return allocator_kind::naive; }
  void* allocate(std::size_t nbytes) override {
    check_request(nbytes);
    void* p = system_allocate(rounded(nbytes));
    std::lock_guard lock(mutex_);
    stats_.live_bytes += rounded(nbytes);
    stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
    ++stats_.allocations;
    ++stats_.system_allocations;
    return p;
  }
  void free(void* block, std::size_t nbytes) noexcept override {
    system_free(block);
    std::lock_guard lock(mutex_);
    stats_.live_bytes -= rounded(nbytes);
  }
  allocator_stats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

private:
  static std::size_t rounded(std::size_t n) noexcept { return n == 0 ? storage_alignment : (n + 63) / 64 * 64; }
  mutable std::mutex mutex_;
  allocator_stats stats_;
};

/// Reuses freed blocks by size class. Classes are multiples of 64 bytes up to 1 KiB, then four
/// per power of two (1, 1.25, 1.5, 1.75 x 2^k), so a block wastes at most a quarter of its size.
class pooled_allocator final : public allocator {
public:
  explicit pooled_allocator(device d = cpu()) : allocator(d) {}
  ~pooled_allocator() override { release_cached(); }
  std::string_view type_name() const noexcept override { return "runtime.PooledAllocator"; }
  allocator_kind kind() const noexcept override { return allocator_kind::pooled; }

  /// The size of the block a request of `nbytes` gets.
  static std::size_t size_class(std::size_t nbytes) noexcept {
    if (nbytes <= 1024) return nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64;
    const std::size_t pow = std::bit_floor(nbytes);
    const std::size_t quarter = pow / 4;
    return (nbytes + quarter - 1) / quarter * quarter;
  }

  void* allocate(std::size_t nbytes) override {
    check_request(nbytes);
    const std::size_t size = size_class(nbytes);
    {
      std::lock_guard lock(mutex_);
      ++stats_.allocations;
      auto& list = free_[size];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        stats_.cached_bytes -= size;
        ++stats_.reused;
        note_live(size);
        return p;
      }
    }
    void* p = system_allocate(size);  // outside the lock: may throw std::bad_alloc
    std::lock_guard lock(mutex_);
    ++stats_.system_allocations;
    note_live(size);
    return p;
  }
  void free(void* block, std::size_t nbytes) noexcept override {
    const std::size_t size = size_class(nbytes);
    std::lock_guard lock(mutex_);
    stats_.live_bytes -= size;
    try {
      free_[size].push_back(block);
      stats_.cached_bytes += size;
    } catch (...) {  // no memory for the free list: give the block back instead
      system_free(block);
    }
  }
  allocator_stats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  /// Returns every cached block to the system.
  void release_cached() noexcept {
    std::lock_guard lock(mutex_);
    for (auto& [size, list] : free_)
      for (void* p : list) system_free(p);
    free_.clear();
    stats_.cached_bytes = 0;
  }

private:
  void note_live(std::size_t size) noexcept {
    stats_.live_bytes += size;
    stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
  }
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  allocator_stats stats_;
};

inline object_ptr<allocator> make_allocator(allocator_kind kind, device d = cpu()) {
  if (kind == allocator_kind::naive) return make_object<naive_allocator>(d);
  return make_object<pooled_allocator>(d);
}

/// The allocator tensors use when none is given: one pooled allocator per process for the CPU
/// (defined out of line, `impl/allocator.ipp`, so that code compiled for several instruction sets
/// shares it).
KILN_DECL allocator& default_allocator();

/// A block of device memory, returned to its allocator when the last handle goes.
///
/// A storage may instead *borrow* its bytes from another object, the keeper, which it keeps alive
/// and which owns them: several storages then share one block, and the keeper learns when the
/// last handle of each goes (its destructor runs). `kv_cache.hpp` hands out its capacity buffer so,
/// one storage per appended view.
class storage final : public object {
public:
  storage(allocator& a, std::size_t nbytes) : alloc_(&a), data_(a.allocate(nbytes)), nbytes_(nbytes) {}
  /// `nbytes` bytes at `data`, which belong to `keeper` (on `a`'s device) and outlive it.
  storage(object_ptr<const object> keeper, allocator& a, std::byte* data, std::size_t nbytes)
      : alloc_(&a), data_(data), nbytes_(nbytes), keeper_(std::move(keeper)) {}
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
  ~storage() override {
    if (!keeper_) alloc_->free(data_, nbytes_);
  }
  std::string_view type_name() const noexcept override { return "runtime.Storage"; }

  std::byte* data() const noexcept { return static_cast<std::byte*>(data_); }
  std::size_t nbytes() const noexcept { return nbytes_; }
  device dev() const noexcept { return alloc_->dev(); }
  const allocator& owner() const noexcept { return *alloc_; }
  /// The object the bytes are borrowed from, or null when this storage owns them.
  const object* keeper() const noexcept { return keeper_.get(); }

private:
  object_ptr<allocator> alloc_;
  void* data_;
  std::size_t nbytes_;
  object_ptr<const object> keeper_;
};

inline object_ptr<storage> make_storage(std::size_t nbytes, allocator& a = default_allocator()) {
  return make_object<storage>(a, nbytes);
}

}  // namespace kiln::runtime

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/runtime/impl/allocator.ipp>
#endif
