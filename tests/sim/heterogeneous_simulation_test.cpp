#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "plait/core/error.h"
#include "plait/schedule/heterogeneous_pipeline.h"
#include "plait/spec/model_presets.h"
#include "plait/sim/flops_cost_model.h"
#include "plait/sim/simulation.h"

namespace plait::sim {
namespace {

DeviceProfile flat(double tflops) {
  DeviceProfile d;
  d.name = "flat";
  d.sustained_flops = tflops * 1e12;
  d.link.latency_seconds = 0;
  d.link.bandwidth_bytes_per_second = 1e18;
  return d;
}

SimulationConfig config_for(std::vector<DeviceProfile> devices) {
  SimulationConfig c;
  c.seq = 1024;
  c.model = spec::resolve_model("gpt-1.3b", c.seq);
  c.model.model.vocab = 8;  // a negligible LM head, so equal layers mean equal work
  c.microbatch_size = 1;
  c.devices = std::move(devices);
  c.record_events = false;
  return c;
}

// The heterogeneous schedule for `pipeline`, with the unit costs the simulator will charge.
schedule::Schedule build(const SimulationConfig& c, const schedule::HeterogeneousPipeline& p,
                         const std::vector<int>& layers, const char* family) {
  const auto partition = spec::cut_sequence(c.model.model, c.seq, {p.num_segments, {}, c.split, 1});
  auto cost = std::make_shared<FlopsCostModel>(c.model.model, layers, partition, c.microbatch_size, c.devices);
  cost->set_recompute(c.memory.recompute);
  if (!c.links.empty()) cost->set_links(c.links);
  schedule::HeterogeneousCosts costs;
  costs.unit_seconds = [cost](int r, schedule::ActionKind kind, std::int32_t seg, std::int32_t s) {
    return cost->compute_seconds(r, kind, 0, seg, s);
  };
  return schedule::heterogeneous_schedule(family, p, costs);
}

// One data-parallel stage of a 2x-fast and a 1x device: given 2/3 and 1/3 of the micro-batches
// (Zorse's n ~ 1/(f+b)) both finish together; given half each, the slow one runs 6 micro-batches
// where it ran 4 and sets a 1.5x longer step.
TEST(HeterogeneousSimulation, TwiceAsFastWithTwiceTheMicroBatchesFinishesTogether) {
  SimulationConfig c = config_for({flat(200), flat(100)});
  c.vstage_layers = {24};
  schedule::HeterogeneousPipeline p;
  p.num_microbatches = 12;
  p.stage_ranks = {{0, 1}};
  p.stage_counts = {{8, 4}};
  const SimulationReport r = simulate_schedule(c, build(c, p, c.vstage_layers, "1f1b"), "1f1b");
  const double t0 = r.result.ranks[0].finish, t1 = r.result.ranks[1].finish;
  EXPECT_NEAR(t0 / t1, 1.0, 1e-9);
  EXPECT_NEAR(r.result.bubble_fraction, 0.0, 1e-9);
  p.stage_counts = {{6, 6}};
  const SimulationReport even = simulate_schedule(c, build(c, p, c.vstage_layers, "1f1b"), "1f1b");
  EXPECT_NEAR(even.result.step_time / r.result.step_time, 1.5, 1e-9);
}

// Stages of different widths: one 2x device, then two 1x devices holding the same layers and
// taking half the micro-batches each. The groups are balanced, so the step is the 2x device's
// work plus the pipeline fill and drain, for 1F1B and Seq1F1B alike; every rank of the second
// group ends within one micro-batch of the other.
TEST(HeterogeneousSimulation, UnevenStageWidthsBalance) {
  SimulationConfig c = config_for({flat(200), flat(100), flat(100)});
  c.vstage_layers = {12, 12};
  for (const auto& [family, k] : {std::pair{"1f1b", 1}, std::pair{"seq1f1b", 4}}) {
    schedule::HeterogeneousPipeline p;
    p.num_microbatches = 16;
    p.num_segments = k;
    p.stage_ranks = {{0}, {1, 2}};
    p.stage_counts = {{16}, {8, 8}};
    const schedule::Schedule s = build(c, p, c.vstage_layers, family);
    const SimulationReport r = simulate_schedule(c, s, family);
    const double fast_busy = r.result.ranks[0].busy;
    const double per_mb = fast_busy / 16;  // F + B of one micro-batch on the 2x device
    EXPECT_NEAR(r.result.ranks[1].busy, r.result.ranks[2].busy, 1e-9 * fast_busy) << family;
    EXPECT_NEAR(r.result.ranks[1].busy, fast_busy, 1e-4 * fast_busy) << family;
    EXPECT_LT(std::fabs(r.result.ranks[1].finish - r.result.ranks[2].finish), 2 * per_mb) << family;
    // Fill and drain: about one micro-batch on the slow group (2x the fast one's time).
    EXPECT_GT(r.result.step_time, fast_busy) << family;
    EXPECT_LT(r.result.step_time, fast_busy + 2.5 * per_mb) << family;
  }
}

// Per-pair links: the same pipeline across a slow link takes longer than across a fast one, by
// about the messages on the critical path.
TEST(HeterogeneousSimulation, PerPairLinksAreCharged) {
  SimulationConfig c = config_for({flat(100), flat(100)});
  c.vstage_layers = {12, 12};
  schedule::HeterogeneousPipeline p;
  p.num_microbatches = 4;
  p.stage_ranks = {{0}, {1}};
  p.stage_counts = {{4}, {4}};
  LinkProfile fast{0, 1e18}, slow{1e-3, 1e9};
  c.links = LinkMatrix(2, fast);
  const double t_fast = simulate_schedule(c, build(c, p, c.vstage_layers, "1f1b"), "1f1b").result.step_time;
  c.links.at(0, 1) = slow;
  c.links.at(1, 0) = slow;
  const double t_slow = simulate_schedule(c, build(c, p, c.vstage_layers, "1f1b"), "1f1b").result.step_time;
  const double message = slow.transfer_seconds(1024 * 2048 * 2);  // b * s * H * 2 bytes
  // Critical path: the first forward crosses, the last backward crosses back; in between the
  // sender of each message is idle or busy anyway.
  EXPECT_GE(t_slow - t_fast, 2 * message * 0.999);
  EXPECT_LE(t_slow - t_fast, 8 * message);
  // Wrong-sized link matrices are refused.
  c.links = LinkMatrix(3, fast);
  EXPECT_THROW(simulate_schedule(c, build(c, p, c.vstage_layers, "1f1b"), "1f1b"), Error);
}

// Recomputation: every backward first rebuilds its layers (their forward without the K/V and
// output projections; the head is not recomputed), so a one-rank step costs F + (R + BW).
TEST(HeterogeneousSimulation, RecomputationChargesTheForwardAgain) {
  SimulationConfig c = config_for({flat(100)});
  c.vstage_layers = {24};
  schedule::HeterogeneousPipeline p;
  p.num_microbatches = 2;
  p.stage_ranks = {{0}};
  p.stage_counts = {{2}};
  const double plain = simulate_schedule(c, build(c, p, c.vstage_layers, "1f1b"), "1f1b").result.step_time;
  c.memory.recompute = spec::Recompute::full();
  const double recomputed = simulate_schedule(c, build(c, p, c.vstage_layers, "1f1b"), "1f1b").result.step_time;
  // Per sample of the whole sequence: layers F = linear + attention, BW = 2F; head 2sCV each.
  const spec::ModelSpec& m = c.model.model;
  const double layer = m.layer_forward_flops(c.seq), head = 2.0 * c.seq * m.hidden * m.vocab;
  const double rebuild = m.layer_recompute_flops(0, c.seq);
  EXPECT_LT(rebuild, 0.75 * layer);  // gpt2: 12sC^2 of the 24sC^2 linear FLOPs are skipped
  EXPECT_NEAR(recomputed / plain, 1.0 + 24 * rebuild / (3 * (24 * layer + head)), 1e-9);
  c.memory.recompute = spec::Recompute::layers_each(6);
  const double quarter = simulate_schedule(c, build(c, p, c.vstage_layers, "1f1b"), "1f1b").result.step_time;
  EXPECT_NEAR(quarter / plain, 1.0 + 6 * rebuild / (3 * (24 * layer + head)), 1e-9);
  c.memory.recompute = spec::Recompute::layers_each(25);
  EXPECT_THROW(build(c, p, c.vstage_layers, "1f1b"), Error);  // more than the stage holds
  c.memory.recompute = spec::Recompute::full();
  c.vstage_layers = {23};
  EXPECT_THROW(simulate_schedule(c, build(c, p, {24}, "1f1b"), "1f1b"), Error);
}

}  // namespace
}  // namespace plait::sim
