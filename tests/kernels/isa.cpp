// SPDX-License-Identifier: Apache-2.0
// The instruction set the kernels run with (kernels/isa.hpp): named, reported, forced by KILN_ISA,
// and followed by the layout the compiler packs weights in.
#include <kiln/kernels/isa.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/nn.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <string_view>

using namespace kiln;

#if KILN_TEST_DISPATCH
namespace {

// A KILN_ISA value in the form isa() names levels.
std::string normalized(std::string_view v) {
  if (v == "sse2") return "x86-64";
  if (v == "avx2") return "x86-64-v3";
  if (v == "avx512") return "x86-64-v4";
  return std::string(v);
}

}  // namespace
#endif

TEST_CASE("isa: the kernels' level is named, with its vectors and how it was chosen") {
  const std::string_view level = kernels::isa();
  const std::string report = kernels::isa_report();
  CAPTURE(report);
  CHECK(report.rfind(std::string(level) + " (" + std::string(kernels::detail::isa_vectors(level)) + "), ", 0) == 0);
#if defined(__x86_64__)
  CHECK((level == "x86-64" || level == "x86-64-v2" || level == "x86-64-v3" || level == "x86-64-v4"));
#endif
#if KILN_TEST_DISPATCH
  const bool chosen = report.find("chosen at run time among x86-64") != std::string::npos;
  const bool forced = report.find("forced by KILN_ISA (this CPU runs x86-64") != std::string::npos;
  CHECK((chosen || forced));
  const char* env = std::getenv("KILN_ISA");
  if (forced) {
    REQUIRE(env != nullptr);
    CHECK(level == normalized(env));
  }
#else
  CHECK(report.find("compiled in") != std::string::npos);
  CHECK(level == kernels::compiled_isa());
#endif
}

TEST_CASE("isa: weights are packed for the vectors of the kernels that run") {
  // The GEMM's column panels are two vectors wide: what prepack_weight writes, and what the
  // compiler records beside a packed constant, follows the level chosen at run time.
  const std::string_view level = kernels::isa();
  const std::int64_t floats = level == "x86-64-v4" ? 16 : level == "x86-64-v3" ? 8 : 4;
  if (level.rfind("x86-64", 0) != 0) return;  // the widths below are x86-64's
  const kernels::packed_weight_layout l = kernels::native_weight_layout(dtype::float32, 64, 64);
  CHECK(l.panels.nr == 2 * floats);
  const kernels::packed_weight_layout d = kernels::native_weight_layout(dtype::float64, 64, 64);
  CHECK(d.panels.nr == floats);
  // And the packed weight runs in place: the result equals the unpacked product.
  const runtime::tensor a = runtime::tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const runtime::tensor b = runtime::tensor::from_values<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  const runtime::tensor packed = kernels::prepack_weight(b);
  runtime::tensor out = runtime::tensor::empty({2, 2}, dtype::float32);
  kernels::matmul_prepacked(a, packed, kernels::native_weight_layout(dtype::float32, 3, 2), out);
  const float* o = static_cast<const float*>(out.data());
  CHECK(o[0] == 4);
  CHECK(o[1] == 5);
  CHECK(o[2] == 10);
  CHECK(o[3] == 11);
}
