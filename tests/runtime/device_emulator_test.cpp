// Emulated slow devices pad each compute action by sleeping; only a lower bound on the elapsed
// time is asserted (a sleep never returns early), so the test cannot flake on a busy machine.
#include "plait/runtime/device_emulator.h"

#include <gtest/gtest.h>

#include "plait/core/monotonic_clock.h"

namespace plait::runtime {
namespace {

TEST(DeviceEmulator, PadsToSlowdownTimesTheDurationAndPollsMeanwhile) {
  const DeviceEmulator slow(3.0, true);
  int polls = 0;
  const double start = monotonic_seconds();
  const double end = start + 0.004;  // an action of 4 ms, as if it had just finished
  slow.pad(start, end, 0.004, [&] { ++polls; });
  EXPECT_GE(monotonic_seconds() - start, 3.0 * 0.004);
  EXPECT_GE(polls, 1);
  // A device at full speed returns at once, without polling.
  const DeviceEmulator full(1.0, true);
  polls = 0;
  full.pad(start, end, 0.004, [&] { ++polls; });
  EXPECT_EQ(polls, 0);
}

TEST(DeviceEmulator, PadsTheCpuTimeOfASingleThreadNotTheWaitForACore) {
  // 10 ms of wall time of which the thread computed 4 ms (it waited 6 ms for a core another rank
  // held): a device 3 times slower than the core ends 12 ms after the start, not 30 ms.
  const DeviceEmulator single(3.0, true);
  EXPECT_DOUBLE_EQ(single.padded_end(100.0, 100.010, 0.004), 100.0 + 3.0 * 0.004);
  // CPU time above the wall time (clock granularity) never shortens the action below its wall.
  EXPECT_DOUBLE_EQ(single.padded_end(100.0, 100.004, 0.005), 100.0 + 3.0 * 0.004);
  // With several compute threads the calling thread's CPU time is not the action's: wall time.
  const DeviceEmulator threaded(3.0, false);
  EXPECT_DOUBLE_EQ(threaded.padded_end(100.0, 100.010, 0.004), 100.0 + 3.0 * 0.010);
}

TEST(DeviceEmulator, LeavesTheTensorParallelLinkUnslowed) {
  // 6 ms of CPU time of which 2 ms in TP collectives: a device 3 times slower computes 4 ms in
  // 12 and its link still takes 2 (the simulator's charge: compute x f + collectives).
  const DeviceEmulator slow(3.0, true);
  EXPECT_DOUBLE_EQ(slow.padded_end(100.0, 100.010, 0.006, 0.002), 100.0 + 3.0 * 0.004 + 0.002);
  // At full speed the link changes nothing.
  const DeviceEmulator full(1.0, true);
  EXPECT_DOUBLE_EQ(full.padded_end(100.0, 100.010, 0.006, 0.002), 100.0 + 0.006);
  // Link time counted above the action's time alone (clock granularity) is clamped to it.
  EXPECT_DOUBLE_EQ(slow.padded_end(100.0, 100.010, 0.006, 0.007), 100.0 + 0.006);
}

}  // namespace
}  // namespace plait::runtime
