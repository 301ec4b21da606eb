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

TEST(ReservedBuffer, RetainKeepsARangeInPlaceAndCommitZeroFillsTheRest) {
  MemoryTracker t;
  const std::size_t n = 64 * 1024;  // 256 KiB: many pages
  ReservedBuffer<float> b(t, MemoryCategory::kParameters, n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<float>(i);
  const std::size_t first = 20000, count = 16000;
  b.retain(first, count);
  EXPECT_FALSE(b.committed());
  EXPECT_EQ(t.current(MemoryCategory::kParameters), count * sizeof(float));
  for (std::size_t i = first; i < first + count; ++i) ASSERT_EQ(b[i], static_cast<float>(i));
  b[first] = -1.0f;  // still writable
  b.commit();
  EXPECT_EQ(t.current(MemoryCategory::kParameters), n * sizeof(float));
  EXPECT_EQ(b[first], -1.0f);
  for (std::size_t i = first + 1; i < first + count; ++i) ASSERT_EQ(b[i], static_cast<float>(i));
  EXPECT_EQ(b[0], 0.0f);        // returned pages come back zero
  EXPECT_EQ(b[n - 1], 0.0f);
  b.retain(0, 0);
  EXPECT_EQ(t.current(MemoryCategory::kParameters), 0u);
  EXPECT_THROW(b.retain(0, 1), std::exception);  // only from fully committed
  b.commit();
  EXPECT_EQ(b[first + 5], 0.0f);
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
