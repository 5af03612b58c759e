// SPDX-License-Identifier: Apache-2.0
/// \file
/// The data caches of the CPU the kernels run on, read when they are first needed: the GEMM's
/// blocking (`gemm.hpp`) follows them.
///
/// Read from Linux's sysfs (`/sys/devices/system/cpu/cpu0/cache`), else from CPUID (leaf 4 on
/// Intel, 0x8000001D on AMD, AMD's older 0x80000005 and 0x80000006, which do not say how many
/// CPUs share the L3), else assumed (32 KB, 1 MB, 8 MB). A virtual machine may hide some of this
/// or report the host's figures; `set_cpu_caches` overrides what was read, for a test or to
/// reproduce another machine's blocking.
///
///     std::cout << kiln::kernels::caches_report(kiln::kernels::cpu_caches()) << '\n';
///     // L1d 48 KB, L2 1 MB, L3 32 MB shared by 16 CPUs (sysfs)
#pragma once

#include <kiln/support/config.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace kiln::kernels {

/// One core's view of the data caches, in bytes.
struct cache_info {
  std::int64_t l1d = 0, l2 = 0, l3 = 0;
  std::int64_t l3_shared_by = 0;  ///< logical CPUs sharing the L3; 0 when unknown
  std::string_view source;        ///< where the figures came from: "sysfs", "CPUID leaf 4", ..., "assumed", "set"
};

namespace detail {

/// sysfs's "48K", "1024K", "32M" in bytes; 0 for anything else.
inline std::int64_t parse_cache_size(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || v <= 0 || v > (1ll << 40)) return 0;
  if (*end == 'K' && end[1] == 0) return v << 10;
  if (*end == 'M' && end[1] == 0) return v << 20;
  if (*end == 0) return v;
  return 0;
}

/// How many CPUs a sysfs CPU list names ("0-15", "0,8", "3"); 0 if it is malformed (or names
/// more than a million in one range).
inline std::int64_t count_cpu_list(const std::string& s) {
  std::int64_t count = 0;
  const char* p = s.c_str();
  while (*p) {
    char* end = nullptr;
    const long a = std::strtol(p, &end, 10);
    if (end == p || a < 0) return 0;
    long b = a;
    p = end;
    if (*p == '-') {
      b = std::strtol(p + 1, &end, 10);
      if (end == p + 1 || b < a || b - a > 1 << 20) return 0;
      p = end;
    }
    count += b - a + 1;
    if (*p == ',') ++p;
    else if (*p) return 0;
  }
  return count;
}

}  // namespace detail

/// The caches of the CPU the program runs on (read once), or what `set_cpu_caches` set.
KILN_DECL cache_info cpu_caches();

/// Makes the kernels block for `c` instead of the caches read (a size of 0 keeps the one read, so
/// `set_cpu_caches({})` restores them all; `source` becomes "set"). Kernel calls that start after
/// it follow it; the layout of weights packed ahead of time does not depend on the caches.
KILN_DECL void set_cpu_caches(const cache_info& c);

/// "L1d 48 KB, L2 1 MB, L3 32 MB shared by 16 CPUs (sysfs)".
inline std::string caches_report(const cache_info& c) {
  const auto size = [](std::int64_t bytes) {
    if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MB";
    if (bytes >= 1024) return std::to_string(bytes >> 10) + " KB";
    return std::to_string(bytes) + " B";
  };
  std::string s = "L1d " + size(c.l1d) + ", L2 " + size(c.l2) + ", L3 " + size(c.l3);
  if (c.l3_shared_by > 0) s += " shared by " + std::to_string(c.l3_shared_by) + (c.l3_shared_by == 1 ? " CPU" : " CPUs");
  return s + " (" + std::string(c.source) + ")";
}

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/cpu_caches.ipp>
#endif
