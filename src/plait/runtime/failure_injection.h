#pragma once
// Deliberate failures for the fault tests (plait train's hidden --inject-failure flag): each names
// a rank, a step and what goes wrong there, so a test can check that the job stops within
// seconds naming the rank, that a kill in the middle of a checkpoint leaves the previous one
// loadable, and that a non-finite loss or gradient is caught (docs/runtime.md, "Failures").
#include <cstdint>
#include <string>

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
  };
  int rank = -1;  // -1: none
  std::int64_t step = 0;
  Kind kind = Kind::kThrow;

  bool at(int r, std::int64_t s, Kind k) const { return rank == r && step == s && kind == k; }
};

// "R:S" (throw) or "R:S:<kind>" with kind kill | nan-loss | nan-grad | kill-in-save | kill-in-eval
// | kill-in-commit | stop | hang;
// "" is none. Throws plait::Error naming the flag otherwise.
FailureInjection parse_failure_injection(const std::string& text, const std::string& flag);

// Announces the injected kill on stderr (so a test can time the failure), then SIGKILLs the
// process, which dies without a word, as under the kernel's OOM killer.
[[noreturn]] void kill_self(int rank, std::int64_t step, const char* where);

// Announces it, then SIGSTOPs the process (it resumes only on SIGCONT).
void stop_self(int rank, std::int64_t step);
// Announces it, then sleeps forever.
[[noreturn]] void hang_self(int rank, std::int64_t step);

}  // namespace plait::runtime
