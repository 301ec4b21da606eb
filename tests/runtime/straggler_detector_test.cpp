// The straggler detector on synthetic step times: quiet noisy runs flag nothing, a rank slowed 3x
// is flagged after `consecutive` steps and named, a slowdown of the whole job is no rank's, and
// the hysteresis and cool-down hold a decision.
#include "plait/runtime/straggler_detector.h"

#include <gtest/gtest.h>

#include <random>

#include "plait/core/error.h"
#include "plait/runtime/failure_injection.h"
#include "plait/runtime/link_emulator.h"
#include "plait/runtime/rank_step_times.h"

namespace plait::runtime {
namespace {

// Step times of `ranks` heterogeneous ranks (rank r's speed 1 + r/2 ms per unit) with
// multiplicative noise uniform in [1 - noise, 1 + noise]; slow(step, rank) multiplies.
template <typename Slow>
std::vector<StragglerChange> run(StragglerDetector& d, int ranks, int steps, double noise, Slow slow, std::uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  std::vector<StragglerChange> all;
  for (int s = 0; s < steps; ++s) {
    std::vector<double> t;
    for (int r = 0; r < ranks; ++r) t.push_back((1 + r / 2.0) * 1e-3 * jitter(rng) * slow(s, r));
    for (const StragglerChange& c : d.observe(s, t)) all.push_back(c);
  }
  return all;
}

const auto kNone = [](int, int) { return 1.0; };

TEST(StragglerDetector, QuietNoisyRunsFlagNothing) {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    StragglerDetector d(StragglerConfig{}, 4);
    EXPECT_TRUE(run(d, 4, 200, 0.2, kNone, seed).empty()) << "seed " << seed;
  }
  // One or two odd steps in a row (a save, a burst on the host) are not a straggler.
  StragglerDetector d(StragglerConfig{}, 4);
  const auto spikes = [](int s, int r) { return r == 2 && (s == 40 || s == 41 || s == 90) ? 4.0 : 1.0; };
  EXPECT_TRUE(run(d, 4, 200, 0.1, spikes).empty());
}

TEST(StragglerDetector, ARankSlowedThreeTimesIsFlaggedAfterConsecutiveSteps) {
  const StragglerConfig config;  // consecutive 3
  StragglerDetector d(config, 4);
  const auto slow = [](int s, int r) { return r == 1 && s >= 30 ? 3.0 : 1.0; };
  const std::vector<StragglerChange> c = run(d, 4, 80, 0.1, slow);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].rank, 1);
  EXPECT_TRUE(c[0].flagged);
  EXPECT_EQ(c[0].step, 30 + config.consecutive - 1);
  EXPECT_NEAR(c[0].vs_history, 3, 0.7);
  EXPECT_NEAR(c[0].vs_peers, 3, 0.7);
  EXPECT_TRUE(d.flagged(1));
  // Its baseline stayed frozen: 50 steps later it is still 3x its history.
  EXPECT_NEAR(d.vs_history(1), 3, 0.7);
}

TEST(StragglerDetector, ASlowdownOfTheWholeJobIsNoRanks) {
  StragglerDetector d(StragglerConfig{}, 4);
  const auto all = [](int s, int) { return s >= 30 ? 3.0 : 1.0; };
  EXPECT_TRUE(run(d, 4, 80, 0.1, all).empty());
  // Two ranks: the peer is the other one.
  StragglerDetector two(StragglerConfig{}, 2);
  const auto one = [](int s, int r) { return r == 0 && s >= 20 ? 3.0 : 1.0; };
  const std::vector<StragglerChange> c = run(two, 2, 40, 0.1, one);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].rank, 0);
}

TEST(StragglerDetector, HysteresisHoldsAFlagAboveClearBelowAndCoolDownDelaysTheClear) {
  StragglerConfig config;
  config.cooldown = 10;
  {
    // Slowed 3x at 20, back to 1.4x at 30 (between clear_below 1.25 and threshold 1.5): stays
    // flagged; normal at 50: cleared after `consecutive` steps.
    StragglerDetector d(config, 4);
    const auto slow = [](int s, int r) { return r != 3 ? 1.0 : s >= 50 ? 1.0 : s >= 30 ? 1.4 : s >= 20 ? 3.0 : 1.0; };
    const std::vector<StragglerChange> c = run(d, 4, 80, 0.02, slow);
    ASSERT_EQ(c.size(), 2u);
    EXPECT_TRUE(c[0].flagged);
    EXPECT_EQ(c[0].step, 22);
    EXPECT_FALSE(c[1].flagged);
    EXPECT_EQ(c[1].rank, 3);
    EXPECT_EQ(c[1].step, 52);
    EXPECT_LT(c[1].vs_history, config.clear_below);
  }
  {
    // Slowed for 4 steps only: flagged at 22, normal again from 24, but not cleared before the
    // cool-down ends (step 22 + 1 + 10).
    StragglerDetector d(config, 4);
    const auto brief = [](int s, int r) { return r == 0 && s >= 20 && s < 24 ? 3.0 : 1.0; };
    const std::vector<StragglerChange> c = run(d, 4, 60, 0.02, brief);
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].step, 22);
    EXPECT_FALSE(c[1].flagged);
    EXPECT_EQ(c[1].step, 33);
  }
}

TEST(StragglerDetector, DisabledDecidesNothingAndRanksWithoutUnitsAreNotJudged) {
  StragglerConfig off;
  off.enabled = false;
  StragglerDetector d(off, 2);
  EXPECT_TRUE(run(d, 2, 40, 0.1, [](int s, int r) { return r == 0 && s >= 20 ? 3.0 : 1.0; }).empty());
  StragglerDetector idle(StragglerConfig{}, 3);
  for (int s = 0; s < 30; ++s) EXPECT_TRUE(idle.observe(s, {1e-3, 0.0, s >= 15 ? 3e-3 : 1e-3}).size() <= 1);
  EXPECT_FALSE(idle.flagged(1));
  EXPECT_THROW(idle.observe(31, {1e-3}), Error);
}

TEST(StragglerDetector, TheLineNamesStepRankAndBothRatios) {
  EXPECT_EQ(describe({12, 1, true, 3.016, 2.97}),
            "straggler: step 12: rank 1 flagged (3.02x its history, 2.97x its peers)");
  EXPECT_EQ(describe({40, 0, false, 1.1, 1.05}), "straggler: step 40: rank 0 cleared (1.10x its history, 1.05x its peers)");
}

TEST(StragglerInjection, SlowFormParsesItsFactor) {
  const FailureInjection f = parse_failure_injection("1:10:slow=3,0:4:kill,2:12:slow=1.5", "--inject-failure");
  const FailureInjection::Point* p = f.find(1, 10, FailureInjection::Kind::kSlow);
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->factor, 3);
  EXPECT_DOUBLE_EQ(f.find(2, 12, FailureInjection::Kind::kSlow)->factor, 1.5);
  EXPECT_TRUE(f.at(0, 4, FailureInjection::Kind::kKill));
  for (const char* bad : {"1:10:slow=", "1:10:slow=0.5", "1:10:slow=x", "1:10:slow=3x", "1:10:slow"}) {
    EXPECT_THROW(parse_failure_injection(bad, "--inject-failure"), Error) << bad;
  }
}

TEST(StragglerInjection, LinkFormParsesBandwidthAndLatency) {
  const FailureInjection f = parse_failure_injection("1:10:link=2e6@0.001,0:3:link=5e5,1:20:link=0", "--inject-failure");
  const FailureInjection::Point* p = f.find(1, 10, FailureInjection::Kind::kLink);
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->bytes_per_second, 2e6);
  EXPECT_DOUBLE_EQ(p->latency_seconds, 0.001);
  EXPECT_DOUBLE_EQ(f.find(0, 3, FailureInjection::Kind::kLink)->latency_seconds, 0);
  EXPECT_DOUBLE_EQ(f.find(1, 20, FailureInjection::Kind::kLink)->bytes_per_second, 0);  // the fault ends
  for (const char* bad : {"1:10:link=", "1:10:link=-1", "1:10:link=x", "1:10:link=1e6@", "1:10:link=1e6@-1",
                          "1:10:link=1e6@100"}) {
    EXPECT_THROW(parse_failure_injection(bad, "--inject-failure"), Error) << bad;
  }
}

TEST(LinkEmulator, TakesTheAlphaBetaTimeOfAMessage) {
  LinkEmulator link;
  EXPECT_FALSE(link.active());
  EXPECT_EQ(link.seconds(1 << 20), 0);
  link.set(1e6, 0.002);
  EXPECT_DOUBLE_EQ(link.seconds(10000), 0.002 + 0.01);
  EXPECT_GE(link.delay(10000), 0.012);  // it sleeps at least the model's time
  link.set(0, 0.002);
  EXPECT_FALSE(link.active());
  EXPECT_EQ(link.seconds(10000), 0);
}

TEST(RankStepTimes, PacksIntoItsSlotAndBack) {
  RankStepTimes t;
  t.compute_seconds = {1, 2, 3};
  t.units = {4, 4, 2};
  t.recv_wait_seconds = 0.5;
  t.collective_wait_seconds = 0.25;
  t.send_seconds = 0.125;
  t.sent_bytes = 4096;
  std::vector<double> slot(kRankStepFields);
  pack(t, slot);
  const RankStepTimes u = unpack_rank_step_times(slot);
  EXPECT_EQ(u.compute_seconds, t.compute_seconds);
  EXPECT_EQ(u.units, t.units);
  EXPECT_EQ(u.sent_bytes, 4096);
  EXPECT_DOUBLE_EQ(u.seconds_per_unit(), 6.0 / 10);
  EXPECT_EQ(RankStepTimes{}.seconds_per_unit(), 0);
  // The cold first actions are left out of the speed when there are others.
  t.first_seconds = 2;
  t.first_units = 2;
  pack(t, slot);
  const RankStepTimes w = unpack_rank_step_times(slot);
  EXPECT_EQ(w.first_seconds, 2);
  EXPECT_EQ(w.first_units, 2);
  EXPECT_DOUBLE_EQ(w.seconds_per_unit(), 4.0 / 8);
  t.units = {1, 1, 0};
  t.compute_seconds = {1, 1, 0};
  EXPECT_DOUBLE_EQ(t.seconds_per_unit(), 1.0);  // nothing but first actions: all of them
}

}  // namespace
}  // namespace plait::runtime
