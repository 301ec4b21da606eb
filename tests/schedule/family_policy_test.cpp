#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "plait/schedule/layout.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/validator.h"

namespace plait::schedule {
namespace {

// What a generated schedule shows of its family's policy, per shape.
struct Observed {
  bool split = false, fused = false;         // B/W actions, BW actions
  bool backward_before_forward = false;      // some rank runs a backward before its last forward
  std::vector<int> units;                    // units per rank
  std::vector<int> peak_before_b;            // most units with F started, B or BW not finished
  std::vector<int> peak_live;                // most units with F started, W or BW not finished
};

Observed observe(const Schedule& s) {
  Observed o;
  for (const auto& actions : s.ranks) {
    int before_b = 0, live = 0, peak_b = 0, peak = 0, forwards = 0, total_forwards = 0;
    for (const Action& a : actions) total_forwards += a.kind == ActionKind::F;
    for (const Action& a : actions) {
      switch (a.kind) {
        case ActionKind::F: ++before_b, ++live, ++forwards; break;
        case ActionKind::B: --before_b, o.split = true; break;
        case ActionKind::W: --live, o.split = true; break;
        case ActionKind::BW: --before_b, --live, o.fused = true; break;
      }
      if (a.kind != ActionKind::F && forwards < total_forwards) o.backward_before_forward = true;
      peak_b = std::max(peak_b, before_b);
      peak = std::max(peak, live);
    }
    o.units.push_back(total_forwards);
    o.peak_before_b.push_back(peak_b);
    o.peak_live.push_back(peak);
  }
  return o;
}

// The first way `family`'s policy fields disagree with what its generator produced for `shape`,
// or "" (forwards_first's "not" side is checked over the whole grid, below). A rank never holds
// more units than the family's limit (plus its deferred W's), and holds exactly that many once
// m >= 2p, where every family's limit binds (ZB-V's greedy order reaches its 2p from m = 2p - 1;
// the 1F1B patterns reach theirs whenever the rank has that many units).
std::string policy_mismatch(const ScheduleFamily& family, const PipelineShape& shape, const Observed& o,
                            const Schedule& s) {
  if (s.layout != placed_layout(family.placement, shape.stages, shape.chunks, shape.microbatches, shape.segments)) {
    return std::string("layout is not the ") + placement_name(family.placement) + " placement";
  }
  if (family.split_backward ? o.fused : o.split) {
    return family.split_backward ? "split_backward, but the schedule has fused BW actions"
                                 : "fused backward, but the schedule has B/W actions";
  }
  if (family.forwards_first && o.backward_before_forward) return "forwards_first, but a backward precedes a forward";
  const bool binds = shape.microbatches >= 2 * shape.stages;
  for (int r = 0; r < shape.stages; ++r) {
    const int limit = family.limit_of(shape, r);
    const int bound = limit > 0 ? std::min(limit, o.units[r]) : o.units[r];
    if (o.peak_before_b[r] > bound || (binds && o.peak_before_b[r] != bound)) {
      return "rank " + std::to_string(r) + " holds " + std::to_string(o.peak_before_b[r]) +
             " units before their B, in_flight_limit says " + std::to_string(bound);
    }
    const int with_w = limit > 0 ? std::min(limit + family.deferred_of(shape, r), o.units[r]) : o.units[r];
    if (o.peak_live[r] > with_w || (binds && o.peak_live[r] != with_w)) {
      return "rank " + std::to_string(r) + " holds " + std::to_string(o.peak_live[r]) +
             " units before their W, in_flight_limit + deferred_weights says " + std::to_string(with_w);
    }
  }
  if (!family.one_segment_twin.empty() && shape.segments == 1) {
    const ScheduleFamily* twin = find_schedule_family(family.one_segment_twin);
    if (!twin) return "one_segment_twin '" + family.one_segment_twin + "' is not a family";
    if (!unsupported_reason(*twin, shape).empty()) return "its twin rejects the shape";
    if (generate_schedule(*twin, shape) != s) return "differs from its twin " + twin->name + " at k = 1";
  }
  return {};
}

// Every shape of the grid p 1..8, m 1..12, k 1..4, v 1..3 that `family` accepts; the first
// mismatch, or "" when the fields describe every schedule its generator produces.
std::string check_family(const ScheduleFamily& family, int* shapes = nullptr) {
  bool any_backward_early = false;
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 12; ++m) {
      for (int k = 1; k <= 4; ++k) {
        for (int v = 1; v <= 3; ++v) {
          const PipelineShape shape{p, v, m, k};
          if (!unsupported_reason(family, shape).empty()) continue;
          const Schedule s = family.generate(shape);
          const Observed o = observe(s);
          any_backward_early = any_backward_early || o.backward_before_forward;
          const std::string why = policy_mismatch(family, shape, o, s);
          if (!why.empty()) {
            return family.name + " p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m) +
                   " k=" + std::to_string(k) + ": " + why;
          }
          if (shapes) ++*shapes;
        }
      }
    }
  }
  if (!family.forwards_first && !any_backward_early) {
    return family.name + ": not forwards_first, but every schedule runs all forwards first";
  }
  return {};
}

TEST(FamilyPolicy, FieldsDescribeWhatEveryGeneratorProduces) {
  for (const ScheduleFamily& family : schedule_families()) {
    int shapes = 0;
    EXPECT_EQ(check_family(family, &shapes), "");
    EXPECT_GT(shapes, 0) << family.name;
    // The chunk rule follows the placement: one chunk contiguous, the V two, interleaved v >= 2.
    const int expected_chunks = family.placement == StagePlacement::contiguous ? 1
                                : family.placement == StagePlacement::v_shape  ? 2
                                                                               : 0;
    EXPECT_EQ(family.fixed_chunks, expected_chunks) << family.name;
    if (!family.one_segment_twin.empty()) {
      EXPECT_TRUE(family.sequence_level) << family.name;
      EXPECT_FALSE(find_schedule_family(family.one_segment_twin)->sequence_level) << family.name;
    }
  }
}

// The check fails a family whose fields disagree with its generator: each field changed alone.
TEST(FamilyPolicy, AFamilyWithAWrongFieldFails) {
  auto wrong = [](const char* name, auto change) {
    ScheduleFamily f = *find_schedule_family(name);
    change(f);
    return check_family(f);
  };
  EXPECT_NE(wrong("1f1b", [](ScheduleFamily& f) { f.split_backward = true; }), "");
  EXPECT_NE(wrong("zb-h1", [](ScheduleFamily& f) { f.split_backward = false; }), "");
  EXPECT_NE(wrong("zb-v", [](ScheduleFamily& f) { f.placement = StagePlacement::interleaved; }), "");
  EXPECT_NE(wrong("interleaved", [](ScheduleFamily& f) { f.placement = StagePlacement::v_shape; }), "");
  EXPECT_NE(wrong("1f1b", [](ScheduleFamily& f) { f.forwards_first = true; }), "");
  EXPECT_NE(wrong("gpipe", [](ScheduleFamily& f) { f.forwards_first = false; }), "");
  EXPECT_NE(wrong("gpipe", [](ScheduleFamily& f) { f.in_flight_limit = find_schedule_family("1f1b")->in_flight_limit; }), "");
  EXPECT_NE(wrong("1f1b", [](ScheduleFamily& f) { f.in_flight_limit = nullptr; }), "");
  EXPECT_NE(wrong("seq1f1b", [](ScheduleFamily& f) { f.in_flight_limit = find_schedule_family("interleaved")->in_flight_limit; }), "");
  EXPECT_NE(wrong("zb-h1", [](ScheduleFamily& f) { f.deferred_weights = nullptr; }), "");
  EXPECT_NE(wrong("seq1f1b", [](ScheduleFamily& f) { f.one_segment_twin = "zb-h1"; }), "");
  EXPECT_NE(wrong("seq-zb", [](ScheduleFamily& f) { f.one_segment_twin = "pipedream"; }), "");
}

// A family that builds its order for the costs keeps its policy under any costs: the placement,
// the split, and never more units in flight than its limit (ZB-V's memory bound); every order
// validates. With empty costs it is the F = B = W order.
TEST(FamilyPolicy, OrdersBuiltForCostsKeepThePolicy) {
  std::mt19937 rng(14);
  std::uniform_real_distribution<double> cost(0.2, 3.0);
  int built = 0;
  for (const ScheduleFamily& family : schedule_families()) {
    if (!family.generate_for_costs) continue;
    for (int p = 1; p <= 6; ++p) {
      for (int m : {1, 3, 8, 13, 24}) {
        const PipelineShape shape{p, family.fixed_chunks > 0 ? family.fixed_chunks : 2, m, 1};
        if (!unsupported_reason(family, shape).empty()) continue;
        EXPECT_EQ(family.generate_for_costs(shape, UnitCosts{}), family.generate(shape)) << family.name;
        const double f = cost(rng), b = cost(rng), w = cost(rng), head = cost(rng), link = cost(rng) / 4;
        UnitCosts costs;
        costs.unit_seconds = [=](int, ActionKind kind, std::int32_t, std::int32_t vstage) {
          const double t = kind == ActionKind::F ? f : kind == ActionKind::B ? b : w;
          return vstage == 2 * p - 1 ? t + head : t;  // the last stage's LM head
        };
        costs.transfer_seconds = [=](int, int, std::int32_t) { return link; };
        const Schedule s = family.generate_for_costs(shape, costs);
        const auto violation = validate(s);
        ASSERT_FALSE(violation.has_value()) << family.name << " p=" << p << " m=" << m << "\n" << describe(s, *violation);
        const Observed o = observe(s);
        EXPECT_EQ(s.layout, placed_layout(family.placement, p, shape.chunks, m, 1)) << family.name;
        EXPECT_EQ(o.split, family.split_backward) << family.name;
        for (int r = 0; r < p; ++r) {
          const int limit = family.limit_of(shape, r);
          if (limit > 0) {
            EXPECT_LE(o.peak_live[r], limit + family.deferred_of(shape, r)) << family.name << " p=" << p << " m=" << m;
          }
        }
        ++built;
      }
    }
  }
  EXPECT_GT(built, 0);
}

// The V block families' limits count a bounded number of micro-batches (controllable_memory_v.cpp);
// the full order's peaks agree for every m up to 64.
TEST(FamilyPolicy, BlockLimitsAreTheFullOrdersPeaks) {
  for (const char* name : {"v-min", "v-half"}) {
    const ScheduleFamily& f = *find_schedule_family(name);
    for (int p = 1; p <= 8; ++p) {
      for (int k = 1; k <= 4; ++k) {
        for (int m = 1; m <= 64; m += (m < 24 ? 1 : 7)) {
          const PipelineShape shape{p, 2, m, k};
          const Observed o = observe(f.generate(shape));
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(o.peak_before_b[r], f.limit_of(shape, r)) << name << " p=" << p << " k=" << k << " m=" << m << " r=" << r;
            ASSERT_EQ(o.peak_live[r], f.limit_of(shape, r) + f.deferred_of(shape, r))
                << name << " p=" << p << " k=" << k << " m=" << m << " r=" << r;
          }
        }
      }
    }
  }
}

// The placement formulas and their inverse.
TEST(FamilyPolicy, PlacementsAndTheirInverse) {
  for (int p = 1; p <= 6; ++p) {
    EXPECT_EQ(placed_layout(StagePlacement::v_shape, p, 2, 3, 1), v_shape_layout(p, 3, 1));
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(placed_vstage(StagePlacement::v_shape, p, r, 0), r);
      EXPECT_EQ(placed_vstage(StagePlacement::v_shape, p, r, 1), 2 * p - 1 - r);
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(placed_vstage(StagePlacement::interleaved, p, r, c), c * p + r);
        EXPECT_EQ(placed_position(StagePlacement::interleaved, p, placed_vstage(StagePlacement::interleaved, p, r, c)), r);
      }
      for (int c = 0; c < 2; ++c) {
        EXPECT_EQ(placed_position(StagePlacement::v_shape, p, placed_vstage(StagePlacement::v_shape, p, r, c)), r);
      }
    }
  }
}

}  // namespace
}  // namespace plait::schedule
