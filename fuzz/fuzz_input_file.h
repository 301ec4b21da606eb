#pragma once
// Hands a fuzz input to code that reads files by path: the bytes go into an anonymous
// in-memory file (memfd_create) reached as /proc/self/fd/<n>, rewritten for each input, so the
// real file-reading code paths (open, fstat, pread, mmap) run without touching the disk.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace plait::fuzz {

class InputFile {
 public:
  InputFile() : fd_(::memfd_create("plait-fuzz", 0)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& write(const std::uint8_t* data, std::size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace plait::fuzz
