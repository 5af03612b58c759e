// SPDX-License-Identifier: Apache-2.0
// mapped_file and the arrays over its pages (ir::ndarray::map): bytes read where they lie, pages
// given back and read again, a file written in place after it was mapped refused by name, and
// ranges outside the file refused.
#include <kiln/ir/ndarray.hpp>
#include <kiln/support/mapped_file.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using kiln_test::message_of;

namespace {

struct temp_file {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("kiln_mapped_file_" + std::to_string(::getpid()) + ".bin");
  explicit temp_file(const std::string& bytes) { write(bytes); }
  ~temp_file() { std::filesystem::remove(path); }
  void write(const std::string& bytes) const { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }
};

std::string floats_bytes(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(i) * 0.5f;
  return std::string(reinterpret_cast<const char*>(v.data()), n * 4);
}

}  // namespace

TEST_CASE("an ndarray over a mapped file reads the file's bytes, and reads them again after its pages are given back") {
  const std::size_t n = 3 * 4096 + 7;  // pages and a part of one
  const temp_file f("head" + floats_bytes(n));
  const auto file = kiln::detail::mapped_file::open(f.path, "test");
  CHECK(file->bytes().size() == 4 + n * 4);
  const kiln::ir::ndarray a = kiln::ir::ndarray::map(kiln::dtype::float32, {std::int64_t(n)}, file, file->bytes().subspan(4));
  CHECK(a.is_mapped());
  CHECK(a.bytes().data() == file->bytes().data() + 4);
  const kiln::ir::ndarray copy = kiln::ir::ndarray::from<float>(kiln::dtype::float32, {std::int64_t(n)}, [&] {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = float(i) * 0.5f;
    return v;
  }());
  CHECK(a == copy);  // the same hash and bytes as an array read into memory
  CHECK_FALSE(copy.is_mapped());
  a.evict();
  CHECK(a.element(n - 1) == float(n - 1) * 0.5f);
  a.evict();
  CHECK(a.element(0) == 0);
  copy.evict();  // nothing for an array in memory
  CHECK(copy.element(1) == 0.5);
  a.check_source("test");  // unchanged

  // The array keeps the file mapped.
  std::weak_ptr<const kiln::detail::mapped_file> weak;
  kiln::ir::ndarray kept;
  {
    const auto again = kiln::detail::mapped_file::open(f.path, "test");
    weak = again;
    kept = kiln::ir::ndarray::map(kiln::dtype::float32, {2}, again, again->bytes().subspan(4, 8));
  }
  CHECK_FALSE(weak.expired());
  CHECK(kept.element(1) == 0.5);
  kept = {};
  CHECK(weak.expired());
}

TEST_CASE("a mapped file written in place is refused by name, and so are a range outside it and an empty file") {
  const temp_file f(floats_bytes(1024));
  const auto file = kiln::detail::mapped_file::open(f.path, "test");
  const kiln::ir::ndarray a = kiln::ir::ndarray::map(kiln::dtype::float32, {1024}, file, file->bytes());
  std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a modification time that differs
  f.write(floats_bytes(1024));
  const std::string msg = message_of<kiln::error>([&] { a.check_source("kiln::transform::to_tensor"); });
  CHECK(msg == "kiln::transform::to_tensor: '" + f.path.string() +
                   "' changed after its bytes were mapped (4096 bytes then, 4096 now); the model's weights are read from the file where "
                   "they lie, so it must not be written while they are in use (replace it by renaming a new file over it instead)");

  CHECK(message_of<kiln::error>([&] {
          kiln::ir::ndarray::map(kiln::dtype::float32, {2}, file, std::span<const std::byte>(file->bytes().data() + 4092, 8));
        }) == "kiln::ir::ndarray::map: the range is not inside the bytes of '" + f.path.string() + "'");
  CHECK(message_of<kiln::error>([&] { kiln::ir::ndarray::map(kiln::dtype::float32, {3}, file, file->bytes().subspan(0, 8)); }) ==
        "kiln::ir::ndarray: 8 bytes given, but shape and dtype float32 need 12");

  f.write("");
  CHECK(message_of<kiln::error>([&] { kiln::detail::mapped_file::open(f.path, "who"); }) == "who: '" + f.path.string() + "' is empty");
  CHECK(message_of<kiln::error>([&] { kiln::detail::mapped_file::open("/nonexistent/x.bin", "who"); }) ==
        "who: cannot open '/nonexistent/x.bin': No such file or directory");
}
