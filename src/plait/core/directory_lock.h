#pragma once
// One run at a time per output directory (a checkpoint root, a data --out): an exclusive
// advisory flock(2) on "<dir>/.plait.lock", taken without waiting and held for the run's life.
// A second run is refused at once with one line naming the directory and the holder, whose host
// and pid the holder writes into the lock file after taking the lock (docs/checkpoints.md,
// "One run per directory").
//
// Why flock and not the file's existence: the kernel drops the lock when the holder's last
// descriptor closes, which includes every way a process dies (SIGKILL, a crash, the OOM killer),
// so a lock file left by a killed run never blocks the next one: the file stays, the lock does
// not. Nothing reads the file to decide; it only says who holds the lock.
//
// What it guarantees depends on the file system: on local ones, and on NFS (Linux emulates
// flock there with whole-file byte-range locks the server arbitrates, unless mounted with
// local_lock=flock/all or nolock), runs on any machine exclude each other; on Lustre mounted with
// -o localflock (or NFS with local_lock) only runs on the same machine do; where flock is not
// supported at all (Lustre -o noflock), no lock is taken and `warning()` says so.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "plait/core/directory.h"
#include "plait/core/error.h"

namespace plait {

// Who holds a lock, as its lock file says: "plait-lock host=<name> pid=<n>\n".
struct LockHolder {
  std::string host;
  long long pid = 0;
};
std::string lock_holder_text(const LockHolder& holder);
// The holder the file's text names, or nullopt when it is not exactly that form (empty while
// the holder is still writing it, or damaged). A host is 1-255 of [A-Za-z0-9._-]; pid 1..2^31-1.
std::optional<LockHolder> parse_lock_holder(std::string_view text);

// The directory is locked by another run.
class DirectoryInUseError : public Error {
 public:
  using Error::Error;
};

class DirectoryLock {
 public:
  static constexpr const char* kFileName = ".plait.lock";

  // Takes the lock of `dir`, or throws DirectoryInUseError:
  //   "<dir>: in use by another plait run (pid 4242 on host node17); <what> is written by one run
  //    at a time: wait for that run to end, or choose another directory"
  // `what` names the directory's role ("a checkpoint directory"). Error when the lock file
  // cannot be opened (a symbolic link or something other than a file at its name).
  DirectoryLock(const Directory& dir, const std::string& what);
  ~DirectoryLock();  // releases the lock (the file stays)
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  // "" when the lock is held; otherwise why none could be taken (the file system does not
  // support flock), for the caller to print as a warning.
  const std::string& warning() const { return warning_; }

 private:
  int fd_ = -1;
  std::string warning_;
};

// Takes the lock of `dir`, waiting while another run holds it (a supervisor relaunching a job
// whose last processes are still ending: plait launch): tries every 0.1 s for up to
// `timeout_seconds`; `on_wait` is told the first refusal's message once. A lock whose holder died
// is no obstacle (the kernel dropped it). Throws DirectoryInUseError when the time is up:
// "<the refusal>; waited 60.0 s for it to be released".
std::unique_ptr<DirectoryLock> wait_for_directory_lock(const Directory& dir, const std::string& what,
                                                       double timeout_seconds,
                                                       const std::function<void(const std::string&)>& on_wait = {});

}  // namespace plait
