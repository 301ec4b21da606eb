// Lost-rank notices (lost_rank.h): mpirun's "process rank R ... exited on signal S" line (Open MPI
// 4's mpirun, Open MPI 5's prterun) and plait's own announcement of an injected kill name the
// rank; an error, an abort or a stop are not lost ranks.
#include "plait/runtime/lost_rank.h"

#include <gtest/gtest.h>

namespace plait::runtime {
namespace {

TEST(LostRankNotice, MpirunsNoticeNamesTheRankAndSignal) {
  for (const char* line : {"mpirun noticed that process rank 3 with PID 0 on node vm exited on signal 9 (Killed).",
                           "prterun noticed that process rank 3 with PID 4242 on node n0.cluster exited on signal 9 (Killed)."}) {
    const auto n = parse_lost_rank_notice(line);
    ASSERT_TRUE(n) << line;
    EXPECT_EQ(n->source, LostRankNotice::Source::kLauncher);
    EXPECT_EQ(n->rank, 3);
    EXPECT_EQ(n->signal, 9);
    EXPECT_EQ(n->step, -1);
  }
  const auto oom = parse_lost_rank_notice("mpirun noticed that process rank 12 with PID 77 on node a exited on signal 15 (Terminated).");
  ASSERT_TRUE(oom);
  EXPECT_EQ(oom->rank, 12);
  EXPECT_EQ(oom->signal, 15);
}

TEST(LostRankNotice, AnInjectedKillsAnnouncementNamesTheRankAndStep) {
  const auto n = parse_lost_rank_notice(
      "plait: rank 1: step 4: killing itself with SIGKILL after writing its checkpoint files, before the commit (injected failure)");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->source, LostRankNotice::Source::kAnnouncement);
  EXPECT_EQ(n->rank, 1);
  EXPECT_EQ(n->step, 4);
  EXPECT_EQ(n->signal, 9);
}

TEST(LostRankNotice, OtherLinesAreNone) {
  for (const char* line : {"plait: error: rank 2: step 3: injected failure before action 12 (W2.0)",
                           "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD",
                           "plait: rank 1: step 3: stopping itself with SIGSTOP (injected failure)",
                           "  step 4 (5/8 done)  loss 5.0817",
                           "mpirun noticed that process rank x with PID 0 on node vm exited on signal 9",
                           "process rank 3 with PID 0 on node two words exited on signal 9", ""}) {
    EXPECT_FALSE(parse_lost_rank_notice(line)) << line;
  }
}

}  // namespace
}  // namespace plait::runtime
