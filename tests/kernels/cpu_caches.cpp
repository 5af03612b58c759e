// SPDX-License-Identifier: Apache-2.0
// The caches the kernels block for (kernels/cpu_caches.hpp): read and reported, overridden and
// restored, parsed from sysfs's text. (The GEMM's blocking that follows them: linalg.cpp.)
#include <kiln/kernels/cpu_caches.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <string>

using namespace kiln;
using namespace kiln::kernels;

TEST_CASE("cpu_caches: this CPU's caches are read, plausible and reported with where they came from") {
  const cache_info c = cpu_caches();
  const std::string report = caches_report(c);
  CAPTURE(report);
  CHECK(c.l1d >= 4 << 10);
  CHECK(c.l2 >= c.l1d);
  CHECK(c.l3 >= 0);
  CHECK(c.l3_shared_by >= 0);
  const std::string_view sources[] = {"sysfs", "CPUID leaf 4", "CPUID 0x8000001D", "CPUID 0x80000005/6", "assumed"};
  CHECK(std::find(std::begin(sources), std::end(sources), c.source) != std::end(sources));
  CHECK(report.rfind("L1d ", 0) == 0);
  CHECK(report.find("(" + std::string(c.source) + ")") != std::string::npos);
  CHECK(caches_report({48 << 10, 1 << 20, 32 << 20, 16, "sysfs"}) == "L1d 48 KB, L2 1 MB, L3 32 MB shared by 16 CPUs (sysfs)");
  CHECK(caches_report({32 << 10, 1280 << 10, 0, 0, "assumed"}) == "L1d 32 KB, L2 1280 KB, L3 0 B (assumed)");
}

TEST_CASE("cpu_caches: set_cpu_caches overrides what was read, a size of 0 keeps it, and an empty one restores it") {
  const cache_info read = cpu_caches();
  set_cpu_caches({16 << 10, 0, 4 << 20, 8, "ignored"});
  const cache_info c = cpu_caches();
  set_cpu_caches({});
  CHECK(c.l1d == 16 << 10);
  CHECK(c.l2 == read.l2);
  CHECK(c.l3 == 4 << 20);
  CHECK(c.l3_shared_by == 8);
  CHECK(c.source == "set");
  const cache_info again = cpu_caches();
  CHECK(again.l1d == read.l1d);
  CHECK(again.l2 == read.l2);
  CHECK(again.l3 == read.l3);
  CHECK(again.l3_shared_by == read.l3_shared_by);
  CHECK(again.source == read.source);
  set_cpu_caches({-5, -1, 0, -3, "negative sizes are none"});
  CHECK(cpu_caches().l1d == read.l1d);
  CHECK(cpu_caches().source == read.source);
}

TEST_CASE("cpu_caches: sysfs's sizes and CPU lists are parsed, and anything else is none") {
  CHECK(kernels::detail::parse_cache_size("48K") == 48 << 10);
  CHECK(kernels::detail::parse_cache_size("1024K") == 1 << 20);
  CHECK(kernels::detail::parse_cache_size("32M") == 32 << 20);
  CHECK(kernels::detail::parse_cache_size("512") == 512);
  for (const char* bad : {"", "K", "-48K", "0K", "48KB", "48G", "4x", "99999999999999999999K"}) {
    CAPTURE(bad);
    CHECK(kernels::detail::parse_cache_size(bad) == 0);
  }
  CHECK(kernels::detail::count_cpu_list("0-15") == 16);
  CHECK(kernels::detail::count_cpu_list("0,8") == 2);
  CHECK(kernels::detail::count_cpu_list("3") == 1);
  CHECK(kernels::detail::count_cpu_list("0-3,8-11") == 8);
  for (const char* bad : {"", "-", "3-1", "0-", "a", "0,,1", "0-2x", "0-99999999999"}) {
    CAPTURE(bad);
    CHECK(kernels::detail::count_cpu_list(bad) == 0);
  }
}
