#include "plait/comm/abort_job.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace plait::comm {
namespace {

bool mpi_running() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

}  // namespace

std::string rank_prefix() {
  if (mpi_running()) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return "rank " + std::to_string(rank) + ": ";
  }
  // Before MPI_Init a launched process still knows its rank from the launcher.
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* value = std::getenv(name)) return "rank " + std::string(value) + ": ";
  }
  return "";
}

void abort_job(std::string_view cause, int exit_code) noexcept {
  std::fflush(stdout);
  try {
    const std::string line = "plait: error: " + rank_prefix() + std::string(cause) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  } catch (...) {
    // Out of memory while formatting: the cause alone still says what happened.
    std::fputs("plait: error: ", stderr);
    std::fwrite(cause.data(), 1, cause.size(), stderr);
    std::fputc('\n', stderr);
  }
  std::fflush(stderr);
  if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace plait::comm
