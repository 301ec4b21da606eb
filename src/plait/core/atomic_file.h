#pragma once
// Crash-safe, link-safe file writing. Bytes go to a temporary file beside the target, created
// under a name no one else chooses ("<name>.tmp-<16 random hex digits>", unique_name.h) with
// O_CREAT | O_EXCL | O_NOFOLLOW, so nothing planted in advance (a file, a symbolic link to any
// file on the machine) is ever opened or truncated; the file is then fsync'ed, closed and renamed
// to the target inside the same directory (rename(2) is atomic within a file system: a crash
// leaves the old file or the new one, never a mix), and the directory is fsync'ed so the rename is
// durable. Replace::kNever renames without replacing (renameat2 RENAME_NOREPLACE): a file of
// that name written meanwhile by anyone else is kept and the commit fails naming it.
// Replace::kYes replaces the entry itself: a symbolic link at the target is replaced, its target
// never written. An abandoned temporary file is removed by the destructor (on every error path),
// or left by a kill.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "plait/core/directory.h"

namespace plait {

class AtomicFile {
 public:
  enum class Replace { kYes, kNever };

  // The file `name` (a plain name) inside `dir`.
  AtomicFile(const Directory& dir, std::string name, Replace replace = Replace::kYes, mode_t mode = 0644);
  // A file the user named by path: its directory is opened following links (it is the user's),
  // the file name itself as above.
  explicit AtomicFile(const std::string& path, Replace replace = Replace::kYes);
  ~AtomicFile();  // not committed: removes the temporary file
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  // Overwrites bytes already written (a header whose count is known at the end); the CRC is
  // then that of what was written, not of the file: callers that patch compute their own.
  void write_at(std::uint64_t offset, std::span<const std::byte> bytes);
  // The CRC-32C of the file as it now lies on disk (read back: after write_at patches).
  std::uint32_t checksum_contents() const;
  // fsync, close, rename into place, fsync the directory.
  void commit();

  std::uint64_t bytes_written() const { return bytes_; }
  std::uint32_t crc32c() const { return crc_; }  // of everything write() wrote, in order
  std::string path() const { return dir_.path_of(name_); }
  const std::string& temporary_name() const { return tmp_; }

 private:
  void open_temporary(mode_t mode);
  Directory dir_;
  std::string name_;
  std::string tmp_;
  Replace replace_;
  int fd_ = -1;
  std::uint64_t bytes_ = 0;
  std::uint32_t crc_ = 0;
};

// True for the temporary names AtomicFile makes ("<name>.tmp-<16 hex digits>").
bool is_temporary_name(std::string_view name);

void write_file_atomically(const Directory& dir, const std::string& name, std::string_view text,
                           AtomicFile::Replace replace = AtomicFile::Replace::kYes);
void write_file_atomically(const std::string& path, std::string_view text);

// fsync a directory named by path, so entries created, renamed or removed in it are durable.
void fsync_directory(const std::string& dir);

}  // namespace plait
