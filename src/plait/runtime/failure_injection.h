#pragma once
// Deliberate failures for the fault tests (plait train's hidden --inject-failure flag): each names
// a rank, a step and what goes wrong there, so a test can check that the job stops within
// seconds naming the rank, that a kill in the middle of a checkpoint leaves the previous one
// loadable, and that a non-finite loss or gradient is caught (docs/runtime.md, "Failures").
// Several may be given at once ("1:3:sigterm,0:4:kill-in-save": a stop signal, then a kill
// during the save it asks for). A rank is an MPI rank, the one mpirun names: with tensor
// parallelism one process of its schedule rank's TP group (PipelinePlan::job_rank), which is what
// a lost device is; a NaN loss there counts only on TP rank 0, the one that reports the loss.
#include <cstdint>
#include <string>
#include <vector>

namespace plait::runtime {

struct FailureInjection {
  enum class Kind {
    kThrow,        // an exception before the middle compute action of the step
    kKill,         // SIGKILL there
    kNanLoss,      // the rank's first head-stage unit of the step reports a NaN loss
    kNanGradient,  // a NaN in the rank's first chunk's first gradient before its reduction
    kKillInSave,   // SIGKILL after writing this rank's files of the checkpoint of `step`, before
                   // the coordinator commits it
    kKillInEval,   // SIGKILL in the middle of the validation run at training step `step`
    kKillInCommit, // SIGKILL of rank 0 while committing the checkpoint of `step`: after renaming
                   // step_N.partial/ to step_N/, before rewriting `latest`
    kStop,         // SIGSTOP before the middle compute action of the step: the process stays,
                   // stopped, and sends nothing (the stall watchdog must end the job)
    kHang,         // the rank sleeps forever there, alive (its watchdog thread still reports):
                   // a rank stuck outside any wait, as in a deadlock
    kSigterm,      // the rank sends itself SIGTERM there (a real signal, to its real handler)
    kSigusr1,      // the same with SIGUSR1
    kSlow,         // an emulated straggler: from this step on the rank's emulated device runs
                   // `factor` times slower than planned (its compute padded by sleeping,
                   // DeviceEmulator); factor 1 restores the planned speed
    kLink,         // an emulated link fault: from this step on every message the rank sends
                   // (stage messages, moved layers) takes latency + bytes / bandwidth longer
                   // (LinkEmulator, the sender sleeping); bandwidth 0 restores the host's link
  };
  struct Point {
    int rank = -1;
    std::int64_t step = 0;
    Kind kind = Kind::kThrow;
    double factor = 1;  // kSlow's
    double bytes_per_second = 0, latency_seconds = 0;  // kLink's
  };
  std::vector<Point> points;  // empty: none

  FailureInjection() = default;
  FailureInjection(int rank, std::int64_t step, Kind kind, double factor = 1) : points{{rank, step, kind, factor}} {}
  bool at(int r, std::int64_t s, Kind k) const { return find(r, s, k) != nullptr; }
  const Point* find(int r, std::int64_t s, Kind k) const {
    for (const Point& p : points) {
      if (p.rank == r && p.step == s && p.kind == k) return &p;
    }
    return nullptr;
  }
};

// A comma-separated list of "R:S" (throw) or "R:S:<kind>" with kind kill | nan-loss | nan-grad |
// kill-in-save | kill-in-eval | kill-in-commit | stop | hang | sigterm | sigusr1 | slow=F (F a
// factor in [1, 1000]: "1:10:slow=3" makes rank 1 three times slower from step 10 on) |
// link=B[@L] (B bytes per second, > 0, or 0 to end the fault; L seconds of latency, default 0:
// "1:10:link=2e6@0.001" gives rank 1's sends a 2 MB/s link with 1 ms latency from step 10 on);
// "" is none. Throws plait::Error naming the flag otherwise.
FailureInjection parse_failure_injection(const std::string& text, const std::string& flag);

// Announces the injected kill on stderr (so a test can time the failure), then SIGKILLs the
// process, which dies without a word, as under the kernel's OOM killer.
[[noreturn]] void kill_self(int rank, std::int64_t step, const char* where);

// Announces it, then SIGSTOPs the process (it resumes only on SIGCONT).
void stop_self(int rank, std::int64_t step);
// Announces it, then sleeps forever.
[[noreturn]] void hang_self(int rank, std::int64_t step);
// Announces it, then raises `signal` (SIGTERM, SIGUSR1) in this process.
void signal_self(int rank, std::int64_t step, int signal);

}  // namespace plait::runtime
