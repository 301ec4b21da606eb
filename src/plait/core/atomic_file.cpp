#include "plait/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/core/progress.h"
#include "plait/core/unique_name.h"

namespace plait {
namespace {

constexpr std::string_view kTmp = ".tmp-";
constexpr std::size_t kTokenDigits = 16;

std::string parent_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// The directory of a file the user names (links followed), or an error naming the file.
Directory parent_directory(const std::string& path) {
  try {
    return Directory::open(parent_of(path));
  } catch (const InputError&) {
    throw InputError(path, "(file)",
                     "cannot write the file: its directory " + parent_of(path) + " does not exist or is not a directory");
  }
}

}  // namespace

bool is_temporary_name(std::string_view name) {
  const std::size_t at = name.rfind(kTmp);
  if (at == std::string_view::npos || at == 0 || name.size() != at + kTmp.size() + kTokenDigits) return false;
  for (const char c : name.substr(at + kTmp.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

AtomicFile::AtomicFile(const Directory& dir, std::string name, Replace replace, mode_t mode)
    : dir_(dir), name_(std::move(name)), replace_(replace) {
  check_plain_name(name_, dir_.path());
  open_temporary(mode);
}

AtomicFile::AtomicFile(const std::string& path, Replace replace)
    : dir_(parent_directory(path)),
      name_(std::filesystem::path(path).filename().string()),
      replace_(replace) {
  check_plain_name(name_, path);
  open_temporary(0644);
}

void AtomicFile::open_temporary(mode_t mode) {
  // O_EXCL: a fresh file or nothing. A collision of 64 random bits is not expected, but costs
  // nothing to survive.
  for (int attempt = 0; attempt < 8 && fd_ < 0; ++attempt) {
    tmp_ = name_ + std::string(kTmp) + unique_token();
    fd_ = ::openat(dir_.fd(), tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) throw Error(path() + ": cannot create a temporary file beside it: " + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlinkat(dir_.fd(), tmp_.c_str(), 0);
  }
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  write_at(bytes_, bytes);
  crc_ = plait::crc32c(bytes, crc_);
  bytes_ += bytes.size();
}

void AtomicFile::write_at(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (fd_ < 0) throw Error(path() + " was already committed");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(dir_.path_of(tmp_) + ": cannot write: " + std::strerror(n < 0 ? errno : ENOSPC));
    done += static_cast<std::size_t>(n);
    note_progress();  // a long write is progress for the stall watchdog
  }
}

std::uint32_t AtomicFile::checksum_contents() const {
  if (fd_ < 0) throw Error(path() + " was already committed");
  std::vector<std::byte> block(std::size_t{1} << 20);
  std::uint32_t crc = 0;
  for (std::uint64_t at = 0;;) {
    const ssize_t n = ::pread(fd_, block.data(), block.size(), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(dir_.path_of(tmp_) + ": cannot read it back: " + std::strerror(errno));
    if (n == 0) return crc;
    crc = plait::crc32c(std::span(block.data(), static_cast<std::size_t>(n)), crc);
    at += static_cast<std::uint64_t>(n);
    note_progress();
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw Error(path() + " was already committed");
  const int fd = fd_;
  fd_ = -1;
  const auto fail = [&](const std::string& what, int err) {
    ::unlinkat(dir_.fd(), tmp_.c_str(), 0);
    throw Error(dir_.path_of(tmp_) + ": cannot " + what + ": " + std::strerror(err));
  };
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("fsync", err);
  }
  if (::close(fd) != 0) fail("close", errno);
  try {
    dir_.rename(tmp_, name_, replace_ == Replace::kYes);
  } catch (...) {
    ::unlinkat(dir_.fd(), tmp_.c_str(), 0);
    throw;
  }
  dir_.sync();
}

void write_file_atomically(const Directory& dir, const std::string& name, std::string_view text,
                           AtomicFile::Replace replace) {
  AtomicFile f(dir, name, replace);
  f.write(text);
  f.commit();
}

void write_file_atomically(const std::string& path, std::string_view text) {
  AtomicFile f(path);
  f.write(text);
  f.commit();
}

void fsync_directory(const std::string& dir) { Directory::open(dir).sync(); }

}  // namespace plait
