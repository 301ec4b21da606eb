// The cold-action factor (runtime/cold_action_factor.h): a rank that a re-balance left with only
// cold actions is timed at its warm-equivalent speed, so a recovered rank matches its history.
#include "plait/runtime/cold_action_factor.h"

#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/runtime/straggler_detector.h"

namespace plait::runtime {
namespace {

// A step of `microbatches` F and B actions per chunk of one chunk: each warm action takes
// `warm` seconds, each (chunk, kind)'s first `cold` x that.
RankStepTimes step_times(int microbatches, double warm, double cold) {
  RankStepTimes t;
  t.units = {static_cast<double>(microbatches), static_cast<double>(microbatches), 0};
  t.compute_seconds = {warm * (cold + microbatches - 1), warm * (cold + microbatches - 1), 0};
  t.first_units = 2;
  t.first_seconds = 2 * warm * cold;
  return t;
}

TEST(ColdActionFactor, ARankWithOnlyColdActionsIsTimedAtItsWarmEquivalentSpeed) {
  ColdActionFactor f(2, 4);
  EXPECT_DOUBLE_EQ(f.factor(0), 1.0);
  // Both ranks with three micro-batches: warm times, and rank 0's factor learned (3x).
  for (int s = 0; s < 4; ++s) {
    const std::vector<double> spu = f.seconds_per_unit({step_times(3, 1e-3, 3), step_times(3, 2e-3, 1.5)});
    EXPECT_DOUBLE_EQ(spu[0], 1e-3);
    EXPECT_DOUBLE_EQ(spu[1], 2e-3);
  }
  EXPECT_DOUBLE_EQ(f.factor(0), 3.0);
  EXPECT_DOUBLE_EQ(f.factor(1), 1.5);
  // Rank 0 left one micro-batch (cold actions only) and slowed 5x: 5x its history, not 15x; back
  // to speed: its history, not 3x it.
  std::vector<double> spu = f.seconds_per_unit({step_times(1, 5e-3, 3), step_times(5, 2e-3, 1.5)});
  EXPECT_DOUBLE_EQ(spu[0], 5e-3);
  spu = f.seconds_per_unit({step_times(1, 1e-3, 3), step_times(5, 2e-3, 1.5)});
  EXPECT_DOUBLE_EQ(spu[0], 1e-3);
  // A cold-only step teaches nothing; a rank that ran nothing stays 0 (never judged).
  EXPECT_DOUBLE_EQ(f.factor(0), 3.0);
  spu = f.seconds_per_unit({RankStepTimes{}, step_times(6, 2e-3, 1.5)});
  EXPECT_EQ(spu[0], 0.0);
}

TEST(ColdActionFactor, WithoutAStepThatHadBothTheColdTimeStands) {
  ColdActionFactor f(1, 4);
  EXPECT_DOUBLE_EQ(f.seconds_per_unit({step_times(1, 1e-3, 3)})[0], 3e-3);
}

TEST(ColdActionFactor, TheMedianOfTheWindowIgnoresOneOddStep) {
  ColdActionFactor f(1, 3);
  for (double cold : {2.0, 2.0, 9.0}) f.seconds_per_unit({step_times(2, 1e-3, cold)});
  EXPECT_NEAR(f.factor(0), 2.0, 1e-9);
  // The window keeps the last three: two 9x steps move it.
  f.seconds_per_unit({step_times(2, 1e-3, 9.0)});
  EXPECT_NEAR(f.factor(0), 9.0, 1e-9);
}

TEST(ColdActionFactor, ARecoveredRankLeftOneMicroBatchIsCleared) {
  // The detector fed warm-equivalent speeds clears a rank that recovered on one micro-batch, where
  // the cold-inclusive time (3x) would hold it flagged.
  StragglerConfig c;
  c.window = 4;
  c.consecutive = 2;
  c.cooldown = 1;
  StragglerDetector d(c, 2);
  ColdActionFactor f(2, c.window);
  std::vector<StragglerChange> all;
  std::int64_t step = 0;
  const auto run = [&](int mb0, double slow0, int mb1) {
    for (const StragglerChange& ch :
         d.observe(step, f.seconds_per_unit({step_times(mb0, slow0 * 1e-3, 3), step_times(mb1, 1e-3, 3)}))) {
      all.push_back(ch);
    }
    ++step;
  };
  for (int s = 0; s < 5; ++s) run(4, 1, 4);
  for (int s = 0; s < 2; ++s) run(4, 5, 4);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(all[0].flagged);
  for (int s = 0; s < 3; ++s) run(1, 5, 7);  // re-balanced, still slow
  EXPECT_EQ(all.size(), 1u);
  for (int s = 0; s < 3; ++s) run(1, 1, 7);  // recovered
  ASSERT_EQ(all.size(), 2u);
  EXPECT_FALSE(all[1].flagged);
  EXPECT_EQ(all[1].rank, 0);
}

TEST(ColdActionFactor, RefusesAStepWithAnotherRankCount) {
  ColdActionFactor f(2, 4);
  EXPECT_THROW(f.seconds_per_unit({RankStepTimes{}}), Error);
}

}  // namespace
}  // namespace plait::runtime
