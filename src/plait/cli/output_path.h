#pragma once
// Files a command writes at its end (timelines, metrics): checked when it starts, so a typo in
// a directory costs nothing rather than the whole run.
#include <string>

namespace plait::cli {

// Creates the parent directory of `path` if it is missing; plait::Error naming `flag` when the
// parent cannot be created or written, or `path` is a directory.
void prepare_output_path(const std::string& flag, const std::string& path);

}  // namespace plait::cli
