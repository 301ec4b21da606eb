#include "plait/checkpoint/checkpoint_scan.h"

#include <filesystem>

#include "plait/core/atomic_file.h"
#include "plait/core/directory.h"
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
  const Directory d = Directory::open(root);
  if (!dir) {
    d.remove_file("latest");
    d.sync();
    return;
  }
  const std::string name = fs::path(*dir).filename().string();
  if (checkpoint_dir_step(name) < 0 || d.kind_of(name) != Directory::Kind::kDirectory) {
    throw Error("checkpoint: " + *dir + " is not a checkpoint directory of " + root);
  }
  write_file_atomically(d, "latest", name + "\n");
}

std::string set_checkpoint_aside(const std::string& dir) {
  const fs::path from(dir);
  const Directory parent = Directory::open(from.parent_path().empty() ? "." : from.parent_path().string());
  const std::string name = from.filename().string();
  std::string to = name + ".aside";
  for (int n = 2; parent.kind_of(to) != Directory::Kind::kMissing; ++n) to = name + ".aside." + std::to_string(n);
  parent.rename(name, to, false);  // never over anything (a name taken meanwhile is an error)
  parent.sync();
  return parent.path_of(to);
}

}  // namespace plait::checkpoint
