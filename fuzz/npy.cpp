// SPDX-License-Identifier: Apache-2.0
// The .npy reader: a tensor that loads writes to bytes that load to the same shape, type and
// values.
#include <kiln/runtime/npy.hpp>

#include "fuzz.hpp"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return kiln_fuzz::guarded([&] {
    const kiln::runtime::tensor t = kiln::runtime::parse_npy(kiln_fuzz::bytes(data, size));
    const std::vector<std::byte> out = kiln::runtime::to_npy(t);
    const kiln::runtime::tensor u = kiln::runtime::parse_npy(out);
    kiln_fuzz::fuzz_check(u.type() == t.type() && u.shape() == t.shape(), "a saved tensor loads with its shape and type");
    kiln_fuzz::fuzz_check(u.nbytes() == t.nbytes() && std::memcmp(u.data(), t.data(), t.nbytes()) == 0, "a saved tensor loads with its bytes");
  });
}
