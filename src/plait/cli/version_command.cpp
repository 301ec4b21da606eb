// `plait version`: what this build links against, for bug reports.
#include <cstdio>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "plait/cli/commands.h"

namespace plait::cli {

namespace {

void register_version(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print plait's version and the libraries it uses");
  cmd->callback([] {
    std::printf("plait 0.1.0 (C++%ld)\n", __cplusplus / 100 % 100);
    std::printf("MPI %d.%d, nlohmann_json %d.%d.%d\n", MPI_VERSION, MPI_SUBVERSION,
                NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                NLOHMANN_JSON_VERSION_PATCH);
  });
}

const CommandRegistration kRegistration(100, register_version);

}  // namespace
}  // namespace plait::cli
