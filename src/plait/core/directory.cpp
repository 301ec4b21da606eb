#include "plait/core/directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "plait/core/error.h"

namespace plait {
namespace {

constexpr int kOpenDirectory = O_RDONLY | O_DIRECTORY | O_CLOEXEC;

std::string why(int err) { return std::strerror(err); }

// Why `name` inside `dir` cannot be used as plait's own directory.
[[noreturn]] void refuse_child(const Directory& dir, const std::string& name, int err) {
  const Directory::Kind kind = dir.kind_of(name);
  std::string problem;
  if (kind == Directory::Kind::kLink) {
    problem = "is a symbolic link; plait never follows links inside its own directories (remove it)";
  } else if (kind == Directory::Kind::kMissing) {
    problem = "does not exist";
  } else if (kind != Directory::Kind::kDirectory) {
    problem = "is not a directory";
  } else {
    problem = "cannot be opened: " + why(err);
  }
  throw Error(dir.path_of(name) + ": " + problem);
}

}  // namespace

void check_plain_name(const std::string& name, const std::string& what) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw Error(what + ": \"" + name + "\" is not a plain file name");
  }
}

Directory Directory::open(const std::string& path) {
  const int fd = ::open(path.c_str(), kOpenDirectory);
  if (fd < 0) {
    const int err = errno;
    throw InputError(path, "(directory)",
                     err == ENOENT ? "does not exist" : err == ENOTDIR ? "is not a directory" : "cannot be opened: " + why(err));
  }
  return Directory(fd, path);
}

Directory Directory::create(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
    throw InputError(what, path, "is a file; expected a directory");
  }
  std::filesystem::create_directories(path, ec);
  if (ec) throw InputError(what, path, "cannot create the directory: " + ec.message());
  return open(path);
}

Directory::Directory(const Directory& other) : path_(other.path_) {
  if (other.fd_ >= 0) {
    fd_ = ::fcntl(other.fd_, F_DUPFD_CLOEXEC, 0);
    if (fd_ < 0) throw Error(path_ + ": cannot duplicate the directory's descriptor: " + why(errno));
  }
}

Directory& Directory::operator=(const Directory& other) {
  if (this != &other) *this = Directory(other);
  return *this;
}

Directory::Directory(Directory&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

Directory& Directory::operator=(Directory&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

Directory::~Directory() {
  if (fd_ >= 0) ::close(fd_);
}

Directory::Kind Directory::kind_of(const std::string& name) const {
  struct stat st {};
  if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Kind::kMissing;
    throw Error(path_of(name) + ": cannot inspect it: " + why(errno));
  }
  if (S_ISLNK(st.st_mode)) return Kind::kLink;
  if (S_ISDIR(st.st_mode)) return Kind::kDirectory;
  if (S_ISREG(st.st_mode)) return Kind::kFile;
  return Kind::kOther;
}

Directory Directory::child(const std::string& name) const {
  check_plain_name(name, path_);
  const int fd = ::openat(fd_, name.c_str(), kOpenDirectory | O_NOFOLLOW);
  if (fd < 0) refuse_child(*this, name, errno);
  return Directory(fd, path_of(name));
}

Directory Directory::make_child(const std::string& name) const {
  check_plain_name(name, path_);
  if (::mkdirat(fd_, name.c_str(), 0755) != 0) {
    const int err = errno;
    if (err == EEXIST) {
      throw Error(path_of(name) + ": already exists" +
                  (kind_of(name) == Kind::kLink ? " (a symbolic link; plait never follows links inside its own directories)" : ""));
    }
    throw Error(path_of(name) + ": cannot create the directory: " + why(err));
  }
  return child(name);
}

int Directory::open_file(const std::string& name) const {
  check_plain_name(name, path_);
  const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw InputError(path_of(name), "(file)",
                     err == ELOOP ? "is a symbolic link; plait never follows links inside its own directories"
                     : err == ENOENT ? "does not exist"
                                     : "cannot open the file: " + why(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path_of(name), "(file)", "not a regular file");
  }
  return fd;
}

std::string Directory::read_file(const std::string& name, std::size_t limit) const {
  const int fd = open_file(name);
  struct stat st {};
  ::fstat(fd, &st);
  if (static_cast<std::uint64_t>(st.st_size) > limit) {
    ::close(fd);
    throw InputError(path_of(name), "(file)",
                     std::to_string(st.st_size) + " bytes; expected at most " + std::to_string(limit));
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw InputError(path_of(name), "(file)", "read error: " + why(err));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(done);
  return text;
}

std::vector<std::string> Directory::names() const {
  const int fd = ::openat(fd_, ".", kOpenDirectory);
  DIR* d = fd < 0 ? nullptr : ::fdopendir(fd);
  if (!d) {
    if (fd >= 0) ::close(fd);
    throw Error(path_ + ": cannot list the directory: " + why(errno));
  }
  std::vector<std::string> out;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void Directory::rename(const std::string& from, const Directory& target, const std::string& to, bool replace) const {
  check_plain_name(from, path_);
  check_plain_name(to, target.path_);
  if (::renameat2(fd_, from.c_str(), target.fd_, to.c_str(), replace ? 0 : RENAME_NOREPLACE) == 0) return;
  int err = errno;
  if (!replace && err == EINVAL) {
    // A file system without RENAME_NOREPLACE (some network ones): linkat never replaces a file;
    // a directory is checked first (a window only another writer of this tree could use).
    if (kind_of(from) == Kind::kFile) {
      if (::linkat(fd_, from.c_str(), target.fd_, to.c_str(), 0) == 0) {
        ::unlinkat(fd_, from.c_str(), 0);
        return;
      }
      err = errno;
    } else if (target.kind_of(to) != Kind::kMissing) {
      err = EEXIST;
    } else if (::renameat(fd_, from.c_str(), target.fd_, to.c_str()) == 0) {
      return;
    } else {
      err = errno;
    }
  }
  if (err == EEXIST || err == ENOTEMPTY) {
    throw Error(target.path_of(to) + ": already exists; refusing to replace it (another run may have written it)");
  }
  throw Error(path_of(from) + ": cannot rename it to " + target.path_of(to) + ": " + why(err));
}

void Directory::remove_file(const std::string& name) const {
  check_plain_name(name, path_);
  if (::unlinkat(fd_, name.c_str(), 0) != 0 && errno != ENOENT) {
    throw Error(path_of(name) + ": cannot remove it: " + why(errno));
  }
}

void Directory::remove_tree(const std::string& name) const {
  const Kind kind = kind_of(name);
  if (kind == Kind::kMissing) return;
  if (kind != Kind::kDirectory) return remove_file(name);
  const Directory inside = child(name);
  for (const std::string& n : inside.names()) inside.remove_tree(n);
  if (::unlinkat(fd_, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    throw Error(path_of(name) + ": cannot remove the directory: " + why(errno));
  }
}

void Directory::sync() const {
  if (::fsync(fd_) != 0) throw Error(path_ + ": cannot fsync the directory: " + why(errno));
}

}  // namespace plait
