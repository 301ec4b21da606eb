#pragma once
// Stops the whole job because this rank failed.
//
// Prints "plait: error: rank R: <cause>" to stderr as one write, then MPI_Abort on
// MPI_COMM_WORLD: OpenMPI's mpirun kills every other rank (including ranks blocked in waits,
// whose yielding sleeps do not block signals) and exits with `exit_code`. Measured with
// OpenMPI 4.1 on this machine: the job ends well within a second of the call; docs/comm.md
// has the figures. Without MPI (not initialised or already finalized) it prints the line
// (without a rank when none is known) and exits the process with `exit_code`. Call it from the
// thread that makes MPI calls (MPI_THREAD_SERIALIZED, mpi_session.h).
#include <string>
#include <string_view>

namespace plait::comm {

[[noreturn]] void abort_job(std::string_view cause, int exit_code = 1) noexcept;

// "rank R: " when this process knows its rank (MPI running, or a launcher's environment),
// else "": the prefix abort_job puts before the cause.
std::string rank_prefix();

}  // namespace plait::comm
