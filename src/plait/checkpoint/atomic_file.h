#pragma once
// Crash-safe file replacement: bytes go to a temporary file beside the target, which is then
// fsync'ed, closed and renamed over the target, and the directory is fsync'ed so the rename
// itself is durable (POSIX rename(2) is atomic within a file system). A crash at any point
// leaves either the old file or the new one under the target name, never a mix; an abandoned
// temporary file ("<name>.tmp-<pid>") is removed by the destructor, or left by a kill.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace plait::checkpoint {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // not committed: removes the temporary file
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  // fsync, close, rename over the target, fsync the directory.
  void commit();

  std::uint64_t bytes_written() const { return bytes_; }
  std::uint32_t crc32c() const { return crc_; }  // of everything written
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  std::uint64_t bytes_ = 0;
  std::uint32_t crc_ = 0;
};

// fsync a directory, so entries created, renamed or removed in it are durable.
void fsync_directory(const std::string& dir);

void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace plait::checkpoint
