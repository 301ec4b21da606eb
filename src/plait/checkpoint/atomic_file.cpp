#include "plait/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/core/progress.h"

namespace plait::checkpoint {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw Error("checkpoint: cannot " + what + " " + path + ": " + std::strerror(errno));
}

std::string parent_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp-" + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", tmp_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) throw Error("checkpoint: " + path_ + " was already committed");
  crc_ = plait::crc32c(bytes, crc_);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", tmp_);
    done += static_cast<std::size_t>(n);
    note_progress();  // a long write is progress for the stall watchdog
  }
  bytes_ += bytes.size();
}

void AtomicFile::commit() {
  if (fd_ < 0) throw Error("checkpoint: " + path_ + " was already committed");
  if (::fsync(fd_) != 0) fail("fsync", tmp_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(tmp_.c_str());
    fail("close", tmp_);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    errno = err;
    fail("rename into place", path_);
  }
  fsync_directory(parent_of(path_));
}

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail("fsync directory", dir);
}

void write_file_atomically(const std::string& path, std::string_view text) {
  AtomicFile f(path);
  f.write(text);
  f.commit();
}

}  // namespace plait::checkpoint
