#pragma once
// Turns an MPI return code into a plait::Error that says which operation failed and why.
// plait sets MPI_ERRORS_RETURN on its communicators so that failures come back here (and reach
// the CLI's abort handler with context) instead of OpenMPI's generic abort.
#include <string>

namespace plait::comm {

// Throws plait::Error("<what>: MPI error: <MPI's description>") unless code is MPI_SUCCESS.
void check_mpi(int code, const std::string& what);

}  // namespace plait::comm
