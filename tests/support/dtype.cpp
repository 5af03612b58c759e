// SPDX-License-Identifier: Apache-2.0
#include <kiln/support/dtype.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using kiln::dtype;

TEST_CASE("every dtype's name parses back to it") {
  for (dtype t : kiln::all_dtypes) CHECK(kiln::parse_dtype(kiln::name(t)) == t);
  CHECK(kiln::parse_dtype("void") == dtype::void_);
  CHECK_FALSE(kiln::parse_dtype("float33").has_value());
  CHECK_FALSE(kiln::parse_dtype("").has_value());
}

TEST_CASE("dtype sizes and categories") {
  CHECK(kiln::size_of(dtype::bool_) == 1);
  CHECK(kiln::size_of(dtype::float16) == 2);
  CHECK(kiln::size_of(dtype::int32) == 4);
  CHECK(kiln::size_of(dtype::float64) == 8);
  CHECK(kiln::is_float(dtype::float16));
  CHECK_FALSE(kiln::is_float(dtype::int64));
  CHECK(kiln::is_int(dtype::uint8));
  CHECK_FALSE(kiln::is_int(dtype::bool_));
  CHECK_FALSE(kiln::is_known(dtype::void_));
}

TEST_CASE("every float16 bit pattern survives a round trip through float32") {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = kiln::half_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      CHECK(std::isnan(kiln::half_to_float(kiln::float_to_half(f))));
      continue;
    }
    CHECK(kiln::float_to_half(f) == h);
  }
}

TEST_CASE("float32 to float16 rounds to nearest even and saturates to infinity") {
  CHECK(kiln::half_to_float(kiln::float_to_half(1.0f)) == 1.0f);
  CHECK(kiln::half_to_float(kiln::float_to_half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(kiln::half_to_float(kiln::float_to_half(1e6f))));
  // 1 + 2^-11 lies exactly between 1 and the next half (1 + 2^-10): ties go to even (1.0)
  CHECK(kiln::half_to_float(kiln::float_to_half(1.0f + 0x1p-11f)) == 1.0f);
  CHECK(kiln::half_to_float(kiln::float_to_half(1.0f + 0x1.8p-11f)) == 1.0f + 0x1p-10f);
  // smallest subnormal half
  CHECK(kiln::half_to_float(kiln::float_to_half(0x1p-24f)) == 0x1p-24f);
  CHECK(kiln::half_to_float(kiln::float_to_half(0x1p-26f)) == 0.0f);
  CHECK(std::signbit(kiln::half_to_float(kiln::float_to_half(-0.0f))));
}
