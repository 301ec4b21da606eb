// Emulated stragglers on 4 ranks (issue 26, parts 1 and 3): a rank whose emulated device is
// slowed 3x at step k (FailureInjection::kSlow) is flagged by the detector `consecutive` steps
// later and named, the same on every rank; a quiet run flags nothing, also when the plan's own
// devices differ in speed (the heterogeneous layout's rank 1 is 2x slow by design). Every
// decision comes from the measured times the step's reduction carries (rank_step_times.h).
#include <gtest/gtest.h>

#include <cstdio>

#include "mpi_test_session.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/straggler_detector.h"
#include "tiny_job.h"

namespace plait::runtime {
namespace {

comm::Communicator& world() { return plait::test::mpi_session().world(); }

// Trains `steps` steps of `job` with `failure` and feeds the detector; returns its decisions.
std::vector<StragglerChange> train(const JobConfig& job, int steps, const FailureInjection& failure,
                                   const StragglerConfig& config) {
  const PipelinePlan plan = build_pipeline_plan(job, world().size());
  const TrainConfig t = job.global_train();
  const test::TinyData data(plan.model.vocab);
  const data::BatchLoader loader = data.loader(t);
  MemoryTracker tracker;
  TrainerOptions options;
  options.failure = failure;
  DistributedTrainer trainer(plan, t, world(), tracker, options);
  StragglerDetector detector(config, world().size());
  std::vector<StragglerChange> changes;
  for (int s = 0; s < steps; ++s) {
    const DistributedStepResult r = trainer.step(s, loader);
    EXPECT_EQ(r.ranks.size(), static_cast<std::size_t>(world().size()));
    std::vector<double> speed;
    for (const RankStepTimes& times : r.ranks) speed.push_back(times.seconds_per_unit());
    for (const StragglerChange& c : detector.observe(s, speed)) changes.push_back(c);
    if (world().rank() == 0) {
      // For the log: each rank's slowdown against its history, to see the noise the threshold
      // stands above.
      std::printf("step %2d:", s);
      for (int q = 0; q < world().size(); ++q) std::printf(" %.2f", detector.vs_history(q));
      std::printf("\n");
    }
  }
  return changes;
}

// The tiny job widened 4x (hidden 128, 64-token sequences): the detector judges compute seconds
// per unit, and the tiny job's actions (tens of microseconds) are timed mostly by what the caches
// hold, so a busy neighbour on the host moves an unslowed rank's time as much as a slowed one's.
// CI once measured an unslowed rank at 1.43-1.72x its history for seven steps in a row beside the
// 3x one and flagged it. Measured here with two cache-thrashing processes beside the test (6 runs
// each): the tiny job's unslowed ranks reached 1.69-1.95x, the widened job's 1.18-1.23x; alone,
// 1.23 and 1.20. A step takes ~70 ms instead of ~8 (4 ranks on 2 cores).
JobConfig measurable(JobConfig job) {
  const spec::ModelSpec& tiny = job.run.model;
  job.run.model = spec::gpt2_model(tiny.layers, 128, 4, tiny.vocab, 64);
  job.run.train.seq = 64;
  return job;
}

StragglerConfig test_config() {
  StragglerConfig c;
  c.window = 4;
  c.consecutive = 3;
  return c;
}

TEST(Stragglers, ARankSlowedThreeTimesIsFlaggedWithinConsecutiveStepsAndNamed) {
  if (world().size() != 4) GTEST_SKIP() << "a 4-rank test";
  const StragglerConfig config = test_config();
  constexpr int kSlowAt = 7;
  JobConfig job = measurable(test::tiny_job("seq1f1b", 4, 1, 4, 2));
  job.run.train.steps = 14;
  const std::vector<StragglerChange> c =
      train(job, 14, FailureInjection(2, kSlowAt, FailureInjection::Kind::kSlow, 3.0), config);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].rank, 2);
  EXPECT_TRUE(c[0].flagged);
  EXPECT_EQ(c[0].step, kSlowAt + config.consecutive - 1);
  EXPECT_GT(c[0].vs_history, config.threshold);
  EXPECT_GT(c[0].vs_peers, config.threshold);
}

TEST(Stragglers, ARankWithADataParallelPeerIsFlaggedAndTheQuietHeterogeneousRunIsNot) {
  if (world().size() != 4) GTEST_SKIP() << "a 4-rank test";
  const StragglerConfig config = test_config();
  JobConfig job = measurable(test::heterogeneous_job("1f1b", spec::Family::gpt2));
  job.run.train.steps = 20;
  EXPECT_TRUE(train(job, 20, {}, config).empty());
  // Rank 0 shares stage 0 with rank 1 (the 2x one): slowed 3x at step 6.
  const std::vector<StragglerChange> c = train(job, 12, FailureInjection(0, 6, FailureInjection::Kind::kSlow, 3.0), config);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].rank, 0);
  EXPECT_EQ(c[0].step, 6 + config.consecutive - 1);
}

}  // namespace
}  // namespace plait::runtime
