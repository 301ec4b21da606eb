#pragma once
// Which rank of a job died, read from the job's stderr by a supervisor (plait launch, docs/runtime.md
// "Lost ranks: plait launch"). Two notices name it:
//
//   mpirun's   "mpirun noticed that process rank 3 with PID 4242 on node n0 exited on signal 9
//               (Killed)." (Open MPI 4; Open MPI 5's prterun says the same after "prterun"):
//               printed for every death by a signal, whatever killed the rank (the OOM killer, a
//               node agent, a failing device's driver), once mpirun has noticed it;
//   the rank's "plait: rank 3: step 5: killing itself with SIGKILL mid-step (injected failure)"
//               (failure_injection.h, kill_self): printed just before an injected kill, so a test
//               can time the failure from the moment it happens; it names the step too.
//
// mpirun's notice is the one to trust (it is what a real failure leaves); the announcement
// stands in where the launcher prints no such notice. A rank that ends with an error
// ("plait: error: rank 2: ...", MPI_Abort) is not lost: it is named by neither.
#include <cstdint>
#include <optional>
#include <string_view>

namespace plait::runtime {

struct LostRankNotice {
  enum class Source { kLauncher, kAnnouncement };
  Source source = Source::kLauncher;
  int rank = -1;
  int signal = 0;          // the launcher's notice: the signal; an announcement: SIGKILL (9)
  std::int64_t step = -1;  // an announcement: the step it names (the steps done before it); -1 unknown
};

// The notice one line of a job's stderr holds (without its newline), or nullopt.
std::optional<LostRankNotice> parse_lost_rank_notice(std::string_view line);

}  // namespace plait::runtime
