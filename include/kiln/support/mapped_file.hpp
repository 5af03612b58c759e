// SPDX-License-Identifier: Apache-2.0
/// \file
/// `mapped_file`: a regular file mapped read-only into memory, for weights used where they lie
/// in the file instead of being read into memory first (the ONNX importer's constants).
///
/// The pages of a mapped file are the operating system's cache of the file, not the process's
/// own memory: `evict` gives pages back (they count in the resident set only while mapped in), and
/// a later read maps them in again from the file. A compiler that reads each weight once (to pack
/// it, or to copy it into an executable) and evicts it then never holds a model's weights twice.
///
/// The file must not be truncated or written in place while it is mapped (replacing it, as
/// kiln's own writes and most tools do, by renaming a new file over it, is safe: the mapping keeps
/// the old file). `check_unchanged` says whether it was, from its size and modification time, so
/// that a reader can fail with a message instead of reading another file's bytes.
///
/// This header includes <sys/mman.h>, whose MAP_TYPE macro breaks ONNX's <onnx/defs/parser.h>:
/// include it after ONNX's headers. What other headers need is the interface, `paged_bytes`.
#pragma once

#include <kiln/support/error.hpp>
#include <kiln/support/file.hpp>
#include <kiln/support/paged_bytes.hpp>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace kiln::detail {

class mapped_file final : public paged_bytes {
public:
  /// `path` mapped whole; the errors of `readable_file` (a missing file, a directory, a device),
  /// and a file of no bytes, which cannot be mapped. `who` begins a failure's message.
  static std::shared_ptr<const mapped_file> open(const std::filesystem::path& path, std::string_view who) {
    return std::shared_ptr<const mapped_file>(new mapped_file(path, who));
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() override { ::munmap(const_cast<std::byte*>(data_), size_); }

  std::span<const std::byte> bytes() const noexcept override { return {data_, size_}; }
  const std::filesystem::path& path() const noexcept { return path_; }
  std::string_view name() const noexcept override { return name_; }

  /// A hint: the pages of `range` (a part of `bytes()`) will not be read soon. They leave the
  /// resident set and are read from the file again if they are. Pages the range shares with its
  /// neighbours go too: a mapping that is never written gives back any page safely.
  void evict(std::span<const std::byte> range) const noexcept override {
    if (range.empty() || range.data() < data_ || range.data() + range.size() > data_ + size_) return;
    const std::uintptr_t page = page_size();
    const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(range.data()) & ~(page - 1);
    const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(range.data() + range.size());
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
  void evict() const noexcept { evict(bytes()); }

  /// Throws a `kiln::error` naming the file when its size or modification time is no longer what
  /// it was when it was mapped: it was truncated or written in place, and its pages may no longer
  /// be the bytes read when it was mapped (or exist at all). `who` begins the message.
  void check_unchanged(std::string_view who) const override {
    struct ::stat st {};
    if (::fstat(file_.fd(), &st) != 0)
      throw error(std::string(who) + ": cannot check " + name_ + ", whose bytes are in use: " + errno_text(errno));
    if (std::uint64_t(st.st_size) != size_ || st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec)
      throw error(std::string(who) + ": " + name_ + " changed after its bytes were mapped (" + std::to_string(size_) +
                  " bytes then, " + std::to_string(st.st_size) +
                  " now); the model's weights are read from the file where they lie, so it must not be written while they are in use "
                  "(replace it by renaming a new file over it instead)");
  }

  static std::size_t page_size() noexcept {
    static const std::size_t page = [] {
      const long p = ::sysconf(_SC_PAGESIZE);
      return p > 0 ? std::size_t(p) : std::size_t(4096);
    }();
    return page;
  }

private:
  mapped_file(const std::filesystem::path& path, std::string_view who) : file_(path, who), path_(path), name_("'" + path.string() + "'") {
    if (file_.size() == 0) file_.fail(name_ + " is empty");
    size_ = std::size_t(file_.size());
    struct ::stat st {};
    if (::fstat(file_.fd(), &st) != 0) file_.fail_read(errno);
    mtime_ = st.st_mtim;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file_.fd(), 0);
    if (p == MAP_FAILED) file_.fail("cannot map " + name_ + " into memory: " + errno_text(errno));
    data_ = static_cast<const std::byte*>(p);
  }

  readable_file file_;  // open while mapped: check_unchanged asks it
  std::filesystem::path path_;
  std::string name_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  struct ::timespec mtime_ {};
};

}  // namespace kiln::detail
