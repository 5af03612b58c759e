// SPDX-License-Identifier: Apache-2.0
// `scoped_directory`: a fresh directory the test works in, so that code shown in the documentation
// can name its files as a user would ("model.so"), without two tests or two runs sharing them.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace kiln_test {

/// Makes an empty directory under the temporary directory and makes it the working directory;
/// on destruction restores the previous one and removes the directory with what is in it.
class scoped_directory {
public:
  explicit scoped_directory(const std::string& stem)
      : previous_(std::filesystem::current_path()),
        path_(std::filesystem::temp_directory_path() / ("kiln-test-" + std::to_string(::getpid()) + "-" + stem)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
    std::filesystem::current_path(path_);
  }
  scoped_directory(const scoped_directory&) = delete;
  scoped_directory& operator=(const scoped_directory&) = delete;
  ~scoped_directory() {
    std::error_code ec;
    std::filesystem::current_path(previous_, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const noexcept { return path_; }

private:
  std::filesystem::path previous_, path_;
};

}  // namespace kiln_test
