#pragma once
// A directory held open by file descriptor, so that everything plait creates, renames or removes
// inside its own output trees (checkpoint roots, step and staging directories, data --out) is
// addressed relative to a directory it opened itself, never through a path that can be re-pointed
// between a check and a use. The directory a user names may be a symbolic link (users link
// scratch space): open() follows it. Everything below it is plait's own: child(), make_child()
// and the file functions never follow a link (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), so a link planted
// at a step directory, a staging directory or a file name is refused, and its target is never
// written, renamed or removed.
#include <cstddef>
#include <string>
#include <vector>

namespace plait {

class Directory {
 public:
  enum class Kind { kMissing, kFile, kDirectory, kLink, kOther };

  // Opens a directory the user named (links followed); InputError naming it otherwise.
  static Directory open(const std::string& path);
  // Creates the directory the user named, and its missing parents, then opens it.
  // `what` names it in errors ("checkpoint.dir", "--out").
  static Directory create(const std::string& path, const std::string& what);

  Directory(const Directory& other);
  Directory& operator=(const Directory& other);
  Directory(Directory&& other) noexcept;
  Directory& operator=(Directory&& other) noexcept;
  ~Directory();

  int fd() const { return fd_; }
  // The path it was opened by (for messages), "<parent>/<name>" for children.
  const std::string& path() const { return path_; }
  std::string path_of(const std::string& name) const { return path_ + "/" + name; }

  // The entry `name` (a plain name: no '/', not "." or ".."), never following a link.
  Kind kind_of(const std::string& name) const;
  // Opens the directory `name` inside; Error when it is missing, a link or not a directory.
  Directory child(const std::string& name) const;
  // Creates the directory `name` inside (mode 0755 less the umask) and opens it; Error when
  // anything, a link included, already has that name.
  Directory make_child(const std::string& name) const;
  // Opens the regular file `name` inside for reading, never through a link (O_NOFOLLOW; a FIFO
  // or device there is refused before any read); the caller closes the descriptor. InputError
  // naming the file otherwise.
  int open_file(const std::string& name) const;
  // The whole of the regular file `name` inside, as open_file() opens it; InputError when it
  // has more than `limit` bytes.
  std::string read_file(const std::string& name, std::size_t limit) const;
  // The names inside, sorted ("." and ".." left out).
  std::vector<std::string> names() const;

  // Renames `from` to `to`, both inside this directory. With `replace` false, an existing `to`
  // is never replaced (renameat2 RENAME_NOREPLACE; where a file system lacks it, a hard link
  // and unlink for files): Error naming it instead.
  void rename(const std::string& from, const std::string& to, bool replace) const { rename(from, *this, to, replace); }
  // The same into another directory of the same file system.
  void rename(const std::string& from, const Directory& target, const std::string& to, bool replace) const;
  // Removes the file or link `name` (a missing one is fine).
  void remove_file(const std::string& name) const;
  // Removes `name` and, if it is a directory, everything inside it, without following a link
  // anywhere (a link is removed, its target untouched). A missing one is fine.
  void remove_tree(const std::string& name) const;
  // fsync: entries created, renamed or removed inside become durable.
  void sync() const;

 private:
  Directory(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// Checks `name` is a plain name for an entry of a directory; Error naming `what` otherwise.
void check_plain_name(const std::string& name, const std::string& what);

}  // namespace plait
