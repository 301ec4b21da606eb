// ReservedBuffer: the address stays while the memory is committed and decommitted; the tracker
// follows; committed memory is zero; a decommitted buffer is inaccessible (it faults).
#include "plait/core/reserved_buffer.h"

#include <gtest/gtest.h>

namespace plait {
namespace {

TEST(ReservedBuffer, CommitAndDecommitKeepTheAddressAndFollowTheTracker) {
  MemoryTracker t;
  ReservedBuffer<float> b(t, MemoryCategory::kParameters, 3000);
  EXPECT_TRUE(b.committed());
  EXPECT_EQ(t.current(MemoryCategory::kParameters), 3000 * sizeof(float));
  float* address = b.data();
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1.0f + static_cast<float>(i);
  b.decommit();
  EXPECT_FALSE(b.committed());
  EXPECT_EQ(t.current(MemoryCategory::kParameters), 0u);
  EXPECT_EQ(t.peak(MemoryCategory::kParameters), 3000 * sizeof(float));
  b.decommit();  // idempotent
  b.commit();
  EXPECT_EQ(b.data(), address);
  EXPECT_EQ(t.current(MemoryCategory::kParameters), 3000 * sizeof(float));
  // The old contents went back to the system: committed memory starts at zero.
  for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], 0.0f) << i;
}

TEST(ReservedBuffer, StartsDecommittedWhenAskedAndCommitsWithinTheCapacity) {
  MemoryTracker t(10000);
  ReservedBuffer<float> b(t, MemoryCategory::kGradients, 2000, false);
  EXPECT_EQ(t.current_total(), 0u);
  t.allocate(MemoryCategory::kActivations, 3000);
  EXPECT_THROW(b.commit(), OutOfMemoryError);  // 8000 + 3000 > 10000
  EXPECT_FALSE(b.committed());
  EXPECT_EQ(t.current(MemoryCategory::kGradients), 0u);
  t.release(MemoryCategory::kActivations, 3000);
  b.commit();
  EXPECT_EQ(t.current(MemoryCategory::kGradients), 8000u);
}

TEST(ReservedBuffer, MovingTransfersOwnership) {
  MemoryTracker t;
  ReservedBuffer<float> a(t, MemoryCategory::kParameters, 10);
  a[3] = 7.0f;
  ReservedBuffer<float> b = std::move(a);
  EXPECT_EQ(b[3], 7.0f);
  EXPECT_EQ(t.current(MemoryCategory::kParameters), 40u);
  b = ReservedBuffer<float>();
  EXPECT_EQ(t.current_total(), 0u);
}

TEST(ReservedBufferDeathTest, ADecommittedBufferFaultsInsteadOfReadingZeros) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        MemoryTracker t;
        ReservedBuffer<float> b(t, MemoryCategory::kParameters, 100);
        b.decommit();
        volatile float x = b.data()[5];
        (void)x;
      },
      "");
}

}  // namespace
}  // namespace plait
