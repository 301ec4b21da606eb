// The pacing of waits: yields first, then sleeps that double up to the cap.
#include <gtest/gtest.h>

#include "plait/comm/backoff.h"

namespace plait::comm {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

TEST(Backoff, YieldsThenSleepsDoublingUpToTheCap) {
  BackoffPolicy policy;
  policy.yields = 3;
  policy.first_sleep = microseconds(1);
  policy.max_sleep = microseconds(5);
  Backoff backoff(policy);
  const nanoseconds expected[] = {nanoseconds(0), nanoseconds(0), nanoseconds(0),
                                  microseconds(1), microseconds(2), microseconds(4),
                                  microseconds(5), microseconds(5)};
  for (nanoseconds e : expected) {
    EXPECT_EQ(backoff.next_pause().count(), e.count());
    backoff.pause();
  }
}

TEST(Backoff, FirstSleepNeverExceedsTheCap) {
  BackoffPolicy policy;
  policy.yields = 0;
  policy.first_sleep = microseconds(50);
  policy.max_sleep = microseconds(10);
  Backoff backoff(policy);
  EXPECT_EQ(backoff.next_pause().count(), nanoseconds(microseconds(10)).count());
}

}  // namespace
}  // namespace plait::comm
