#pragma once
// Finding the checkpoint to resume from in a checkpoint root, and the repairs that go with it
// (docs/checkpoints.md, "Resuming"). `latest` is a hint, not the truth: a save stopped between
// renaming step_N.partial/ to step_N/ and rewriting `latest` (a kill, a full disk) leaves a
// complete step_N/ that `latest` does not name, and a file can rot after it was written. So a
// resume scans the complete checkpoints newest first and takes the first that verifies.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace plait::checkpoint {

struct CheckpointScan {
  struct Skipped {
    std::string dir;
    std::string why;  // the verification error, one line
  };
  // The newest complete checkpoint that verified; nullopt when none did (or there is none).
  std::optional<std::string> found;
  // Newer complete checkpoints that did not verify, newest first.
  std::vector<Skipped> skipped;
  // The directory `latest` names, when it names an existing one; `latest_problem` otherwise
  // says why not ("" when there is no `latest`, as before a first save).
  std::optional<std::string> latest;
  std::string latest_problem;
  // How many complete checkpoints the root holds.
  std::size_t complete = 0;
};

// Scans `root` (which may not exist: nothing found). `verify` opens one checkpoint directory
// and throws plait::Error saying why it cannot be resumed from; the default verifies what
// CheckpointReader verifies.
CheckpointScan scan_checkpoints(const std::string& root,
                                const std::function<void(const std::string& dir)>& verify = {});

// Makes `latest` name `dir` (a checkpoint directly under root), atomically; with nullopt it
// removes `latest` (nothing complete is left to name).
void point_latest(const std::string& root, const std::optional<std::string>& dir);

// Moves a checkpoint out of the way without deleting anything: <root>/step_N becomes
// <root>/step_N.aside (or step_N.aside.2, .3, ... when taken). Listing, `latest`, resuming and
// keep_last pruning ignore such directories; their contents stay exactly as they were. Returns
// the new path.
std::string set_checkpoint_aside(const std::string& dir);

}  // namespace plait::checkpoint
