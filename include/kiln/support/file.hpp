// SPDX-License-Identifier: Apache-2.0
/// \file
/// Whole-file reads and writes for every file kiln reads or writes: models, `.npy`, executables,
/// libraries, IR text, generated headers, crash reproducers.
///
/// Reads take regular files whole, up to a limit that names itself; a pipe, a device or a FIFO is
/// refused (`/dev/zero` is an error, not an endless read).
///
/// Writes never lose data (as SQLite's and most editors' saves): the bytes go to a temporary file
/// in the target's folder, which is flushed to the disk, checked, and then renamed over the target.
/// A failure part-way (a full disk, a file-size limit, a folder that does not exist) leaves the
/// old file as it was and no temporary behind. `staged_files` does the same for several files at
/// once: none is replaced unless all were written and flushed. A target that exists and is not a regular file
/// (`/dev/null`, `/dev/stdout`, a FIFO) is written in place, every write checked. A link is
/// followed: the file it points to is replaced, the link stays.
#pragma once

#include <kiln/support/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace kiln::detail {

/// The most `read_file` reads by default: 16 GiB, more than any model kiln imports in one piece.
inline constexpr std::uint64_t default_read_limit = std::uint64_t(16) << 30;

/// `errno`'s text.
inline std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

/// A regular file open for reading, closed on destruction: what `read_file` reads from, and what
/// a reader that streams (the ONNX importer) opens. Anything but a regular file (a pipe, a device)
/// is refused, and so is a file of more than `limit` bytes, in a message that names the limit;
/// `who` (the API reading it; empty for none) begins the message of a failure.
class readable_file {
public:
  readable_file(const std::filesystem::path& path, std::string_view who, std::uint64_t limit = default_read_limit)
      : name_("'" + path.string() + "'"), prefix_(who.empty() ? std::string() : std::string(who) + ": "), limit_(limit) {
    do fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO without a writer: no wait
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw error(prefix_ + "cannot open " + name_ + ": " + errno_text(errno));
    try {
      struct ::stat st {};
      if (::fstat(fd_, &st) != 0) fail_read(errno);
      if (S_ISDIR(st.st_mode)) fail(name_ + " is a directory, not a file");
      if (!S_ISREG(st.st_mode)) fail(name_ + " is not a regular file (a device, a FIFO or a socket); kiln reads files only");
      size_ = std::uint64_t(st.st_size);
      if (size_ > limit) fail_too_large(size_);
    } catch (...) {
      ::close(fd_);  // no destructor runs for a constructor that throws
      throw;
    }
  }
  readable_file(const readable_file&) = delete;
  readable_file& operator=(const readable_file&) = delete;
  ~readable_file() { ::close(fd_); }

  int fd() const noexcept { return fd_; }
  /// The size when the file was opened.
  std::uint64_t size() const noexcept { return size_; }

  [[noreturn]] void fail(const std::string& what) const { throw error(prefix_ + what); }
  [[noreturn]] void fail_read(int e) const { fail("cannot read " + name_ + ": " + errno_text(e)); }
  [[noreturn]] void fail_too_large(std::uint64_t size) const {
    fail(name_ + " has " + std::to_string(size) + " bytes, more than the " + std::to_string(limit_) + " kiln reads from one file");
  }

private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string name_, prefix_;
  std::uint64_t limit_;
};

/// The bytes of the regular file at `path` (see `readable_file` for what is refused), read in one
/// call into a buffer of its size.
inline std::vector<std::byte> read_file(const std::filesystem::path& path, std::string_view who,
                                        std::uint64_t limit = default_read_limit) {
  const readable_file file(path, who, limit);
  const int fd = file.fd();
  // Its size and one byte more, so that the end is seen in the same read; a file that grows
  // meanwhile is read on in chunks, up to the limit.
  std::size_t chunk = file.size() > 0 ? std::size_t(file.size()) + 1 : std::size_t(1) << 16;
  std::vector<std::byte> out;
  for (;;) {
    const std::size_t at = out.size();
    if (std::uint64_t(at) + chunk > limit + 1) chunk = std::size_t(limit + 1 - at);
    out.resize(at + chunk);
    std::size_t got = 0;
    while (got < chunk) {
      const ::ssize_t n = ::read(fd, out.data() + at + got, chunk - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) file.fail_read(errno);
      if (n == 0) break;
      got += std::size_t(n);
    }
    out.resize(at + got);
    if (out.size() > limit) file.fail_too_large(out.size());
    if (got < chunk) break;
    chunk = std::max(out.size(), std::size_t(1) << 16);
  }
  return out;
}

/// A file being written: the bytes go to a temporary file beside `target`, and `commit` puts it in
/// place. Destroyed without a commit, it removes the temporary and leaves the target as it was.
/// `who` (the API writing; empty for none) begins the message of a failure.
class staged_file {
 public:
  staged_file(std::filesystem::path target, std::string_view who) : who_(who) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_symlink(target, ec)) {  // replace the file the link points to, not the link
      const fs::path real = fs::weakly_canonical(target, ec);
      if (!ec) target = real;
    }
    target_ = std::move(target);
    struct ::stat st {};
    if (::stat(target_.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) fail("is a directory");
      if (!S_ISREG(st.st_mode)) {  // a device or a FIFO: written in place
        do fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
        while (fd_ < 0 && errno == EINTR);
        if (fd_ < 0) fail(errno_text(errno));
        in_place_ = true;
        return;
      }
      mode_ = st.st_mode & 07777;
      keep_mode_ = true;
    }
    const fs::path dir = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
    static std::atomic<unsigned> counter{0};
    for (int attempt = 0;; ++attempt) {
      temp_ = dir / ("." + target_.filename().string() + ".kiln-" + std::to_string(::getpid()) + "-" +
                     std::to_string(counter.fetch_add(1, std::memory_order_relaxed)) + ".tmp");
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // the umask applies, as to any new file
      if (fd_ >= 0) break;
      if (errno == EINTR || (errno == EEXIST && attempt < 100)) continue;
      const int e = errno;
      temp_.clear();
      fail(errno_text(e));
    }
  }
  staged_file(const staged_file&) = delete;
  staged_file& operator=(const staged_file&) = delete;
  staged_file(staged_file&& o) noexcept
      : who_(std::move(o.who_)),
        target_(std::move(o.target_)),
        temp_(std::exchange(o.temp_, {})),
        fd_(std::exchange(o.fd_, -1)),
        mode_(o.mode_),
        keep_mode_(o.keep_mode_),
        in_place_(o.in_place_) {}
  staged_file& operator=(staged_file&&) = delete;
  ~staged_file() { abandon(); }

  const std::filesystem::path& target() const noexcept { return target_; }

  void write(std::span<const std::byte> bytes) {
    const auto* p = reinterpret_cast<const char*>(bytes.data());
    std::size_t left = bytes.size();
    while (left > 0) {
      const ::ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int e = n < 0 ? errno : ENOSPC;
        abandon();
        fail(errno_text(e));
      }
      p += n;
      left -= std::size_t(n);
    }
  }
  void write(std::string_view text) { write(std::as_bytes(std::span<const char>(text.data(), text.size()))); }

  /// Flushes the bytes to the disk and replaces the target with them.
  void commit() {
    flush();
    publish();
  }
  /// The first half of `commit`: the bytes on the disk, the file closed (a write that failed late,
  /// as on a full disk over NFS, fails here).
  void flush() {
    if (fd_ < 0) return;
    if (in_place_) {
      const int e = ::close(std::exchange(fd_, -1)) == 0 ? 0 : errno;
      if (e != 0) fail(errno_text(e));
      return;
    }
    const auto failed = [&](int e) {
      abandon();
      fail(errno_text(e));
    };
    if (keep_mode_ && ::fchmod(fd_, mode_) != 0) failed(errno);
    if (::fsync(fd_) != 0) failed(errno);
    if (::close(std::exchange(fd_, -1)) != 0) failed(errno);
  }
  /// The second half: the flushed file renamed over the target.
  void publish() {
    if (in_place_ || temp_.empty()) return;
    if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
      const int e = errno;
      abandon();
      fail(errno_text(e));
    }
    temp_.clear();
    // The rename itself reaches the disk with the folder's entry (failure here loses nothing).
    const std::filesystem::path dir = target_.has_parent_path() ? target_.parent_path() : std::filesystem::path(".");
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw error((who_.empty() ? std::string() : who_ + ": ") + "cannot write '" + target_.string() + "': " + why);
  }
  void abandon() noexcept {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
    if (!temp_.empty()) {
      ::unlink(temp_.c_str());
      temp_.clear();
    }
  }

  std::string who_;
  std::filesystem::path target_, temp_;
  int fd_ = -1;
  ::mode_t mode_ = 0;
  bool keep_mode_ = false, in_place_ = false;
};

/// Several files written together: each is staged as `staged_file` does, and `commit` replaces the
/// targets only once every one was written (a failure before leaves all of them as they were).
class staged_files {
 public:
  explicit staged_files(std::string_view who) : who_(who) {}
  /// A new file to write; the reference stays valid until `commit`.
  staged_file& add(const std::filesystem::path& target) { return files_.emplace_back(target, who_); }
  /// Flushes every file, then renames each over its target.
  void commit() {
    for (auto& f : files_) f.flush();
    for (auto& f : files_) f.publish();
    files_.clear();
  }

 private:
  std::string who_;
  std::deque<staged_file> files_;
};

/// Replaces the file at `path` with `bytes` (through a `staged_file`); `who` names the failure.
inline void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes, std::string_view who) {
  staged_file f(path, who);
  f.write(bytes);
  f.commit();
}
/// The same with text.
inline void write_file(const std::filesystem::path& path, std::string_view text, std::string_view who) {
  write_file(path, std::as_bytes(std::span<const char>(text.data(), text.size())), who);
}

}  // namespace kiln::detail
