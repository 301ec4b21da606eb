// Tier (a) re-balancing decisions on synthetic step times (runtime/share_rebalancer.h; the job
// that runs them is tests/runtime/mpi/rebalance_test.cpp): a flagged rank's stage re-splits its
// micro-batches by measured speed into a schedule that validates and gives every rank its new
// count; a clear brings the plan's own schedule back; a rank alone on its stage, a split that
// cannot improve and plans it cannot regenerate change nothing (with the reason).
#include "plait/runtime/share_rebalancer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "mpi/tiny_job.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/predicted_memory.h"
#include "plait/schedule/validator.h"

namespace plait::runtime {
namespace {

// A step of `units` F and as many fused BW units at `seconds` per unit (BW twice F's time).
RankStepTimes step_times(double seconds, int units = 8) {
  RankStepTimes t;
  t.units[0] = t.units[1] = units;
  t.compute_seconds[0] = seconds * units * 2 / 3;
  t.compute_seconds[1] = seconds * units * 4 / 3;
  return t;
}

struct Decided {
  std::int64_t step;
  ShareRebalancer::Decision decision;
};

// `steps` steps of the plan's ranks at 1 ms per unit times slow(step, rank), through a detector
// and a rebalancer with `config`; the decisions.
template <typename Slow>
std::vector<Decided> feed(const PipelinePlan& plan, const StragglerConfig& config, int steps, Slow slow,
                          std::vector<std::string>* failures = nullptr) {
  StragglerDetector detector(config, plan.num_ranks());
  ShareRebalancer rebalancer(config, plan);
  std::vector<Decided> out;
  for (int s = 0; s < steps; ++s) {
    std::vector<double> spu;
    std::vector<RankStepTimes> times;
    for (int r = 0; r < plan.num_ranks(); ++r) {
      times.push_back(step_times(1e-3 * slow(s, r)));
      spu.push_back(times.back().seconds_per_unit());
    }
    const std::vector<StragglerChange> changes = detector.observe(s, spu);
    if (auto d = rebalancer.observe(s, times, changes, detector)) out.push_back({s, std::move(*d)});
    if (std::string f = rebalancer.take_failure(); failures && !f.empty()) failures->push_back(f);
  }
  return out;
}

// Forwards of chunk 0 (segment 0) per rank: its micro-batch count.
std::vector<int> microbatches_per_rank(const schedule::Schedule& s) {
  std::vector<int> n(static_cast<std::size_t>(s.num_ranks()), 0);
  for (int r = 0; r < s.num_ranks(); ++r) {
    for (const schedule::Action& a : s.ranks[static_cast<std::size_t>(r)]) {
      n[static_cast<std::size_t>(r)] += a.kind == schedule::ActionKind::F && a.chunk == 0 && a.segment == 0;
    }
  }
  return n;
}

PipelinePlan plan_of(const JobConfig& job) { return build_pipeline_plan(job, job.parallel.world_size()); }

TEST(ShareRebalancer, AFlaggedRankWithAPeerHandsItMicroBatchesAndGetsThemBackWhenCleared) {
  const PipelinePlan plan = plan_of(test::tiny_job("seq1f1b", 2, 2, 4, 2));  // stage 0: ranks 0, 2
  const StragglerConfig config;  // the defaults: flagged after 3 steps, cool-down 10
  const std::vector<Decided> d =
      feed(plan, config, 60, [](int s, int r) { return r == 2 && s >= 10 && s < 30 ? 3.0 : 1.0; });
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].step, 12);  // slow at 10, 11, 12
  ASSERT_EQ(d[0].decision.changes.size(), 1u);
  const ShareChange& c = d[0].decision.changes[0];
  EXPECT_EQ(c.position, 0);
  EXPECT_EQ(c.vstages, std::vector<std::int32_t>{0});
  EXPECT_EQ(c.ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(c.before, (std::vector<int>{4, 4}));
  EXPECT_EQ(c.after, (std::vector<int>{6, 2}));  // speeds 1 : 1/3 of 8
  EXPECT_EQ(c.rank, 2);
  EXPECT_TRUE(c.flagged);
  EXPECT_FALSE(c.planned);
  EXPECT_EQ(describe(c),
            "re-balance: step 12: stage 0 data-parallel shares 4/4 -> 6/2 (ranks 0, 2; rank 2 flagged at 3.00x its history)");
  const schedule::Schedule& s = d[0].decision.schedule;
  EXPECT_FALSE(schedule::validate(s).has_value());
  EXPECT_EQ(s.layout, plan.schedule.layout);
  EXPECT_EQ(microbatches_per_rank(s), (std::vector<int>{6, 4, 2, 4}));
  // Back to speed at 30: cleared after 3 normal steps and the cool-down (flagged at 12: not
  // before 23), at 32; the plan's own schedule returns.
  EXPECT_EQ(d[1].step, 32);
  ASSERT_EQ(d[1].decision.changes.size(), 1u);
  EXPECT_FALSE(d[1].decision.changes[0].flagged);
  EXPECT_TRUE(d[1].decision.changes[0].planned);
  EXPECT_EQ(d[1].decision.changes[0].after, (std::vector<int>{4, 4}));
  EXPECT_EQ(d[1].decision.schedule, plan.schedule);
}

TEST(ShareRebalancer, ChangesNothingWithoutAPeerOrAGainAndSaysWhyItCannotAct) {
  const auto slow2 = [](int s, int r) { return r == 2 && s >= 10 ? 3.0 : 1.0; };
  // pp 4: rank 2 is alone on its stage (tier b's case).
  const PipelinePlan pp4 = plan_of(test::tiny_job("seq1f1b", 4, 1, 4, 2));
  EXPECT_TRUE(feed(pp4, StragglerConfig{}, 30, slow2).empty());
  EXPECT_EQ(ShareRebalancer(StragglerConfig{}, pp4).unavailable(),
            "no stage has data-parallel peers (tier b, moving layers, is not built)");
  // pp 1 x dp 4 of one micro-batch each: every rank needs one, nothing can move.
  const PipelinePlan one_each = plan_of(test::tiny_job("1f1b", 1, 4, 1, 1));
  EXPECT_EQ(ShareRebalancer(StragglerConfig{}, one_each).unavailable(), "");
  EXPECT_TRUE(feed(one_each, StragglerConfig{}, 30, slow2).empty());
  // Off by the config.
  StragglerConfig off;
  off.rebalance = false;
  const PipelinePlan dp = plan_of(test::tiny_job("seq1f1b", 2, 2, 4, 2));
  EXPECT_TRUE(feed(dp, off, 30, slow2).empty());
  EXPECT_EQ(ShareRebalancer(off, dp).unavailable(), "stragglers.rebalance is false");
  // A hand-written explicit schedule names no family to regenerate it with.
  const PipelinePlan named = plan_of(test::heterogeneous_job("1f1b", spec::Family::gpt2));
  EXPECT_NE(ShareRebalancer(StragglerConfig{}, named).unavailable().find("names no schedule family"), std::string::npos);
}

TEST(ShareRebalancer, ReSplitsAHeterogeneousStageByMeasuredSpeed) {
  JobConfig job = test::heterogeneous_job("zb-h1", spec::Family::gpt2);  // stage 0: ranks 0, 1 (3/2)
  job.parallel.schedule_name = "zb-h1";
  const PipelinePlan plan = plan_of(job);
  // Rank 1 runs 2x slow by plan (the measured times say so); rank 0 slowed 4x at step 10.
  const std::vector<Decided> d = feed(plan, StragglerConfig{}, 20, [](int s, int r) {
    return (r == 1 ? 2.0 : 1.0) * (r == 0 && s >= 10 ? 4.0 : 1.0);
  });
  ASSERT_EQ(d.size(), 1u);
  const ShareChange& c = d[0].decision.changes.at(0);
  EXPECT_EQ(c.before, (std::vector<int>{3, 2}));
  EXPECT_EQ(c.after, (std::vector<int>{2, 3}));  // speeds 1/4 : 1/2 of 5
  EXPECT_FALSE(schedule::validate(d[0].decision.schedule).has_value());
  EXPECT_EQ(microbatches_per_rank(d[0].decision.schedule), (std::vector<int>{2, 3, 5, 5}));
}

TEST(ShareRebalancer, DeclinesAReBalanceThatWouldNotFitARanksDeviceMemory) {
  // GPipe holds every micro-batch in flight: rank 0, given its slowed peer's micro-batches, would
  // hold 12 instead of 8. With each device's memory 5% above its planned peak the re-balance
  // is declined (the shares in force stay), and said why; without capacities it is made.
  PipelinePlan plan = plan_of(test::tiny_job("gpipe", 2, 2, 8, 1));  // stage 0: ranks 0, 2, 8/8
  const auto slow2 = [](int s, int r) { return r == 2 && s >= 10 ? 3.0 : 1.0; };
  const std::vector<Decided> free = feed(plan, StragglerConfig{}, 20, slow2);
  ASSERT_EQ(free.size(), 1u);
  const ShareChange& c = free[0].decision.changes.at(0);
  EXPECT_GT(c.after[0], c.before[0]);
  PipelinePlan next = plan;
  next.schedule = free[0].decision.schedule;
  const std::vector<sim::CategoryPeaks> planned = predicted_memory(plan), moved = predicted_memory(next);
  EXPECT_GT(moved[0].total, 1.05 * planned[0].total);  // the case the check is for

  for (std::size_t r = 0; r < plan.devices.size(); ++r) {
    plan.devices[r].memory_bytes = static_cast<std::size_t>(1.05 * planned[r].total);
  }
  std::vector<std::string> failures;
  EXPECT_TRUE(feed(plan, StragglerConfig{}, 20, slow2, &failures).empty());
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("re-balance after step 12 declined (stage 0 data-parallel shares 8/8 -> 12/4 "), std::string::npos)
      << failures[0];
  EXPECT_NE(failures[0].find("rank 0's predicted peak"), std::string::npos) << failures[0];
  // Room for it: made again.
  for (std::size_t r = 0; r < plan.devices.size(); ++r) {
    plan.devices[r].memory_bytes = static_cast<std::size_t>(moved[r].total) + 1;
  }
  failures.clear();
  EXPECT_EQ(feed(plan, StragglerConfig{}, 20, slow2, &failures).size(), 1u);
  EXPECT_TRUE(failures.empty());
}

}  // namespace
}  // namespace plait::runtime
