// Tier (b)'s decisions on synthetic step times (runtime/layer_mover.h; the job that carries them
// out is tests/runtime/mpi/layer_move_test.cpp): the best single move to a neighbour of a flagged
// rank alone on its stage, made over a fast link and declined over a slow one or a short horizon;
// the plan's partition back on the clear; layouts it cannot act on say why.
#include "plait/runtime/layer_mover.h"

#include <gtest/gtest.h>

#include <vector>

#include "mpi/tiny_job.h"
#include "plait/runtime/pipeline_plan.h"

namespace plait::runtime {
namespace {

// A step in which rank r computed per_step[r] seconds.
std::vector<RankStepTimes> times(const std::vector<double>& per_step) {
  std::vector<RankStepTimes> t(per_step.size());
  for (std::size_t r = 0; r < per_step.size(); ++r) {
    t[r].units[0] = 8;
    t[r].compute_seconds[0] = per_step[r];
  }
  return t;
}

LinkProbe link(double bytes_per_second, double latency = 0) {
  LinkProbe p;
  p.small_seconds = latency;
  p.large_seconds = latency + static_cast<double>(p.large_bytes - p.small_bytes) / bytes_per_second;
  return p;
}

StragglerChange flag(int rank, bool flagged = true) {
  StragglerChange c;
  c.rank = rank;
  c.flagged = flagged;
  c.vs_history = flagged ? 3 : 1;
  return c;
}

PipelinePlan pp4() { return build_pipeline_plan(test::tiny_job("seq1f1b", 4, 1, 4, 2), 4); }

TEST(LayerMover, MovesTheSlowStagesLayersToTheLighterNeighbourWhenTheLinkRepaysIt) {
  const PipelinePlan plan = pp4();  // 8 layers: 2/2/2/2
  StragglerConfig config;
  LayerMover mover(config, plan);
  ASSERT_EQ(mover.unavailable(), "");
  // Stage 1 at 3x (0.3 s a step), the others 0.1 s; stage 2 a little busier than stage 0.
  const std::vector<double> per_step = {0.1, 0.3, 0.12, 0.1};
  for (int s = 0; s < 3; ++s) EXPECT_FALSE(mover.observe(s, times(per_step), {}, 20, [](int, int) { return link(1e9); }));
  int probed_from = -1, probed_to = -1;
  const std::optional<LayerMove> m = mover.observe(3, times(per_step), {flag(1)}, 20, [&](int from, int to) {
    probed_from = from;
    probed_to = to;
    return link(1e9, 1e-5);
  });
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->made) << describe(*m);
  EXPECT_EQ(m->from, 1);
  EXPECT_EQ(m->to, 0);  // 0.1 + 0.15 < 0.12 + 0.15
  EXPECT_EQ(m->layers, 1);
  EXPECT_EQ(m->after, (std::vector<int>{3, 1, 2, 2}));
  EXPECT_EQ(probed_from, 1);
  EXPECT_EQ(probed_to, 0);
  EXPECT_NEAR(m->saved_per_step, 0.3 - 0.15, 1e-12);
  EXPECT_EQ(m->horizon, 20);
  // One layer of the tiny model: its parameters and two moments at 4 bytes each.
  EXPECT_EQ(m->bytes, static_cast<std::size_t>(plan.model.layer_parameters()) * 12);
  EXPECT_NEAR(m->cost_seconds, 1e-5 + static_cast<double>(m->bytes) / 1e9, 1e-9);
  mover.applied(*m);
  EXPECT_EQ(mover.layers(), m->after);
  // The detector sees rank 1 in its plan's layers: 2 planned over 1 held.
  EXPECT_DOUBLE_EQ(mover.layer_scale(1), 2.0);
  EXPECT_DOUBLE_EQ(mover.layer_scale(0), 2.0 / 3);

  // Cleared: the plan's partition back, when it pays (the receiving stage is now the slowest).
  const std::vector<double> after = {0.15, 0.05, 0.12, 0.1};
  for (int s = 7; s < 10; ++s) EXPECT_FALSE(mover.observe(s, times(after), {}, 20, [](int, int) { return link(1e9); }));
  const std::optional<LayerMove> back = mover.observe(10, times(after), {flag(1, false)}, 20, [](int, int) { return link(1e9); });
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->made) << describe(*back);
  EXPECT_EQ(back->from, 0);
  EXPECT_EQ(back->to, 1);
  EXPECT_EQ(back->after, plan.vstage_layers);
}

TEST(LayerMover, DeclinesAMoveTheLinkOrTheHorizonCannotRepay) {
  const PipelinePlan plan = pp4();
  const std::vector<double> per_step = {0.1, 0.3, 0.12, 0.1};
  {
    LayerMover mover(StragglerConfig{}, plan);
    // 20 steps x 0.15 s = 3 s of gain; the layer's bytes at 1 kB/s take far longer.
    const std::optional<LayerMove> m = mover.observe(3, times(per_step), {flag(1)}, 20, [](int, int) { return link(1e3); });
    ASSERT_TRUE(m);
    EXPECT_FALSE(m->made);
    EXPECT_EQ(m->why, "moving costs more than it saves over the horizon");
    EXPECT_GT(m->cost_seconds, m->gain_seconds);
    EXPECT_EQ(mover.layers(), plan.vstage_layers);
  }
  {
    // A fast link, but the horizon is one step: 0.15 s against a 1 s latency.
    StragglerConfig config;
    config.move_horizon = 1;
    LayerMover mover(config, plan);
    const std::optional<LayerMove> m = mover.observe(3, times(per_step), {flag(1)}, 20, [](int, int) { return link(1e9, 1.0); });
    ASSERT_TRUE(m);
    EXPECT_EQ(m->horizon, 1);
    EXPECT_FALSE(m->made);
  }
  {
    // Nothing shortens the step: the flagged stage is not the bottleneck.
    LayerMover mover(StragglerConfig{}, plan);
    EXPECT_FALSE(mover.observe(3, times({0.1, 0.1, 0.5, 0.1}), {flag(1)}, 20, [](int, int) { return link(1e9); }));
  }
}

TEST(LayerMover, AProbeWhoseSmallMessageTookLongerStillGivesABandwidth) {
  LinkProbe p;
  p.small_seconds = 4e-4;  // a loaded host: the small round trip waited
  p.large_seconds = 1e-4;
  EXPECT_DOUBLE_EQ(p.bytes_per_second(), static_cast<double>(p.large_bytes) / 4e-4);
}

TEST(LayerMover, SaysWhyItCannotActOnALayout) {
  StragglerConfig off;
  off.move_layers = false;
  EXPECT_EQ(LayerMover(off, pp4()).unavailable(), "stragglers.move_layers is false");
  const PipelinePlan dp = build_pipeline_plan(test::tiny_job("seq1f1b", 2, 2, 4, 2), 4);
  EXPECT_NE(LayerMover(StragglerConfig{}, dp).unavailable().find("every rank holds one stage"), std::string::npos);
  EXPECT_EQ(LayerMover(StragglerConfig{}, build_pipeline_plan(test::tiny_job("seq1f1b", 1, 1, 4, 2), 1)).unavailable(),
            "one pipeline stage: no layers to move");
}

}  // namespace
}  // namespace plait::runtime
