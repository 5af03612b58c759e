// SPDX-License-Identifier: Apache-2.0
// Run-time instruction-set dispatch for kiln's kernel library (kernels/isa.hpp).
//
// The kernels (src/kiln_kernels.cpp) are compiled once per x86-64 level; each copy keeps its
// symbols to itself and exports one table: the addresses of its out-of-line functions, in the
// order of the symbol list cmake/kiln-isa-objects.cmake wrote. That script also made, for each
// such function, a global entry point of the same name that jumps through `kiln_kernels_slots`;
// the constructor below fills the slots from the chosen level's table before any program code
// runs, so a call to kernels::conv2d, vm::register_kernels or kernels::prepack_weight from
// anywhere reaches the chosen level's code (one indirect jump), and calls inside the kernels stay
// inside their level.
#include <kiln/kernels/isa.hpp>

#if !defined(KILN_KERNELS_DISPATCH)
#error "src/kiln_dispatch.cpp is compiled for kiln's kernel library with run-time dispatch (KILN_KERNELS_DISPATCH)"
#endif

#include <cpuid.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

extern "C" {
// Written by cmake/kiln-isa-objects.cmake.
extern void* kiln_kernels_slots[];
extern const unsigned long kiln_kernels_slot_count;
#if defined(KILN_DISPATCH_x86_64)
extern void* const kiln_kernels_table_x86_64[];
#endif
#if defined(KILN_DISPATCH_x86_64_v3)
extern void* const kiln_kernels_table_x86_64_v3[];
#endif
#if defined(KILN_DISPATCH_x86_64_v4)
extern void* const kiln_kernels_table_x86_64_v4[];
#endif
void kiln_kernels_select();
}

namespace kiln::kernels::detail {
namespace {

struct level {
  std::string_view name;
  void* const* table;
};

// The levels this library was built with, lowest first.
constexpr level levels[] = {
#if defined(KILN_DISPATCH_x86_64)
    {"x86-64", kiln_kernels_table_x86_64},
#endif
#if defined(KILN_DISPATCH_x86_64_v3)
    {"x86-64-v3", kiln_kernels_table_x86_64_v3},
#endif
#if defined(KILN_DISPATCH_x86_64_v4)
    {"x86-64-v4", kiln_kernels_table_x86_64_v4},
#endif
};
constexpr std::size_t level_count = sizeof(levels) / sizeof(levels[0]);
static_assert(level_count > 0, "run-time dispatch needs at least one level");

// The highest x86-64 level (0: baseline, 2: v3, 3: v4) this CPU and its operating system
// support: CPUID's feature bits, and XCR0 for the registers the OS saves.
int cpu_level() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const bool sse42 = c & (1u << 20), popcnt = c & (1u << 23), fma = c & (1u << 12), movbe = c & (1u << 22),
             osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  int result = sse42 && popcnt ? 1 : 0;
  if (!osxsave || !avx) return result;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6) != 0x6) return result;  // the OS saves neither XMM nor YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return result;
  const bool bmi1 = b & (1u << 3), avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));  // F, DQ, BW, VL
  unsigned ea = 0, eb = 0, ec = 0, ed = 0;
  const bool lzcnt = __get_cpuid(0x80000001, &ea, &eb, &ec, &ed) && (ec & (1u << 5));
  if (!(result == 1 && avx2 && fma && bmi1 && bmi2 && f16c && movbe && lzcnt)) return result;
  result = 2;
  if (avx512 && (xcr0_lo & 0xe6) == 0xe6) result = 3;  // and the OS saves the opmask and ZMM state
  return result;
}

int level_number(std::string_view name) {
  if (name == "x86-64" || name == "sse2") return 0;
  if (name == "x86-64-v2" || name == "sse4.2") return 1;
  if (name == "x86-64-v3" || name == "avx2") return 2;
  if (name == "x86-64-v4" || name == "avx512") return 3;
  return -1;
}

std::string names() {
  std::string s;
  for (const level& l : levels) s += std::string(s.empty() ? "" : ", ") + std::string(l.name);
  return s;
}

// Set by kiln_kernels_select, which runs before the program's dynamic initialization: plain data,
// initialized at compile time, that no later constructor overwrites (a std::string would be).
std::size_t chosen = 0;
char how[256] = "";  // isa_report's tail

}  // namespace
}  // namespace kiln::kernels::detail

extern "C" void kiln_kernels_select() {
  using namespace kiln::kernels::detail;
  const int cpu = cpu_level();
  // The best level built that this CPU runs.
  std::size_t best = 0;
  for (std::size_t i = 0; i < level_count; ++i)
    if (level_number(levels[i].name) <= cpu) best = i;
  chosen = best;
  std::snprintf(how, sizeof how, "chosen at run time among %s", names().c_str());
  if (const char* forced = std::getenv("KILN_ISA"); forced && *forced) {
    const int want = level_number(forced);
    std::size_t pick = level_count;
    for (std::size_t i = 0; i < level_count; ++i)
      if (level_number(levels[i].name) == want) pick = i;
    if (want < 0 || pick == level_count)
      std::fprintf(stderr, "kiln: KILN_ISA=%s names no level of this build (%s; also sse2, avx2, avx512); using %.*s\n", forced, names().c_str(),
                   int(levels[best].name.size()), levels[best].name.data());
    else if (want > cpu)
      std::fprintf(stderr, "kiln: KILN_ISA=%s: this CPU does not support %.*s; using %.*s\n", forced, int(levels[pick].name.size()),
                   levels[pick].name.data(), int(levels[best].name.size()), levels[best].name.data());
    else {
      chosen = pick;
      std::snprintf(how, sizeof how, "forced by KILN_ISA (this CPU runs %.*s)", int(levels[best].name.size()), levels[best].name.data());
    }
  }
  std::memcpy(kiln_kernels_slots, levels[chosen].table, kiln_kernels_slot_count * sizeof(void*));
}

namespace kiln::kernels {

KILN_DECL std::string isa_report() { return detail::isa_report_text(isa(), detail::how); }

}  // namespace kiln::kernels
