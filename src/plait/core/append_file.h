#pragma once
// A log a run appends lines to (plait train --metrics), across runs that resume one another.
// Opened with O_APPEND | O_CREAT | O_NOFOLLOW: a symbolic link at the path is refused, never
// written through, and something other than a regular file there (a FIFO, a device) is refused
// before anything is written.
#include <string>
#include <string_view>

namespace plait {

class AppendFile {
 public:
  // InputError naming the path when it cannot be opened as said.
  explicit AppendFile(const std::string& path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  // One write(2) of the whole text (O_APPEND: lines of concurrent writers do not interleave).
  void write(std::string_view text);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace plait
