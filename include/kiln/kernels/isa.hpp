// SPDX-License-Identifier: Apache-2.0
/// \file
/// Which instruction set the kernels run with, and how it was chosen.
///
/// Header-only, the kernels are compiled for whatever the including code is compiled for
/// (`-march`): `compiled_isa()` names it, and it is what runs. kiln's separately compiled kernel
/// library (`src/`: the tools, the Python module, kiln's own tests) is instead compiled once per
/// x86-64 micro-architecture level and picks one when the program starts:
///
/// | level       | what it adds                                   | kernels' vectors            |
/// |-------------|------------------------------------------------|-----------------------------|
/// | `x86-64`    | the baseline: SSE2                             | 128 bits                    |
/// | `x86-64-v3` | AVX2, FMA, BMI2, F16C (Haswell, Zen 1 and on)  | 256 bits                    |
/// | `x86-64-v4` | AVX-512 F/BW/DQ/VL (Skylake-SP, Zen 4 and on)  | 512 bits                    |
///
/// the best one the CPU supports (CPUID's feature bits, and XCR0 for the operating system's
/// consent to the wider registers). The environment variable `KILN_ISA` names a lower level to use
/// instead (`x86-64`, `x86-64-v3`, `x86-64-v4`; also `sse2`, `avx2`, `avx512`), for tests and for
/// reproducing a result of another machine; a level the CPU lacks, or a name that is none of
/// these, is reported on standard error and ignored. `KILN_MARCH` (CMake) builds one level only,
/// as header-only code does.
///
/// The choice covers every kernel, called through the VM (`kernels.*`) or directly, and the layout
/// of weights the compiler packs ahead of time (`kernels::native_weight_layout` and the
/// convolution's), so that packed weights fit the kernels that read them.
///
///     std::cout << kiln::kernels::isa_report() << '\n';
///     // x86-64-v4 (AVX-512), chosen at run time among x86-64, x86-64-v3, x86-64-v4
#pragma once

#include <kiln/support/config.hpp>

#include <string>
#include <string_view>

namespace kiln::kernels {

/// The level the including translation unit is compiled for: "x86-64-v4", "x86-64-v3",
/// "x86-64-v2", "x86-64", or the architecture's name elsewhere ("aarch64", "generic").
constexpr std::string_view compiled_isa() noexcept {
#if defined(__x86_64__)
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  return "x86-64-v4";
#elif defined(__AVX2__) && defined(__FMA__)
  return "x86-64-v3";
#elif defined(__SSE4_2__) && defined(__POPCNT__)
  return "x86-64-v2";
#else
  return "x86-64";
#endif
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "generic";
#endif
}

namespace detail {

/// "AVX-512" for "x86-64-v4": what a level's vectors are, for reports.
constexpr std::string_view isa_vectors(std::string_view level) noexcept {
  if (level == "x86-64-v4") return "AVX-512";
  if (level == "x86-64-v3") return "AVX2";
  if (level == "x86-64-v2") return "SSE4.2";
  if (level == "x86-64") return "SSE2";
  if (level == "aarch64") return "NEON";
  return "scalar";
}

/// `isa_report()`'s text: "x86-64-v4 (AVX-512), " and how the level was chosen.
inline std::string isa_report_text(std::string_view level, std::string_view how) {
  return std::string(level) + " (" + std::string(isa_vectors(level)) + "), " + std::string(how);
}

}  // namespace detail

/// The level the kernels that run were compiled for (`compiled_isa()` of the kernels' own code):
/// with run-time dispatch the one chosen for this CPU.
KILN_DECL std::string_view isa();

/// `isa()` with its vector width and how it was chosen, for `--version` and profiles:
/// "x86-64-v4 (AVX-512), chosen at run time among x86-64, x86-64-v3, x86-64-v4", "x86-64-v3
/// (AVX2), forced by KILN_ISA", "x86-64-v3 (AVX2), compiled in".
KILN_DECL std::string isa_report();

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/isa.ipp>
#endif
