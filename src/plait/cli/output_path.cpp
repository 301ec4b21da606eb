#include "plait/cli/output_path.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "plait/core/error.h"

namespace plait::cli {
namespace fs = std::filesystem;

void prepare_output_path(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(flag + ": " + path + " is a directory; expected a file name");
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return;
  if (fs::exists(parent, ec) && !fs::is_directory(parent, ec)) {
    throw Error(flag + ": cannot write " + path + ": " + parent.string() + " is a file, not a directory");
  }
  fs::create_directories(parent, ec);
  if (ec) throw Error(flag + ": cannot create the directory " + parent.string() + " for " + path + ": " + ec.message());
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    throw Error(flag + ": cannot write " + path + ": the directory " + parent.string() + " is not writable");
  }
}

}  // namespace plait::cli
