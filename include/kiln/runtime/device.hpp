// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::runtime::device`: where a tensor's storage lives. kiln runs on the CPU today; the type
/// exists so that executables, allocators and tensors already say where their memory is.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::runtime {

enum class device_kind : std::uint8_t { cpu = 1 };

struct device {
  device_kind kind = device_kind::cpu;
  std::int32_t id = 0;

  friend bool operator==(const device&, const device&) = default;
};

inline constexpr device cpu(std::int32_t id = 0) noexcept { return {device_kind::cpu, id}; }

/// "cpu:0".
inline std::string to_string(device d) {
  return std::string(d.kind == device_kind::cpu ? "cpu" : "unknown").append(":").append(std::to_string(d.id));
}

}  // namespace kiln::runtime
