// SPDX-License-Identifier: Apache-2.0
#include <kiln/runtime/npy.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

#include <filesystem>

#include <sys/stat.h>

using namespace kiln;
using namespace kiln::runtime;
using kiln_test::message_of;

namespace {

/// An .npy file as numpy writes it: version 1.0, header padded to 64 bytes.
std::vector<std::byte> npy_bytes(const std::string& dict, const std::vector<unsigned char>& data, int major = 1) {
  std::string header = dict;
  const std::size_t pre = major == 1 ? 10 : 12;
  while ((pre + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::vector<std::byte> out;
  for (unsigned char c : kiln::runtime::detail::npy_magic) out.push_back(std::byte(c));
  out.push_back(std::byte(major));
  out.push_back(std::byte(0));
  for (std::size_t i = 0; i < pre - 8; ++i) out.push_back(std::byte((header.size() >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(std::byte(c));
  for (auto b : data) out.push_back(std::byte(b));
  return out;
}

}  // namespace

TEST_CASE("npy files round-trip every dtype, scalars and empty arrays") {
  const auto dir = std::filesystem::temp_directory_path();
  auto f = tensor::from_values<float>({2, 3}, {1, -2, 3.5f, 4, 5, 6});
  save_npy(dir / "kiln_test_f.npy", f);
  CHECK(equal(load_npy(dir / "kiln_test_f.npy"), f));
  for (auto t : {tensor::from_values<std::int64_t>({3}, {1, -1, 1LL << 40}), tensor::from_values<bool>({2}, {true, false}),
                 tensor::from_values<double>({}, {3.25}), tensor::zeros({0, 4}, dtype::int32),
                 tensor::from_values<std::uint8_t>({1, 1, 2}, {7, 255}), tensor::zeros({3}, dtype::float16)}) {
    auto back = parse_npy(to_npy(t));
    CHECK(equal(back, t));
  }
  // A strided view is written in row-major order.
  CHECK(parse_npy(to_npy(f.permute({1, 0}))).to_vector<float>() == std::vector<float>{1, 4, -2, 5, 3.5f, 6});
}

TEST_CASE("npy files from numpy: header padding, version 2, big-endian and Fortran order") {
  auto le = npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", {1, 0, 0, 0, 2, 0, 0, 0});
  CHECK(parse_npy(le).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2});
  CHECK(reinterpret_cast<std::uintptr_t>(parse_npy(le).data()) % 64 == 0);
  auto v2 = npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", {1, 0, 0, 0, 2, 0, 0, 0}, 2);
  CHECK(parse_npy(v2).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2});
  auto be = npy_bytes("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", {0, 0, 0, 1, 0, 0, 1, 0});
  CHECK(parse_npy(be).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 256});
  // Fortran order: the bytes hold columns; the result is the same array in C order.
  auto fo = npy_bytes("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", {1, 4, 2, 5, 3, 6});
  auto t = parse_npy(fo);
  CHECK(t.shape() == shape_vector{2, 3});
  CHECK(t.is_contiguous());
  CHECK(t.to_vector<std::uint8_t>() == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
  auto scalar = npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", {0, 0, 0, 0, 0, 0, 0xf0, 0x3f});
  CHECK(parse_npy(scalar).to_vector<double>() == std::vector<double>{1.0});
}

TEST_CASE("malformed npy data is an error naming the source and the problem") {
  auto err = [](const std::vector<std::byte>& b) { return message_of<format_error>([&] { parse_npy(b, "x.npy"); }); };
  const std::vector<unsigned char> four(4, 0);
  CHECK(err({}) == "x.npy: too short for an .npy file (0 bytes)");
  CHECK(err(std::vector<std::byte>(20, std::byte{'a'})) == "x.npy: not an .npy file (bad magic)");
  auto v9 = npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", four);
  v9[6] = std::byte{9};
  CHECK(err(v9) == "x.npy: .npy version 9.0 is not supported (kiln reads 1.x, 2.x and 3.x)");
  CHECK(err(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", four)) ==
        "x.npy: unsupported .npy dtype '<c8' (complex); kiln reads b1, i1, u1, i4, i8, f2, f4 and f8");
  CHECK(err(npy_bytes("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", four)).find("structured dtype") !=
        std::string::npos);
  CHECK(err(npy_bytes("{'descr': '<i4', 'shape': (1,), }", four)) == "x.npy: bad .npy header at column 33: the header lacks 'fortran_order'");
  CHECK(err(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (-1,), }", four)).find("non-negative integer") != std::string::npos);
  CHECK(err(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", four)) ==
        "x.npy: truncated data: shape [3] needs 3 int32 elements of 4 bytes, 4 bytes remain");
  CHECK(err(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999,99999999999), }", four)).find("more than 2^63 elements") !=
        std::string::npos);
  CHECK(err(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (0,4294967296,4294967296), }", four)) ==
        "x.npy: shape: shape [0, 4294967296, 4294967296] is too large: its row-major strides do not fit in int64");
  auto cut = npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", four);
  cut.resize(30);
  CHECK(err(cut).find("truncated header") != std::string::npos);
  CHECK(message_of([] { load_npy("/nonexistent/kiln.npy"); }) == "kiln::runtime::load_npy: cannot open '/nonexistent/kiln.npy': No such file or directory");
  // A directory opens as a stream on Linux, but cannot be read.
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  CHECK(message_of([&] { load_npy(dir); }) == "kiln::runtime::load_npy: '" + dir.string() + "' is a directory, not a file");
}

TEST_CASE("files are read whole, however large, and a FIFO or a device is refused at once, not read forever") {
  const tensor big = tensor::from_values<float>({1 << 20}, std::vector<float>(std::size_t(1) << 20, 2.5f));
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "kiln_npy_big.npy";
  save_npy(path, big);
  CHECK(load_npy(path).to_vector<float>() == big.to_vector<float>());
  // A FIFO nobody writes to: refused without waiting for a writer.
  const std::filesystem::path fifo = std::filesystem::temp_directory_path() / "kiln_npy_fifo";
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(message_of([&] { load_npy(fifo); }) ==
        "kiln::runtime::load_npy: '" + fifo.string() + "' is not a regular file (a device, a FIFO or a socket); kiln reads files only");
  CHECK(message_of([&] { load_npy("/dev/zero"); }) ==
        "kiln::runtime::load_npy: '/dev/zero' is not a regular file (a device, a FIFO or a socket); kiln reads files only");
  std::filesystem::remove(fifo);
  std::filesystem::remove(path);
}
