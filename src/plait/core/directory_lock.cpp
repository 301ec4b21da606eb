#include "plait/core/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "plait/core/unique_name.h"

namespace plait {
namespace {

constexpr std::string_view kPrefix = "plait-lock host=";
constexpr std::string_view kPid = " pid=";
constexpr std::size_t kMaxText = 512;  // more than any holder line; the rest is never read

bool host_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

std::string holder_description(int fd) {
  char buf[kMaxText];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  const std::optional<LockHolder> h = parse_lock_holder(n > 0 ? std::string_view(buf, static_cast<std::size_t>(n)) : "");
  if (!h) return "its host and pid not yet written";
  return "pid " + std::to_string(h->pid) + " on host " + h->host;
}

}  // namespace

std::string lock_holder_text(const LockHolder& holder) {
  return std::string(kPrefix) + holder.host + std::string(kPid) + std::to_string(holder.pid) + "\n";
}

std::optional<LockHolder> parse_lock_holder(std::string_view text) {
  if (!text.starts_with(kPrefix) || !text.ends_with('\n')) return std::nullopt;
  text.remove_prefix(kPrefix.size());
  text.remove_suffix(1);
  const std::size_t at = text.find(kPid);
  if (at == std::string_view::npos || at == 0 || at > 255) return std::nullopt;
  LockHolder h;
  for (const char c : text.substr(0, at)) {
    if (!host_char(c)) return std::nullopt;
  }
  h.host = std::string(text.substr(0, at));
  const std::string_view digits = text.substr(at + kPid.size());
  if (digits.empty() || digits.size() > 10 || digits.front() == '0') return std::nullopt;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    h.pid = h.pid * 10 + (c - '0');
  }
  if (h.pid > 2147483647) return std::nullopt;
  return h;
}

DirectoryLock::DirectoryLock(const Directory& dir, const std::string& what) {
  const std::string path = dir.path_of(kFileName);
  // O_NOFOLLOW: never a planted link; O_NONBLOCK: a FIFO planted there cannot stall the open.
  fd_ = ::openat(dir.fd(), kFileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw Error(path + ": cannot open the lock file: " +
                (err == ELOOP ? "it is a symbolic link (plait never follows links inside its own directories)"
                              : std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(path + ": cannot use the lock file: it is not a regular file");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const std::string holder = holder_description(fd_);
      ::close(fd_);
      fd_ = -1;
      throw DirectoryInUseError(dir.path() + ": in use by another plait run (" + holder + "); " + what +
                                " is written by one run at a time: wait for that run to end, or choose another "
                                "directory");
    }
    // ENOLCK, EOPNOTSUPP, ENOSYS, EINVAL: a file system without flock (Lustre -o noflock).
    warning_ = dir.path() + ": no lock taken (flock: " + std::strerror(err) +
               "): this file system does not support flock, so a second run writing this directory would not be "
               "detected";
    return;
  }
  // Ours now: say who holds it (a killed holder's text is replaced; its lock died with it).
  const std::string text = lock_holder_text({host_name(), static_cast<long long>(::getpid())});
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error(path + ": cannot write the lock's holder: " + std::strerror(err));
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

std::unique_ptr<DirectoryLock> wait_for_directory_lock(const Directory& dir, const std::string& what,
                                                       double timeout_seconds,
                                                       const std::function<void(const std::string&)>& on_wait) {
  const auto start = std::chrono::steady_clock::now();
  bool told = false;
  while (true) {
    try {
      return std::make_unique<DirectoryLock>(dir, what);
    } catch (const DirectoryInUseError& e) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited >= timeout_seconds) {
        char text[64];
        std::snprintf(text, sizeof text, "; waited %.1f s for it to be released", waited);
        throw DirectoryInUseError(e.what() + std::string(text));
      }
      if (!told && on_wait) on_wait(e.what());
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace plait
