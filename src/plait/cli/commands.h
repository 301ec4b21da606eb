#pragma once
// Each subcommand lives in its own file (<name>_command.cpp) and registers itself here.
#include <CLI/CLI.hpp>

namespace plait::cli {

void register_version_command(CLI::App& app);

}  // namespace plait::cli
