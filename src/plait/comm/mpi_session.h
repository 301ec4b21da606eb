#pragma once
// MPI for the lifetime of one process: MPI_Init_thread on construction, MPI_Finalize on
// destruction, and the job-wide communicator.
//
// Thread level: MPI_THREAD_SERIALIZED by default. The engine's OpenMP and BLAS threads never
// call MPI; SERIALIZED (any one thread at a time) still lets the runtime move progress polling
// onto a helper thread guarded by a mutex, which FUNNELED (main thread only) would forbid, and
// costs nothing over FUNNELED in OpenMPI, whereas MPI_THREAD_MULTIPLE adds locking to every call.
// A session that runs the stall watchdog (stall_watchdog.h), whose thread talks to the other
// ranks while the main thread waits on them, asks for MPI_THREAD_MULTIPLE.
//
// Started without a launcher (`plait train ...` rather than `mpirun -np N plait train ...`),
// MPI initialises as a singleton: a world of one rank, so the same code runs unchanged.
//
// Errors: construct the session outside the try block that catches errors and call
// abort_job (abort_job.h) from the catch, so that no rank ever unwinds into MPI_Finalize
// while its peers wait for it.
#include <memory>
#include <string>

#include "plait/comm/backoff.h"
#include "plait/comm/communicator.h"

namespace plait::comm {

enum class ThreadLevel { kSerialized, kMultiple };

class StallWatchdog;

class MpiSession {
 public:
  // Throws plait::Error if MPI was initialised before in this process or cannot provide
  // MPI_THREAD_SERIALIZED. kMultiple asks for MPI_THREAD_MULTIPLE (thread_level() says whether
  // the library gave it).
  explicit MpiSession(const BackoffPolicy& policy = {}, ThreadLevel level = ThreadLevel::kSerialized);
  // Waits (yielding) for every rank to arrive, stops the watchdog, then finalizes. While an
  // exception is propagating it only stops the watchdog (the rest would wait for peers): call
  // abort_job instead.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  // The host this rank runs on (MPI_Get_processor_name).
  const std::string& hostname() const { return hostname_; }
  // True when a launcher (mpirun, srun, hydra) started this process, false for a singleton.
  bool launched_by_mpirun() const { return launched_; }
  // All ranks of the job: a duplicate of MPI_COMM_WORLD, so plait's error handler and
  // messages stay apart from any other library's.
  Communicator& world() { return *world_; }
  ThreadLevel thread_level() const { return level_; }

  // Collective: starts the stall watchdog (stall_watchdog.h) for the rest of the session,
  // including the barrier before MPI_Finalize; `setting` names the timeout's source in its
  // report. Requires thread_level() kMultiple.
  void start_watchdog(double timeout_s, const std::string& setting);

 private:
  std::unique_ptr<Communicator> world_;
  std::unique_ptr<StallWatchdog> watchdog_;
  ThreadLevel level_ = ThreadLevel::kSerialized;
  std::string hostname_;
  bool launched_ = false;
};

// True when this process was started by an MPI launcher (its environment names a rank).
bool launched_by_mpi_launcher();

}  // namespace plait::comm
