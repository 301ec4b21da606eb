// Checks the multi-rank test harness itself: a failure on a rank other than 0 must fail the
// job and name the rank. Disabled in the normal suite; tests/comm/CMakeLists.txt runs it on
// its own and expects the failure.
#include <gtest/gtest.h>

#include "mpi_test_session.h"

namespace plait::comm {
namespace {

TEST(HarnessCheck, DISABLED_FailsOnRankOneOnly) {
  // Rank 0 goes on to wait in the barrier after the test; only the abort can end it.
  if (test::mpi_session().rank() == 1) ADD_FAILURE() << "deliberate failure on rank 1";
}

}  // namespace
}  // namespace plait::comm
