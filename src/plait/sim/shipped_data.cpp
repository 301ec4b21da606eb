#include "plait/sim/shipped_data.h"

#include <cstdlib>
#include <filesystem>

#include "plait/core/error.h"

namespace plait::sim {

std::string shipped_data_path(const std::string& relative) {
  const char* env = std::getenv("PLAIT_SHARE_DIR");
  const std::string root = env && *env ? env : PLAIT_SHARE_DIR_DEFAULT;
  const std::string path = root + "/" + relative;
  if (!std::filesystem::exists(path)) {
    throw Error(path + ": shipped data file not found (set PLAIT_SHARE_DIR to plait's share/ folder)");
  }
  return path;
}

}  // namespace plait::sim
