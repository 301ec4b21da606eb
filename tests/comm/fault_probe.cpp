// comm_fault_probe: a small multi-rank job in which one rank fails mid-exchange, to check that
// the whole job stops promptly, non-zero, naming the rank and the cause (issue: "Failure").
//
//   mpirun -np N comm_fault_probe --fail-rank R --how throw|oom|sigkill|exit [--session-in-try]
//
// Every rank runs steps of a ring exchange plus a world reduction. At step 3 rank R sleeps a
// little, so that its peers are surely blocked waiting for it (receives from R and the
// reduction R has not joined), and then fails:
//   throw    throws plait::Error (as a bad input or a failed check would)
//   oom      allocates past a MemoryTracker capacity (OutOfMemoryError)
//   sigkill  kills itself with SIGKILL (as the kernel's OOM killer would)
//   exit     calls std::exit(0) without finalizing MPI (as a stray exit() in a library would)
// main() handles errors the way the plait CLI does: the session outside the try, abort_job
// in the catch. --session-in-try constructs the session inside the try instead, so the failing
// rank unwinds through ~MpiSession before it reaches abort_job: the session must then neither
// wait for its peers nor finalize, or the job would hang.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "plait/comm/abort_job.h"
#include "plait/comm/mpi_session.h"
#include "plait/core/buffer.h"
#include "plait/core/error.h"

namespace {

constexpr int kFailingStep = 3;
constexpr int kSteps = 6;

void fail(int rank, const std::string& how) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // CLOCK_MONOTONIC (steady_clock on Linux) is shared by all processes of a machine, so a
  // script can subtract this from the moment mpirun exits: the time the failure took to stop
  // the job, without mpirun's start-up.
  const double now = std::chrono::duration<double>(
                         std::chrono::steady_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "comm_fault_probe: rank %d fails now (%s, monotonic clock %.6f s)\n", rank,
               how.c_str(), now);
  if (how == "throw") {
    throw plait::Error("step " + std::to_string(kFailingStep) +
                       ": deliberate failure (comm_fault_probe --how throw)");
  }
  if (how == "oom") {
    plait::MemoryTracker tracker(std::size_t{1} << 20);
    plait::FloatBuffer activations(tracker, plait::MemoryCategory::kActivations, 1 << 20);
  }
  if (how == "sigkill") raise(SIGKILL);
  if (how == "exit") std::exit(0);
}

void run(plait::comm::Communicator& world, int fail_rank, const std::string& how) {
  const int n = world.size();
  const int me = world.rank();
  std::vector<float> out(1024), in(1024), gradients(4096);
  for (int step = 0; step < kSteps; ++step) {
    if (step == kFailingStep && me == fail_rank) fail(me, how);
    for (float& v : out) v = static_cast<float>(me + step);
    std::vector<plait::comm::Request> pending;
    pending.push_back(world.irecv(in, (me + n - 1) % n, step));
    pending.push_back(world.isend(out, (me + 1) % n, step));
    pending.push_back(world.iallreduce(gradients, plait::comm::ReduceOp::kSum));
    plait::comm::wait_all(pending);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int fail_rank = -1;
  std::string how;
  bool session_in_try = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--session-in-try") session_in_try = true;
    else if (flag == "--fail-rank" && i + 1 < argc) fail_rank = std::atoi(argv[++i]);
    else if (flag == "--how" && i + 1 < argc) how = argv[++i];
  }
  if (fail_rank < 0 || (how != "throw" && how != "oom" && how != "sigkill" && how != "exit")) {
    std::fprintf(stderr, "usage: comm_fault_probe --fail-rank R --how throw|oom|sigkill|exit "
                         "[--session-in-try]\n");
    return 2;
  }
  if (session_in_try) {
    try {
      plait::comm::MpiSession session;
      run(session.world(), fail_rank, how);
    } catch (const std::exception& e) {
      plait::comm::abort_job(e.what());
    }
    return 0;
  }
  plait::comm::MpiSession session;
  try {
    run(session.world(), fail_rank, how);
  } catch (const std::exception& e) {
    plait::comm::abort_job(e.what());
  }
  return 0;
}
