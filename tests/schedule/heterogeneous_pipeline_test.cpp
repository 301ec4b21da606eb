#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "plait/core/error.h"
#include "plait/schedule/heterogeneous_pipeline.h"
#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"
#include "plait/schedule/unit_index.h"
#include "plait/schedule/validator.h"

namespace plait::schedule {
namespace {

// Costs where rank r computes `speed[r]` times faster than a reference device and messages take
// `link` seconds; F = 1, B = W = 1 (F = B = W, the textbook setting) per unit at speed 1.
HeterogeneousCosts speed_costs(const std::vector<double>& speed, double link = 0.0) {
  HeterogeneousCosts c;
  c.unit_seconds = [speed](int rank, ActionKind, std::int32_t, std::int32_t) { return 1.0 / speed[rank]; };
  if (link > 0) c.transfer_seconds = [link](int, int, std::int32_t) { return link; };
  return c;
}

// Which rank runs the forward of each (micro-batch, vstage), from the action lists.
std::map<std::pair<int, int>, int> forward_ranks(const Schedule& s) {
  std::map<std::pair<int, int>, int> out;
  for (int r = 0; r < s.num_ranks(); ++r) {
    for (const Action& a : s.ranks[r]) {
      if (a.kind == ActionKind::F && a.segment == 0) out[{a.microbatch, s.layout.vstage(r, a.chunk)}] = r;
    }
  }
  return out;
}

// Random heterogeneous layouts for every family: group widths 1..4, speeds 0.25..4, uneven
// micro-batch counts (some zero), random segments and message times. Every schedule validates,
// including the blocking deadlock check, and every rank runs exactly its micro-batch count on
// each chunk it holds.
TEST(HeterogeneousPipeline, RandomLayoutsValidateForEveryFamily) {
  std::mt19937 rng(20250711);
  int checked = 0, short_of_microbatches = 0;
  for (int trial = 0; trial < 160; ++trial) {
    const int groups = 1 + static_cast<int>(rng() % 5);
    HeterogeneousPipeline p;
    p.num_microbatches = 1 + static_cast<int>(rng() % 12);
    int next_rank = 0;
    std::vector<int> ranks;
    for (int g = 0; g < groups; ++g) {
      const int width = 1 + static_cast<int>(rng() % std::min(4, p.num_microbatches));
      std::vector<int> members(width);
      for (int& r : members) r = next_rank++;
      p.stage_ranks.push_back(members);
      // Counts: every rank one, the rest at random (a zero count is allowed but rare).
      std::vector<int> counts(width, 1);
      for (int i = width; i < p.num_microbatches; ++i) ++counts[rng() % width];
      if (width > 1 && trial % 7 == 0 && counts[0] > 1) {
        counts[1] += counts[0];
        counts[0] = 0;
      }
      p.stage_counts.push_back(counts);
    }
    std::shuffle(p.stage_ranks.begin(), p.stage_ranks.end(), rng);  // rank ids not in group order
    // Keep counts aligned with their groups' widths after the shuffle.
    for (int g = 0; g < groups; ++g) {
      p.stage_counts[g].resize(p.stage_ranks[g].size(), 0);
      int sum = 0;
      for (int c : p.stage_counts[g]) sum += c;
      p.stage_counts[g].back() += p.num_microbatches - sum;
      if (p.stage_counts[g].back() < 0) {
        std::fill(p.stage_counts[g].begin(), p.stage_counts[g].end(), 0);
        p.stage_counts[g][0] = p.num_microbatches;
      }
    }
    std::vector<double> speed(next_rank);
    for (double& s : speed) s = 0.25 * (1 + rng() % 16);
    const double link = (rng() % 3) * 0.3;
    for (const ScheduleFamily& family : schedule_families()) {
      HeterogeneousPipeline q = p;
      q.num_segments = family.sequence_level ? 1 + static_cast<int>(rng() % 4) : 1;
      q.chunks = family.fixed_chunks > 0 ? family.fixed_chunks : 2 + static_cast<int>(rng() % 2);
      // DualPipeV's phases need m >= 2 x the groups; every other family takes any layout here.
      if (family.unsupported && !family.unsupported(q.shape()).empty()) {
        EXPECT_EQ(family.name, "dualpipe-v");
        ++short_of_microbatches;
        continue;
      }
      ASSERT_EQ(heterogeneous_unsupported(family.name, q), "") << family.name;
      Schedule s;
      try {
        s = heterogeneous_schedule(family.name, q, speed_costs(speed, link));
      } catch (const Error& e) {
        FAIL() << family.name << " trial " << trial << " k=" << q.num_segments << " v=" << q.chunks
               << ": " << e.what();
      }
      const auto violation = validate(s);
      ASSERT_FALSE(violation.has_value()) << family.name << " trial " << trial << "\n"
                                          << format_schedule(s) << describe(s, *violation);
      // The pipeline reads back from the schedule (what a re-balance regenerates from).
      const HeterogeneousPipeline back = heterogeneous_pipeline_of(s, family);
      EXPECT_EQ(back.stage_ranks, q.stage_ranks) << family.name << " trial " << trial;
      EXPECT_EQ(back.stage_counts, q.stage_counts) << family.name << " trial " << trial;
      EXPECT_EQ(back.shape().chunks, q.chunks);
      EXPECT_EQ(back.num_segments, q.num_segments);
      for (int g = 0; g < groups; ++g) {
        for (std::size_t i = 0; i < q.stage_ranks[g].size(); ++i) {
          const int r = q.stage_ranks[g][i];
          const long forwards = std::count_if(s.ranks[r].begin(), s.ranks[r].end(),
                                              [](const Action& a) { return a.kind == ActionKind::F; });
          EXPECT_EQ(forwards, long{q.stage_counts[g][i]} * q.num_segments * s.layout.num_chunks(r))
              << family.name << " trial " << trial << " rank " << r;
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked + short_of_microbatches, 160 * static_cast<int>(schedule_families().size()));
  EXPECT_LT(short_of_microbatches, 160);  // DualPipeV runs on the trials with m >= 2P
}

// A generated pipeline replicated over data-parallel replicas (rank = replica x p + position) is
// a heterogeneous pipeline of equal counts; a layout the family does not place is refused.
TEST(HeterogeneousPipeline, ReadsBackReplicatedGeneratedSchedulesAndRefusesOtherPlacements) {
  for (const char* name : {"seq1f1b", "interleaved", "zb-v"}) {
    const ScheduleFamily& f = schedule_family(name);
    const int chunks = f.fixed_chunks > 0 ? f.fixed_chunks : 2;
    const Schedule s = replicate(generate_schedule(f, {2, chunks, 4, f.sequence_level ? 2 : 1}), 2);
    const HeterogeneousPipeline p = heterogeneous_pipeline_of(s, f);
    EXPECT_EQ(p.stage_ranks, (std::vector<std::vector<int>>{{0, 2}, {1, 3}})) << name;
    EXPECT_EQ(p.stage_counts, (std::vector<std::vector<int>>{{4, 4}, {4, 4}})) << name;
    EXPECT_EQ(p.num_microbatches, 8);
    EXPECT_EQ(p.chunks, chunks);
  }
  // Interleaved's placement read as ZB-V's V: rank 0 holds stages 0 and 2, not 0 and 3.
  const Schedule interleaved = generate_schedule("interleaved", {2, 2, 4, 1});
  EXPECT_THROW(heterogeneous_pipeline_of(interleaved, schedule_family("zb-v")), Error);
}

// With one rank per stage and equal costs, the 1F1B policy is 1F1B action for action, the ZB-V
// policy is the ZB-V generator, and the GPipe policy is GPipe.
TEST(HeterogeneousPipeline, OneRankPerStageReproducesTheGenerators) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 10; ++m) {
      HeterogeneousPipeline h;
      h.num_microbatches = m;
      for (int g = 0; g < p; ++g) {
        h.stage_ranks.push_back({g});
        h.stage_counts.push_back({m});
      }
      const auto costs = speed_costs(std::vector<double>(p, 1.0));
      for (const char* name : {"gpipe", "1f1b", "zb-v"}) {
        h.chunks = std::string(name) == "zb-v" ? 2 : 1;
        EXPECT_EQ(heterogeneous_schedule(name, h, costs), generate_schedule(name, {p, h.chunks, m, 1}))
            << name << " p=" << p << " m=" << m;
      }
    }
  }
}

// Zorse's routing made static: a group of a 2x-fast and a 1x rank taking micro-batches 2:1 gets
// them interleaved in arrival order (the fast rank never waits for a run of three), and each
// rank receives exactly its count.
TEST(HeterogeneousPipeline, RoutingGivesEachRankItsCountInArrivalOrder) {
  HeterogeneousPipeline h;
  h.num_microbatches = 9;
  h.stage_ranks = {{0}, {1, 2}};
  h.stage_counts = {{9}, {6, 3}};
  const auto costs = speed_costs({4.0, 2.0, 1.0});
  const Layout layout = heterogeneous_layout(h, StagePlacement::contiguous);
  const auto routing = route_microbatches(h, layout, costs);
  ASSERT_EQ(routing.size(), 2u);
  EXPECT_EQ(routing[0], std::vector<std::int32_t>(9, 0));
  EXPECT_EQ(std::count(routing[1].begin(), routing[1].end(), 1), 6);
  EXPECT_EQ(std::count(routing[1].begin(), routing[1].end(), 2), 3);
  // Most remaining work first: 6 x 0.75 (fast) vs 3 x 1.5 (slow) tie -> the rank free first...
  // then the pattern alternates so that no rank takes three in a row.
  for (int i = 0; i + 2 < 9; ++i) {
    EXPECT_FALSE(routing[1][i] == routing[1][i + 1] && routing[1][i] == routing[1][i + 2])
        << "three in a row at " << i;
  }
  // The schedule runs what the routing says.
  const Schedule s = heterogeneous_schedule("1f1b", h, costs);
  for (const auto& [unit, rank] : forward_ranks(s)) {
    EXPECT_EQ(rank, routing[unit.second][unit.first]) << "micro-batch " << unit.first;
  }
}

// Global ids follow the first group's estimated completion order: rank 0 (3x faster) finishes
// its first three micro-batches before rank 1 finishes one.
TEST(HeterogeneousPipeline, FirstGroupIdsFollowCompletionOrder) {
  HeterogeneousPipeline h;
  h.num_microbatches = 8;
  h.stage_ranks = {{0, 1}};
  h.stage_counts = {{6, 2}};
  const auto routing = route_microbatches(h, heterogeneous_layout(h, StagePlacement::contiguous), speed_costs({3.0, 1.0}));
  EXPECT_EQ(routing[0], (std::vector<std::int32_t>{0, 0, 0, 1, 0, 0, 0, 1}));
}

// A rank faster than the groups after it may hold more units in flight than 1F1B's P - g (its
// micro-batches take longer to come back); alike ranks get exactly 1F1B's and Seq1F1B's limits.
TEST(HeterogeneousPipeline, InFlightLimitsFollowTheFamilyWarmUp) {
  HeterogeneousPipeline h;
  h.num_microbatches = 8;
  h.stage_ranks = {{0}, {1}, {2}, {3}};
  h.stage_counts = {{8}, {8}, {8}, {8}};
  const auto alike = speed_costs({1, 1, 1, 1});
  const Layout layout = heterogeneous_layout(h, StagePlacement::contiguous);
  EXPECT_EQ(heterogeneous_in_flight_limits("1f1b", h, layout, alike), (std::vector<int>{4, 3, 2, 1}));
  h.num_segments = 3;
  const Layout seq_layout = heterogeneous_layout(h, StagePlacement::contiguous);
  EXPECT_EQ(heterogeneous_in_flight_limits("seq1f1b", h, seq_layout, alike), (std::vector<int>{6, 5, 4, 3}));
  EXPECT_EQ(heterogeneous_in_flight_limits("gpipe", h, seq_layout, alike), (std::vector<int>{0, 0, 0, 0}));
  h.num_segments = 1;
  // Rank 0 is 3x faster than the rest: three later groups of unit time 3 / its 1 -> 1 + 9; off
  // lock-step every limit is doubled.
  EXPECT_EQ(heterogeneous_in_flight_limits("1f1b", h, layout, speed_costs({3, 1, 1, 1})),
            (std::vector<int>{20, 6, 4, 2}));
  // Alike ranks in groups of different widths are off lock-step too.
  h.stage_ranks = {{0}, {1}, {2, 4}, {3}};
  h.stage_counts = {{8}, {8}, {4, 4}, {8}};
  EXPECT_EQ(heterogeneous_in_flight_limits("1f1b", h, heterogeneous_layout(h, StagePlacement::contiguous), speed_costs({1, 1, 1, 1, 1})),
            (std::vector<int>{8, 6, 4, 2, 4}));
}

TEST(HeterogeneousPipeline, RejectsInconsistentPipelines) {
  HeterogeneousPipeline h;
  h.num_microbatches = 4;
  h.stage_ranks = {{0, 1}, {2}};
  h.stage_counts = {{2, 1}, {4}};
  const auto costs = speed_costs({1, 1, 1});
  try {
    heterogeneous_schedule("1f1b", h, costs);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("group 0 add up to 3, expected 4"), std::string::npos) << e.what();
  }
  h.stage_counts = {{2, 2}, {4}};
  h.stage_ranks = {{0, 1}, {1}};
  EXPECT_THROW(heterogeneous_schedule("1f1b", h, costs), Error);  // rank 1 twice
  h.stage_ranks = {{0, 1}, {2}};
  h.num_segments = 2;
  EXPECT_NE(heterogeneous_unsupported("1f1b", h).find("segments must be 1"), std::string::npos);
  EXPECT_NE(heterogeneous_unsupported("nope", h).find("unknown schedule"), std::string::npos);
  EXPECT_THROW(heterogeneous_schedule("gpipe", h, costs), Error);
}

}  // namespace
}  // namespace plait::schedule
