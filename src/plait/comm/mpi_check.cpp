#include "plait/comm/mpi_check.h"

#include <mpi.h>

#include "plait/core/error.h"

namespace plait::comm {

void check_mpi(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    throw Error(what + ": MPI error code " + std::to_string(code));
  }
  throw Error(what + ": MPI error: " + std::string(text, static_cast<std::size_t>(length)));
}

}  // namespace plait::comm
