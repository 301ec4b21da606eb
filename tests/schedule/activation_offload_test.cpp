// The activation offload table (schedule/activation_offload.h): on 1F1B's first stage (p 4,
// m 8) the units whose B comes at least four actions after their F move, with the release two
// actions after the F and the prefetch one before the B; a chunk that does not offload moves
// nothing; and the points per action index are the table's.
#include "plait/schedule/activation_offload.h"

#include <gtest/gtest.h>

#include "plait/schedule/schedule.h"
#include "plait/schedule/schedule_family.h"

namespace plait::schedule {
namespace {

TEST(ActivationOffload, OneFOneBFirstStageMovesTheUnitsAwayForAnAction) {
  const Schedule s = generate_schedule("1f1b", {4, 1, 8, 1});
  // Rank 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7.
  const std::vector<UnitOffload> units = activation_offloads(s.ranks[0], {true});
  const std::vector<std::pair<int, int>> want = {{0, 4}, {1, 6}, {2, 8}, {3, 10}, {5, 12}, {7, 13}, {9, 14}, {11, 15}};
  ASSERT_EQ(units.size(), want.size());
  for (std::size_t i = 0; i < units.size(); ++i) {
    EXPECT_EQ(units[i].microbatch, static_cast<int>(i));
    EXPECT_EQ(units[i].forward, want[i].first);
    EXPECT_EQ(units[i].backward, want[i].second);
    EXPECT_EQ(units[i].release, want[i].first + 2);
    EXPECT_EQ(units[i].prefetch, want[i].second - 1);
  }
  // The last stage runs each B right after its F: nothing to overlap, nothing moves.
  EXPECT_TRUE(activation_offloads(s.ranks[3], {true}).empty());
  EXPECT_TRUE(activation_offloads(s.ranks[0], {false}).empty());

  const OffloadPoints p = offload_points(units, s.ranks[0].size());
  EXPECT_EQ(p.after_forward[0], 0);
  EXPECT_EQ(p.release[2], (std::vector<std::int32_t>{0}));
  EXPECT_EQ(p.prefetch[3], (std::vector<std::int32_t>{0}));
  EXPECT_EQ(p.before_backward[4], 0);
  EXPECT_EQ(p.before_backward[5], -1);
}

// Seq1F1B: a micro-batch's segments are units of their own (their K/V stays: the table moves
// only what spec::UnitMemory::forward_activations counts); the later segment's B comes first.
TEST(ActivationOffload, SequenceSegmentsAreUnitsOfTheirOwn) {
  const Schedule s = generate_schedule("seq1f1b", {2, 1, 4, 2});
  const std::vector<UnitOffload> units = activation_offloads(s.ranks[0], {true});
  ASSERT_FALSE(units.empty());
  for (const UnitOffload& u : units) {
    EXPECT_EQ(s.ranks[0][static_cast<std::size_t>(u.forward)].kind, ActionKind::F);
    EXPECT_TRUE(is_backward_input(s.ranks[0][static_cast<std::size_t>(u.backward)].kind));
    EXPECT_EQ(s.ranks[0][static_cast<std::size_t>(u.backward)].segment, u.segment);
    EXPECT_GT(u.prefetch, u.release);
  }
}

}  // namespace
}  // namespace plait::schedule
