#include "plait/data/input_files.h"

#include <algorithm>
#include <filesystem>

#include "plait/core/error.h"

namespace plait::data {
namespace fs = std::filesystem;

std::vector<std::string> list_input_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st)) throw InputError(p, "(file)", "no such file or directory");
    if (!fs::is_directory(st)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(p)) {
      if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

std::vector<InputLink> input_links(const std::vector<std::string>& paths) {
  std::vector<InputLink> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::is_symlink(p, ec)) continue;
    const fs::path resolved = fs::canonical(p, ec);
    out.push_back({p, ec ? std::string("(a dangling link)") : resolved.string()});
  }
  return out;
}

}  // namespace plait::data
