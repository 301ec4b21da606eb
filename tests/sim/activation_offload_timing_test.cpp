// Activation offload's CPU-only compute term (sim::ActivationOffloadModel::
// compute_seconds_per_byte): a rank's busy time grows by exactly its copied bytes (out and back)
// times the cost, on that rank only, and a cost of 0 leaves every result bitwise unchanged.
#include <gtest/gtest.h>

#include "plait/sim/simulation.h"

namespace plait::sim {
namespace {

SimulationConfig offload_config(std::vector<double> compute_seconds_per_byte) {
  SimulationConfig c;
  c.seq = 4096;
  c.model = spec::resolve_model("gpt-1.3b", c.seq);
  c.shape = {4, 1, 8, 1};
  for (int r = 0; r < 4; ++r) {
    c.activation_offload.chunk_offloads.push_back({true});
    c.activation_offload.host_bytes_per_second.push_back(16e9);
  }
  c.activation_offload.compute_seconds_per_byte = std::move(compute_seconds_per_byte);
  return c;
}

SimResult run(std::vector<double> compute_seconds_per_byte) {
  return simulate_family(offload_config(std::move(compute_seconds_per_byte)), *schedule::find_schedule_family("gpipe"))
      .result;
}

TEST(ActivationOffloadTiming, CopyComputeAddsBytesTimesCostToTheRanksBusyTime) {
  const SimResult without = run({});
  const double cost = 0.1e-9;  // 10 GB/s of memcpy
  const SimResult with = run({cost, 0, 0, 0});
  ASSERT_GT(without.ranks[0].offload_bytes, 0);  // GPipe holds every micro-batch: units move
  // Each moved byte is copied twice: out after its F, back before its B.
  const double charged = 2 * without.ranks[0].offload_bytes * cost;
  EXPECT_DOUBLE_EQ(with.ranks[0].offload_bytes, without.ranks[0].offload_bytes);
  EXPECT_NEAR(with.ranks[0].offload_compute, charged, 1e-12 * charged);
  EXPECT_NEAR(with.ranks[0].busy, without.ranks[0].busy + charged, 1e-9 * with.ranks[0].busy);
  for (int r = 1; r < 4; ++r) {
    // Their own costs only (up to the rounding of end - start at the later start times).
    EXPECT_NEAR(with.ranks[r].busy, without.ranks[r].busy, 1e-12 * without.ranks[r].busy) << r;
    EXPECT_EQ(with.ranks[r].offload_compute, 0.0) << r;
  }
  // Rank 0 feeds the pipeline: its slower actions delay the step.
  EXPECT_GT(with.step_time, without.step_time);
}

TEST(ActivationOffloadTiming, ZeroCostLeavesTheResultBitwiseUnchanged) {
  const SimResult without = run({});
  const SimResult zero = run({0, 0, 0, 0});
  EXPECT_EQ(zero.step_time, without.step_time);
  EXPECT_EQ(zero.bubble_fraction, without.bubble_fraction);
  ASSERT_EQ(zero.ranks.size(), without.ranks.size());
  for (std::size_t r = 0; r < zero.ranks.size(); ++r) {
    EXPECT_EQ(zero.ranks[r].busy, without.ranks[r].busy) << r;
    EXPECT_EQ(zero.ranks[r].finish, without.ranks[r].finish) << r;
    EXPECT_EQ(zero.ranks[r].offload_wait, without.ranks[r].offload_wait) << r;
    EXPECT_EQ(zero.ranks[r].offload_compute, 0.0) << r;
  }
  ASSERT_EQ(zero.events.size(), without.events.size());
  for (std::size_t i = 0; i < zero.events.size(); ++i) {
    EXPECT_EQ(zero.events[i].start, without.events[i].start) << i;
    EXPECT_EQ(zero.events[i].end, without.events[i].end) << i;
  }
}

}  // namespace
}  // namespace plait::sim
