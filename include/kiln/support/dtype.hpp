// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::dtype`: the element types shared by the IR, the runtime and the kernels.
#pragma once

#include <kiln/support/error.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

/// Element type of a tensor or primitive value. `void_` means "unknown" in IR types.
enum class dtype : std::uint8_t { void_, bool_, int8, int32, int64, uint8, float16, float32, float64 };

/// Every concrete dtype, in declaration order (handy for sweeps in tests).
inline constexpr dtype all_dtypes[] = {dtype::bool_,  dtype::int8,    dtype::int32,   dtype::int64,
                                       dtype::uint8,  dtype::float16, dtype::float32, dtype::float64};

/// The dtype's name as the text format and `.npy`-style tools spell it ("float32", "bool", "void").
constexpr std::string_view name(dtype t) noexcept {
  switch (t) {
    case dtype::void_: return "void";
    case dtype::bool_: return "bool";
    case dtype::int8: return "int8";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::uint8: return "uint8";
    case dtype::float16: return "float16";
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
  }
  return "?";
}

/// Parses a dtype name; `std::nullopt` when the name is not one of kiln's dtypes.
constexpr std::optional<dtype> parse_dtype(std::string_view s) noexcept {
  for (dtype t : {dtype::void_, dtype::bool_, dtype::int8, dtype::int32, dtype::int64, dtype::uint8,
                  dtype::float16, dtype::float32, dtype::float64})
    if (name(t) == s) return t;
  return std::nullopt;
}

/// Size of one element in bytes (bool is stored as one byte; void has size 0).
constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::void_: return 0;
    case dtype::bool_:
    case dtype::int8:
    case dtype::uint8: return 1;
    case dtype::float16: return 2;
    case dtype::int32:
    case dtype::float32: return 4;
    case dtype::int64:
    case dtype::float64: return 8;
  }
  return 0;
}

constexpr bool is_float(dtype t) noexcept {
  return t == dtype::float16 || t == dtype::float32 || t == dtype::float64;
}
constexpr bool is_int(dtype t) noexcept {
  return t == dtype::int8 || t == dtype::int32 || t == dtype::int64 || t == dtype::uint8;
}
constexpr bool is_known(dtype t) noexcept { return t != dtype::void_; }

/// IEEE binary16 <-> binary32 conversions (round to nearest even), for float16 storage.
constexpr float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

constexpr std::uint16_t float_to_half(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = std::uint16_t((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or nan (keep a quiet nan)
    return std::uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  if (abs >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {                                         // subnormal or zero in half
    if (abs < 0x33000000u) return sign;
    // value = mant * 2^(e - 150) and the half subnormal unit is 2^-24, so half = mant >> (126 - e)
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(abs >> 23);  // 14 .. 24
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return std::uint16_t(sign | half);
  }
  std::uint32_t half = ((abs - 0x38000000u) >> 13);
  const std::uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return std::uint16_t(sign | half);
}

}  // namespace kiln
