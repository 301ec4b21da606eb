#include "plait/checkpoint/checkpoint_scan.h"

#include <filesystem>
#include <system_error>

#include "plait/checkpoint/atomic_file.h"
#include "plait/checkpoint/checkpoint_store.h"
#include "plait/core/error.h"

namespace plait::checkpoint {
namespace fs = std::filesystem;

CheckpointScan scan_checkpoints(const std::string& root,
                                const std::function<void(const std::string& dir)>& verify) {
  CheckpointScan scan;
  try {
    scan.latest = latest_checkpoint(root);
  } catch (const Error& e) {
    scan.latest_problem = e.what();
  }
  const std::vector<std::string> all = list_checkpoints(root);
  scan.complete = all.size();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      if (verify) {
        verify(*it);
      } else {
        const CheckpointReader reader(*it);
      }
      scan.found = *it;
      break;
    } catch (const Error& e) {
      scan.skipped.push_back({*it, e.what()});
    }
  }
  return scan;
}

void point_latest(const std::string& root, const std::optional<std::string>& dir) {
  const fs::path latest = fs::path(root) / "latest";
  if (!dir) {
    std::error_code ec;
    fs::remove(latest, ec);
    if (ec) throw Error("checkpoint: cannot remove " + latest.string() + ": " + ec.message());
    fsync_directory(root);
    return;
  }
  const std::string name = fs::path(*dir).filename().string();
  if (checkpoint_dir_step(name) < 0 || !fs::is_directory(fs::path(root) / name)) {
    throw Error("checkpoint: " + *dir + " is not a checkpoint directory of " + root);
  }
  write_file_atomically(latest.string(), name + "\n");
}

std::string set_checkpoint_aside(const std::string& dir) {
  const fs::path from(dir);
  fs::path to = from.string() + ".aside";
  for (int n = 2; fs::exists(to); ++n) to = from.string() + ".aside." + std::to_string(n);
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw Error("checkpoint: cannot move " + from.string() + " aside to " + to.string() + ": " + ec.message());
  fsync_directory(from.parent_path().empty() ? "." : from.parent_path().string());
  return to.string();
}

}  // namespace plait::checkpoint
