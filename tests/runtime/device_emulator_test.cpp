// Emulated slow devices pad each compute action by sleeping; only a lower bound on the elapsed
// time is asserted (a sleep never returns early), so the test cannot flake on a busy machine.
#include "plait/runtime/device_emulator.h"

#include <gtest/gtest.h>

#include "plait/core/monotonic_clock.h"

namespace plait::runtime {
namespace {

TEST(DeviceEmulator, PadsToSlowdownTimesTheDurationAndPollsMeanwhile) {
  const DeviceEmulator slow(3.0);
  int polls = 0;
  const double start = monotonic_seconds();
  const double end = start + 0.004;  // an action of 4 ms, as if it had just finished
  slow.pad(start, end, [&] { ++polls; });
  EXPECT_GE(monotonic_seconds() - start, 3.0 * 0.004);
  EXPECT_GE(polls, 1);
  // A device at full speed returns at once, without polling.
  const DeviceEmulator full(1.0);
  polls = 0;
  full.pad(start, end, [&] { ++polls; });
  EXPECT_EQ(polls, 0);
}

}  // namespace
}  // namespace plait::runtime
