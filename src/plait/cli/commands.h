#pragma once
// Each subcommand lives in its own file (<name>_command.cpp) and registers itself with a
// static CommandRegistration, so adding a subcommand never touches another subcommand's file.
#include <string>

#include <CLI/CLI.hpp>

namespace plait::cli {

using CommandRegistrar = void (*)(CLI::App& app);

// `order` sorts the subcommands in --help (lower first).
struct CommandRegistration {
  CommandRegistration(int order, CommandRegistrar registrar);
};

// Thrown by a command that ends with an exit status of its own rather than an error (plait
// train stopped by a signal after saving: runtime::kPreemptedExitStatus); main returns it.
struct ExitStatus {
  int status = 0;
};

// Adds every registered subcommand to the application, in order.
void register_all_commands(CLI::App& app);

// The group subcommand `name` (e.g. "bench", "data"), created on first use, so that files like
// bench_engine_command.cpp and bench_sim_command.cpp can each add one child to it.
CLI::App* command_group(CLI::App& app, const std::string& name, const std::string& description);

}  // namespace plait::cli
