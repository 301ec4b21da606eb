// The simulator's tensor parallelism (sim/flops_cost_model.h, spec/tensor_parallel_plan.h): a
// rank that is a TP group of t devices takes the device's time for 1/t of the work plus its ring
// collectives, by hand; messages go as t slices; memory is one device's.
#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/flops_cost_model.h"
#include "plait/sim/simulation.h"
#include "plait/spec/model_presets.h"
#include "plait/spec/sequence_partition.h"

namespace plait::sim {
namespace {

using schedule::ActionKind;

const DeviceProfile kFlat{.name = "flat", .sustained_flops = 1e14};  // 100 TFLOP/s, no fixed cost

// Two stages of 2 layers of a 1024-wide GPT, one 2048-token segment, a flat 100 TFLOP/s device:
// at t = 4 over a ring of 10 us per step and 200 GB/s, F of the first stage takes its FLOPs / 4
// at 100 TFLOP/s plus 2 x 2 all-gathers, 2 x 2 reduce-scatters and the embedding's reduce-scatter,
// each 3 x 10 us + 3/4 x (2048 x 1024 x 2 bytes) / 200 GB/s; W re-gathers 2 x 2 inputs and the
// embedding's gradient.
TEST(TensorParallelCost, ChargesOneTthOfTheWorkPlusRingCollectives) {
  const spec::ModelSpec m = spec::gpt2_model(4, 1024, 16, 1000, 2048);
  const spec::SequencePartition part = spec::even_partition(m, 2048, 1);
  FlopsCostModel cost(m, {2, 2}, part, 1, {kFlat});
  const double f1 = cost.compute_seconds(0, ActionKind::F, 0, 0, 0);
  const double w1 = cost.compute_seconds(0, ActionKind::W, 0, 0, 0);
  cost.set_tensor_parallel({{4, LinkProfile{10e-6, 200e9}}}, 2.0);
  // Rings of t = 4: gathers of bf16 activations, reduce-scatters of fp32 partial sums.
  const double gather = 3 * 10e-6 + 0.75 * (2048.0 * 1024 * 2) / 200e9;
  const double scatter = 3 * 10e-6 + 0.75 * (2048.0 * 1024 * 4) / 200e9;
  // The embedding stage: 2 + 2 per layer in F and the embedding's reduce-scatter; W gathers 4
  // per layer again and the embedding's output gradient.
  EXPECT_NEAR(cost.compute_seconds(0, ActionKind::F, 0, 0, 0), f1 / 4 + 4 * gather + 5 * scatter, 1e-12);
  EXPECT_NEAR(cost.compute_seconds(0, ActionKind::W, 0, 0, 0), w1 / 4 + 9 * gather, 1e-12);
  // The head's stage: 2 + 2 per layer and the final norm's gather in F, and the cross-entropy's
  // three all-reduces of one fp32 per token: 2 x (3 x 10 us + 3/4 x 8192 bytes / 200 GB/s).
  const double ar = 2 * (3 * 10e-6 + 0.75 * 2048.0 * 4 / 200e9);
  FlopsCostModel plain(m, {2, 2}, part, 1, {kFlat});
  EXPECT_NEAR(cost.compute_seconds(1, ActionKind::F, 0, 0, 1),
              plain.compute_seconds(1, ActionKind::F, 0, 0, 1) / 4 + 5 * gather + 4 * scatter + 3 * ar, 1e-12);
  // Messages: each device sends its quarter through its own port.
  EXPECT_NEAR(cost.transfer_seconds(0, 1, 4'000'000), plain.transfer_seconds(0, 1, 1'000'000), 1e-15);
}

// The device curve is evaluated at the per-GPU work: with a fixed cost per layer, 1/t of the work
// costs more than 1/t of the time.
TEST(TensorParallelCost, EvaluatesTheCurveAtThePerDeviceWork) {
  const spec::ModelSpec m = spec::gpt2_model(4, 1024, 16, 1000, 2048);
  const spec::SequencePartition part = spec::even_partition(m, 2048, 1);
  FlopsCostModel cost(m, {4}, part, 1, {default_device_profile()});
  const double whole = cost.compute_seconds(0, ActionKind::F, 0, 0, 0);
  cost.set_tensor_parallel({{8, LinkProfile{0.0, 1e30}}}, 2.0);  // free collectives
  const double eighth = cost.compute_seconds(0, ActionKind::F, 0, 0, 0);
  EXPECT_GT(eighth, whole / 8 * 1.05);
  EXPECT_LT(eighth, whole);
}

// plait sim --pp 2 --tp 4: one device's memory (activations 1/4 under sequence parallelism, the
// split parameters 1/4), segments rounded to multiples of 4, refusals.
TEST(TensorParallelSimulation, MemoryIsOneDevicesAndSegmentsDivideByT) {
  SimulationConfig config;
  config.model = spec::resolve_model("gpt-1.3b", 4096);
  config.seq = 4096;
  config.shape = {2, 1, 4, 4};
  config.split_multiple = 4;
  const SimulationReport one = simulate_family(config, schedule::schedule_family("seq1f1b"));
  config.tensor_parallel = {4};
  const SimulationReport four = simulate_family(config, schedule::schedule_family("seq1f1b"));
  for (std::int64_t len : four.partition.lengths) EXPECT_EQ(len % 4, 0);
  EXPECT_NEAR(four.result.ranks[1].peak_activation_bytes, one.result.ranks[1].peak_activation_bytes / 4,
              0.01 * one.result.ranks[1].peak_activation_bytes);
  EXPECT_LT(four.static_memory[1].parameters, one.static_memory[1].parameters / 3.9);
  EXPECT_GT(four.static_memory[1].communication, 0.0);
  EXPECT_EQ(four.devices_used, 8);
  EXPECT_LT(four.result.step_time, one.result.step_time);
  // Even lengths that do not divide by t, and heads that do not split, are refused.
  config.split = spec::SplitMethod::even;
  config.split_multiple = 1;
  config.seq = 4098;
  config.model = spec::resolve_model("gpt-1.3b", 4098);
  EXPECT_THROW(simulate_family(config, schedule::schedule_family("seq1f1b")), Error);
  config.seq = 4096;
  config.model = spec::resolve_model("gpt-1.3b", 4096);
  config.tensor_parallel = {32};
  EXPECT_THROW(simulate_family(config, schedule::schedule_family("seq1f1b")), Error);
}

}  // namespace
}  // namespace plait::sim
