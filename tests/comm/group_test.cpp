// Groups: explicit rank lists of uneven sizes that overlap, created in any arrangement
// without deadlock, with ranks ordered as listed; bad or inconsistent lists fail on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mpi_test_session.h"
#include "plait/comm/communicator.h"
#include "plait/core/error.h"

namespace plait::comm {
namespace {

Communicator& world() { return test::mpi_session().world(); }

// Checks that `made` matches `groups` (ranks of `parent`) on this rank: membership, size, rank
// order, world ranks, and that a reduction sums exactly the members' contributions.
void expect_groups(Communicator& parent, const std::vector<std::vector<int>>& groups,
                   std::vector<std::unique_ptr<Communicator>>& made) {
  ASSERT_EQ(made.size(), groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::vector<int>& g = groups[i];
    const auto position = std::find(g.begin(), g.end(), parent.rank());
    if (position == g.end()) {
      EXPECT_EQ(made[i], nullptr) << "group " << i << " made for a non-member";
      continue;
    }
    ASSERT_NE(made[i], nullptr) << "group " << i << " missing for a member";
    Communicator& c = *made[i];
    EXPECT_EQ(c.size(), static_cast<int>(g.size())) << "group " << i;
    EXPECT_EQ(c.rank(), static_cast<int>(position - g.begin())) << "group " << i;
    int expected_sum = 0;
    for (std::size_t k = 0; k < g.size(); ++k) {
      EXPECT_EQ(c.world_rank_of(static_cast<int>(k)), parent.world_rank_of(g[k]));
      expected_sum += parent.world_rank_of(g[k]) + 1;
    }
    const int world_rank = parent.world_rank_of(parent.rank());
    EXPECT_EQ(c.allreduce(static_cast<double>(world_rank + 1), ReduceOp::kSum), expected_sum)
        << "group " << i;
  }
}

TEST(Groups, UnevenOverlappingGroupsInListedOrder) {
  Communicator& comm = world();
  const int n = comm.size();
  if (n < 4) GTEST_SKIP() << "needs 4 ranks";
  std::vector<int> reversed;
  for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
  // Sizes 3, 1, 2, n, 2 and 3; rank 1 is in four groups, rank 3 in none of the first three.
  // {0,1}, {1,2}, {2,0} form a cycle that would deadlock if ranks joined in different orders.
  const std::vector<std::vector<int>> groups = {
      {0, 1, 2}, {n - 1}, {1, n - 1}, reversed, {0, 1}, {1, 2}, {2, 0}};
  std::vector<std::unique_ptr<Communicator>> made = comm.create_groups(groups);
  expect_groups(comm, groups, made);
}

TEST(Groups, GroupsOfAGroupMapToWorldRanks) {
  Communicator& comm = world();
  const int n = comm.size();
  if (n < 4) GTEST_SKIP() << "needs 4 ranks";
  // The odd world ranks, then within them every other one (ranks of the odd group).
  std::vector<int> odd;
  for (int r = 1; r < n; r += 2) odd.push_back(r);
  std::vector<std::unique_ptr<Communicator>> outer = comm.create_groups({odd});
  if (outer[0] == nullptr) return;
  Communicator& odd_group = *outer[0];
  std::vector<int> every_other;
  for (int r = 0; r < odd_group.size(); r += 2) every_other.push_back(r);
  const std::vector<std::vector<int>> inner_groups = {every_other, {odd_group.size() - 1}};
  std::vector<std::unique_ptr<Communicator>> inner = odd_group.create_groups(inner_groups);
  expect_groups(odd_group, inner_groups, inner);
  if (inner[0] != nullptr) {
    EXPECT_EQ(inner[0]->world_rank_of(0), 1);
  }
}

TEST(Groups, DifferentListsOnDifferentRanksFailOnEveryRank) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::vector<int>> groups = {{0, 1}};
  if (comm.rank() == 1) groups = {{1, 0}};
  try {
    comm.create_groups(groups);
    FAIL() << "inconsistent group lists accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the ranks passed different group lists"),
              std::string::npos)
        << e.what();
  }
}

TEST(Groups, BadListsFailOnEveryRank) {
  Communicator& comm = world();
  const int n = comm.size();
  auto message = [&](const std::vector<std::vector<int>>& groups) -> std::string {
    try {
      comm.create_groups(groups);
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(message({{0}, {}}), "create_groups: group 1 {}: a group needs at least one rank");
  EXPECT_EQ(message({{0, 0}}), "create_groups: group 0 {0, 0}: rank 0 appears twice");
  EXPECT_EQ(message({{0, n}}), "create_groups: group 0 {0, " + std::to_string(n) + "}: rank " +
                                   std::to_string(n) + " is outside 0.." + std::to_string(n - 1));
  // The world is still usable afterwards.
  EXPECT_EQ(comm.allreduce(1.0, ReduceOp::kSum), static_cast<double>(n));
}

}  // namespace
}  // namespace plait::comm
