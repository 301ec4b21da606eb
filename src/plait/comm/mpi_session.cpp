#include "plait/comm/mpi_session.h"

#include <mpi.h>

#include <cstdlib>
#include <exception>

#include "plait/comm/mpi_check.h"
#include "plait/comm/mpi_communicator.h"
#include "plait/comm/stall_watchdog.h"
#include "plait/core/progress.h"
#include "plait/core/error.h"

namespace plait::comm {

bool launched_by_mpi_launcher() {
  // OpenMPI's mpirun, PMIx launchers (srun, prterun) and MPICH's hydra each set one of these.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

MpiSession::MpiSession(const BackoffPolicy& policy, ThreadLevel level)
    : launched_(launched_by_mpi_launcher()) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized != 0 || finalized != 0) {
    throw Error("MpiSession: MPI was already initialized in this process (one session per process)");
  }
  int provided = MPI_THREAD_SINGLE;
  const int wanted = level == ThreadLevel::kMultiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
  check_mpi(MPI_Init_thread(nullptr, nullptr, wanted, &provided), "MPI_Init_thread");
  level_ = provided >= MPI_THREAD_MULTIPLE ? ThreadLevel::kMultiple : ThreadLevel::kSerialized;
  try {
    if (provided < MPI_THREAD_SERIALIZED) {
      throw Error("MPI_Init_thread: the MPI library provides thread level " +
                  std::to_string(provided) + ", plait needs MPI_THREAD_SERIALIZED (" +
                  std::to_string(MPI_THREAD_SERIALIZED) + ")");
    }
    MPI_Comm world = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup(MPI_COMM_WORLD)");
    world_ = std::make_unique<MpiCommunicator>(world, policy);
    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
    hostname_.assign(name, static_cast<std::size_t>(length));
  } catch (...) {
    world_.reset();
    MPI_Finalize();
    throw;
  }
}

MpiSession::~MpiSession() {
  if (std::uncaught_exceptions() > 0) {
    watchdog_.reset();
    return;
  }
  try {
    // MPI_Finalize waits for the other ranks inside OpenMPI, spinning; a yielding barrier
    // first means early finishers sleep rather than take cores from ranks still working.
    // The watchdog still runs: a rank that never arrives must not hang the others here.
    note_progress("finished; waiting for every rank to finish");
    world_->barrier();
  } catch (...) {
    // Finalize below still runs; there is nobody to report to from a destructor.
  }
  watchdog_.reset();
  world_.reset();
  MPI_Finalize();
}

void MpiSession::start_watchdog(double timeout_s, const std::string& setting) {
  if (level_ != ThreadLevel::kMultiple) {
    throw Error("stall watchdog: needs MPI_THREAD_MULTIPLE, which this session did not get");
  }
  if (!watchdog_) watchdog_ = std::make_unique<StallWatchdog>(timeout_s, setting);
}

}  // namespace plait::comm
