// The sharded-state formula by hand for each level, with and without offload, and shard bounds
// (equal and memory-proportional, aligned, covering the buffer).
#include <gtest/gtest.h>

#include "plait/spec/sharded_state.h"

namespace plait::spec {
namespace {

TEST(ShardBounds, EqualSharesAreAlignedAndCoverTheBuffer) {
  const std::vector<std::uint64_t> equal(4, 1);
  const std::vector<std::int64_t> b = shard_bounds(1000, equal);
  EXPECT_EQ(b, (std::vector<std::int64_t>{0, 240, 496, 736, 1000}));
  for (std::int64_t x : b) {
    if (x != 1000) {
      EXPECT_EQ(x % 16, 0);
    }
  }
}

TEST(ShardBounds, MemoryProportionalSharesGiveSmallDevicesSmallShards) {
  // 16 GiB, 80 GiB, 24 GiB devices in one group.
  const std::vector<std::uint64_t> memory = {16ull << 30, 80ull << 30, 24ull << 30};
  const std::vector<std::int64_t> b = shard_bounds(120000, memory);
  EXPECT_EQ(b, (std::vector<std::int64_t>{0, 16000, 96000, 120000}));
  // Fewer elements than 16 per holder: the early shards are empty, the last takes the rest.
  EXPECT_EQ(shard_bounds(10, std::vector<std::uint64_t>(3, 1)), (std::vector<std::int64_t>{0, 0, 0, 10}));
  EXPECT_THROW(shard_bounds(10, std::vector<std::uint64_t>{1, 0}), std::exception);
}

TEST(ShardedState, EachLevelOnTheDeviceInFp32) {
  const std::int64_t E = 1000, S = 250;
  const ShardedStateBytes l0 = sharded_state_bytes(E, S, {0, false}, Precision::fp32);
  EXPECT_EQ(l0.parameters_resident, 4000);
  EXPECT_EQ(l0.gradients_idle, 4000);
  EXPECT_EQ(l0.optimizer, 8000);  // level 0 updates all of E on every holder
  EXPECT_EQ(l0.device_peak(), 16000);
  const ShardedStateBytes l1 = sharded_state_bytes(E, S, {1, false}, Precision::fp32);
  EXPECT_EQ(l1.optimizer, 2000);
  EXPECT_EQ(l1.gradients_reduced, 4000);
  EXPECT_EQ(l1.device_peak(), 4000 + 4000 + 2000);
  const ShardedStateBytes l2 = sharded_state_bytes(E, S, {2, false}, Precision::fp32);
  EXPECT_EQ(l2.gradients_accumulating, 4000);
  EXPECT_EQ(l2.gradients_reduced, 1000);
  EXPECT_EQ(l2.gradients_idle, 0);
  const ShardedStateBytes l3 = sharded_state_bytes(E, S, {3, false}, Precision::fp32);
  EXPECT_EQ(l3.parameters_resident, 1000);
  EXPECT_EQ(l3.parameters_gathered, 4000);
  EXPECT_EQ(l3.host_peak(), 0);
}

TEST(ShardedState, OffloadMovesTheOptimizerAndParkedWeightsToTheHost) {
  const std::int64_t E = 1000, S = 250;
  const ShardedStateBytes f1 = sharded_state_bytes(E, S, {1, true}, Precision::fp32);
  EXPECT_EQ(f1.optimizer, 0);
  EXPECT_EQ(f1.host_parameters, 1000);  // the fp32 master shard
  EXPECT_EQ(f1.host_optimizer, 2000);
  EXPECT_EQ(f1.host_gradients, 1000);
  const ShardedStateBytes f3 = sharded_state_bytes(E, S, {3, true}, Precision::fp32);
  EXPECT_EQ(f3.parameters_resident, 0);
  EXPECT_EQ(f3.gradients_reduced, 0);
  // bf16: 2-byte weights, the 12-byte optimizer state already holds the fp32 master.
  const ShardedStateBytes b3 = sharded_state_bytes(E, S, {3, true}, Precision::bf16);
  EXPECT_EQ(b3.parameters_gathered, 2000);
  EXPECT_EQ(b3.host_parameters, 0);
  EXPECT_EQ(b3.host_optimizer, 3000);
}

}  // namespace
}  // namespace plait::spec
