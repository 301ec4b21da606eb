// The simulator's data-parallel timing (sim/data_parallel_timing.h) against hand-computed
// steps: ring collectives, a level-3 gather gating the first use, reductions overlapping the
// pipeline, the update after the step's barrier, and levels 1-2's all-gather of the weights.
#include <gtest/gtest.h>

#include "plait/schedule/lowering.h"
#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/data_parallel_timing.h"
#include "plait/sim/event_simulator.h"

namespace plait::sim {
namespace {

// Every unit 1 s (F 1, BW 2), every transfer 0.1 s + bytes / 1000 B/s.
class Costs : public CostModel {
 public:
  double compute_seconds(int, schedule::ActionKind kind, std::int32_t, std::int32_t, std::int32_t) const override {
    return kind == schedule::ActionKind::F ? 1.0 : 2.0;
  }
  double transfer_seconds(int, int, std::int64_t bytes) const override { return 0.1 + static_cast<double>(bytes) / 1000; }
};

TEST(DataParallelTiming, RingCollectives) {
  const Costs cost;
  EXPECT_DOUBLE_EQ(ring_collective_seconds(cost, {0}, 4000, Collective::all_reduce), 0);
  // 4 holders: 3 steps of 1000 B (1.1 s), twice for an all-reduce.
  EXPECT_DOUBLE_EQ(ring_collective_seconds(cost, {0, 1, 2, 3}, 4000, Collective::reduce_scatter), 3 * 1.1);
  EXPECT_DOUBLE_EQ(ring_collective_seconds(cost, {0, 1, 2, 3}, 4000, Collective::all_reduce), 6 * 1.1);
}

// 1F1B on one stage held by 2 ranks (dp 2), 2 micro-batches each: F BW F BW = 6 s of compute.
// gradient_bytes / weight_bytes: per element on the wire (train.grad_reduce "bf16": 2 B gradients;
// the bf16 compute copy: 2 B weights).
SimResult run(int level, bool offload, double gradient_bytes = 4, double weight_bytes = 4) {
  const schedule::Schedule s = schedule::replicate(schedule::generate_schedule("1f1b", {1, 1, 2, 1}), 2);
  const schedule::LoweredSchedule lowered = schedule::lower(s);
  DataParallelModel dp;
  StageSync stage;
  stage.policy = {level, offload};
  stage.holders = {0, 1};
  stage.elements = 1000;  // 4000 bytes
  stage.gradient_bytes_per_element = gradient_bytes;
  stage.weight_bytes_per_element = weight_bytes;
  stage.shard = level == 0 ? std::vector<double>{1000, 1000} : std::vector<double>{500, 500};
  dp.stages = {stage};
  dp.optimizer_seconds = [](int, double elements, bool host) { return elements / 1000 * (host ? 2 : 1); };
  dp.copy_seconds = [](int, double bytes) { return bytes / 4000; };
  const Costs cost;
  SimOptions options{false, false, nullptr, &dp};
  return simulate(s, lowered, cost, nullptr, options);
}

TEST(DataParallelTiming, EachLevelsStepByHand) {
  // Level 0: the all-reduce (2 x 2.1 s) after the last BW, then AdamW over all 1000 (1 s).
  const SimResult l0 = run(0, false);
  EXPECT_DOUBLE_EQ(l0.step_time, 6);
  EXPECT_DOUBLE_EQ(l0.synchronized_step_time, 6 + 2 * 2.1 + 1);
  // Level 1: reduce-scatter (2.1 s), AdamW over the 500 of the shard (0.5 s), all-gather (2.1 s).
  EXPECT_DOUBLE_EQ(run(1, false).synchronized_step_time, 6 + 2.1 + 0.5 + 2.1);
  // Level 3: the gather (2.1 s) before the first F; no all-gather after the update.
  const SimResult l3 = run(3, false);
  EXPECT_DOUBLE_EQ(l3.step_time, 2.1 + 6);
  EXPECT_DOUBLE_EQ(l3.synchronized_step_time, 2.1 + 6 + 2.1 + 0.5);
  // Offloaded level 1: AdamW on the host (1 s for 500), the gradient shard there (2000 B, 0.5 s)
  // and the weights back (0.5 s).
  EXPECT_DOUBLE_EQ(run(1, true).synchronized_step_time, 6 + 2.1 + 1 + 0.5 + 0.5 + 2.1);
}

// bf16 gradients on the wire (train.grad_reduce "bf16") move 2000 B: each ring step 0.1 + 1 s.
TEST(DataParallelTiming, Bf16GradientsHalveTheReductionsBytes) {
  EXPECT_DOUBLE_EQ(run(0, false, 2).synchronized_step_time, 6 + 2 * 1.1 + 1);
  // Level 1: the reduce-scatter of bf16 gradients (1.1 s), AdamW (0.5 s), the all-gather of fp32
  // weights (2.1 s); with the bf16 compute copy gathered, 1.1 s.
  EXPECT_DOUBLE_EQ(run(1, false, 2).synchronized_step_time, 6 + 1.1 + 0.5 + 2.1);
  EXPECT_DOUBLE_EQ(run(1, false, 2, 2).synchronized_step_time, 6 + 1.1 + 0.5 + 1.1);
  // Level 3: the weights' gather before the first F is the compute copy's.
  EXPECT_DOUBLE_EQ(run(3, false, 2, 2).synchronized_step_time, 1.1 + 6 + 1.1 + 0.5);
}

}  // namespace
}  // namespace plait::sim
