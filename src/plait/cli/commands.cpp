#include "plait/cli/commands.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace plait::cli {
namespace {

std::vector<std::pair<int, CommandRegistrar>>& registry() {
  static std::vector<std::pair<int, CommandRegistrar>> r;
  return r;
}

}  // namespace

CommandRegistration::CommandRegistration(int order, CommandRegistrar registrar) {
  registry().emplace_back(order, registrar);
}

void register_all_commands(CLI::App& app) {
  auto r = registry();
  std::stable_sort(r.begin(), r.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& entry : r) entry.second(app);
}

CLI::App* command_group(CLI::App& app, const std::string& name, const std::string& description) {
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return sub;
  }
  CLI::App* group = app.add_subcommand(name, description);
  group->require_subcommand(1);
  return group;
}

}  // namespace plait::cli
