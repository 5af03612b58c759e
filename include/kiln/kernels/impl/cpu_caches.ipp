// SPDX-License-Identifier: Apache-2.0
/// \file
/// The definitions behind `kernels/cpu_caches.hpp`: process-wide state, compiled once with the
/// rest of it (`<kiln/impl/runtime.ipp>`), not with each instruction set's kernels.
#pragma once

#include <kiln/kernels/cpu_caches.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kiln::kernels {
namespace detail {

/// The text of sysfs file `path` (at most 63 characters), or "" when it cannot be read.
inline std::string read_small_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return {};
  char buf[64] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string s(buf, n);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

inline bool caches_from_sysfs(cache_info& c) {
  const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 16; ++i) {
    const std::string d = dir + std::to_string(i) + "/";
    const std::string level = read_small_file(d + "level"), type = read_small_file(d + "type");
    if (level.empty()) break;
    if (type != "Data" && type != "Unified") continue;
    const std::int64_t size = parse_cache_size(read_small_file(d + "size"));
    if (level == "1") c.l1d = size;
    else if (level == "2") c.l2 = size;
    else if (level == "3") c.l3 = size, c.l3_shared_by = count_cpu_list(read_small_file(d + "shared_cpu_list"));
  }
  c.source = "sysfs";
  return c.l1d > 0 && c.l2 > 0;
}

#if defined(__x86_64__) || defined(__i386__)
/// The caches CPUID's deterministic cache leaf (4 on Intel, 0x8000001D on AMD) describes.
inline bool caches_from_cpuid_leaf(unsigned leaf, cache_info& c) {
  for (unsigned i = 0; i < 16; ++i) {
    unsigned a = 0, b = 0, cx = 0, d = 0;
    __cpuid_count(leaf, i, a, b, cx, d);
    const unsigned type = a & 31, level = (a >> 5) & 7;
    if (type == 0) break;
    if (type != 1 && type != 3) continue;  // data, unified
    const std::int64_t ways = ((b >> 22) & 0x3ff) + 1, partitions = ((b >> 12) & 0x3ff) + 1, line = (b & 0xfff) + 1;
    const std::int64_t sets = std::int64_t(cx) + 1;
    const std::int64_t size = ways * partitions * line * sets, shared_by = ((a >> 14) & 0xfff) + 1;
    if (level == 1) c.l1d = size;
    else if (level == 2) c.l2 = size;
    else if (level == 3) c.l3 = size, c.l3_shared_by = shared_by;
  }
  return c.l1d > 0 && c.l2 > 0;
}

inline bool caches_from_cpuid(cache_info& c) {
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &cx, &d)) return false;
  const unsigned max_leaf = a;
  const bool intel = b == 0x756e6547 && d == 0x49656e69 && cx == 0x6c65746e;  // "GenuineIntel"
  const bool amd = b == 0x68747541 && d == 0x69746e65 && cx == 0x444d4163;    // "AuthenticAMD"
  if (intel && max_leaf >= 4 && caches_from_cpuid_leaf(4, c)) {
    c.source = "CPUID leaf 4";
    return true;
  }
  if (!amd) return false;
  const unsigned max_ext = __get_cpuid_max(0x80000000, nullptr);
  if (max_ext >= 0x8000001D && __get_cpuid(0x80000001, &a, &b, &cx, &d) && (cx & (1u << 22))  // topology extensions
      && caches_from_cpuid_leaf(0x8000001D, c)) {
    c.source = "CPUID 0x8000001D";
    return true;
  }
  if (max_ext < 0x80000006) return false;
  __cpuid(0x80000005, a, b, cx, d);
  c.l1d = std::int64_t(cx >> 24) << 10;
  __cpuid(0x80000006, a, b, cx, d);
  c.l2 = std::int64_t(cx >> 16) << 10;
  c.l3 = std::int64_t(d >> 18) << 19;
  c.l3_shared_by = 0;
  c.source = "CPUID 0x80000005/6";
  return c.l1d > 0 && c.l2 > 0;
}
#endif

/// What this CPU's caches are, from the first source that answers.
inline cache_info read_cpu_caches() {
  cache_info c;
  if (caches_from_sysfs(c)) return c;
#if defined(__x86_64__) || defined(__i386__)
  c = {};
  if (caches_from_cpuid(c)) return c;
#endif
  return {32 << 10, 1 << 20, 8 << 20, 0, "assumed"};
}

/// What `set_cpu_caches` set: sizes 0 when nothing was.
struct set_caches {
  std::atomic<std::int64_t> l1d{0}, l2{0}, l3{0}, l3_shared_by{0};
};
inline set_caches& caches_set() {
  static set_caches s;
  return s;
}

}  // namespace detail

KILN_DECL cache_info cpu_caches() {
  static const cache_info read = detail::read_cpu_caches();
  detail::set_caches& s = detail::caches_set();
  cache_info c = read;
  bool set = false;
  for (auto [field, value] :
       {std::pair{&c.l1d, &s.l1d}, std::pair{&c.l2, &s.l2}, std::pair{&c.l3, &s.l3}, std::pair{&c.l3_shared_by, &s.l3_shared_by}})
    if (const std::int64_t v = value->load(std::memory_order_relaxed); v > 0) *field = v, set = true;
  if (set) c.source = "set";
  return c;
}

KILN_DECL void set_cpu_caches(const cache_info& c) {
  detail::set_caches& s = detail::caches_set();
  s.l1d.store(c.l1d > 0 ? c.l1d : 0, std::memory_order_relaxed);
  s.l2.store(c.l2 > 0 ? c.l2 : 0, std::memory_order_relaxed);
  s.l3.store(c.l3 > 0 ? c.l3 : 0, std::memory_order_relaxed);
  s.l3_shared_by.store(c.l3_shared_by > 0 ? c.l3_shared_by : 0, std::memory_order_relaxed);
}

}  // namespace kiln::kernels
