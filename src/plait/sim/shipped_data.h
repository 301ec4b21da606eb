#pragma once
// Files plait ships under share/ (device profiles, ...). Found in $PLAIT_SHARE_DIR if set, else
// in the source tree's share/ (compiled in).
#include <string>

namespace plait::sim {

// The path of share/<relative>; throws plait::Error if the file does not exist.
std::string shipped_data_path(const std::string& relative);

}  // namespace plait::sim
