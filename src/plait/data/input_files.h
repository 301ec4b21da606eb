#pragma once
// The files named by a list of inputs: each path is a file, or a directory read recursively in
// name order with symbolic links inside it skipped (so a directory of text can be named as it
// is installed). Throws InputError naming a path that does not exist.
#include <string>
#include <vector>

namespace plait::data {

std::vector<std::string> list_input_files(const std::vector<std::string>& paths);

// The inputs among `paths` that are symbolic links, each with the absolute path it resolves to
// (users link datasets: plait follows such a link, and says where it led).
struct InputLink {
  std::string given, resolved;
};
std::vector<InputLink> input_links(const std::vector<std::string>& paths);

}  // namespace plait::data
