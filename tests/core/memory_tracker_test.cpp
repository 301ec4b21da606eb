#include "plait/core/memory_tracker.h"

#include <gtest/gtest.h>

#include "plait/core/buffer.h"

namespace plait {
namespace {

TEST(MemoryTracker, TracksCurrentAndPeakPerCategory) {
  MemoryTracker t;
  t.allocate(MemoryCategory::kActivations, 100);
  t.allocate(MemoryCategory::kKVCache, 50);
  t.release(MemoryCategory::kActivations, 100);
  t.allocate(MemoryCategory::kActivations, 30);
  EXPECT_EQ(t.current(MemoryCategory::kActivations), 30u);
  EXPECT_EQ(t.peak(MemoryCategory::kActivations), 100u);
  EXPECT_EQ(t.current(MemoryCategory::kKVCache), 50u);
  EXPECT_EQ(t.current_total(), 80u);
  EXPECT_EQ(t.peak_total(), 150u);
  t.reset_peaks();
  EXPECT_EQ(t.peak(MemoryCategory::kActivations), 30u);
  EXPECT_EQ(t.peak_total(), 80u);
}

TEST(MemoryTracker, TheHostTierNamesItselfWhenFull) {
  MemoryTracker host(100, MemoryTier::kHost);
  EXPECT_EQ(host.tier(), MemoryTier::kHost);
  try {
    host.allocate(MemoryCategory::kOptimizerState, 200);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("of optimizer_state with 0 B in use exceeds the 100 B host capacity"),
              std::string::npos)
        << e.what();
  }
}

TEST(MemoryTracker, CapacityErrorNamesCategoryAndSizes) {
  MemoryTracker t(1000);
  t.allocate(MemoryCategory::kParameters, 600);
  try {
    t.allocate(MemoryCategory::kActivations, 500);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.category(), MemoryCategory::kActivations);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("activations"), std::string::npos) << msg;
    EXPECT_NE(msg.find("500 B"), std::string::npos) << msg;
    EXPECT_NE(msg.find("600 B"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1000 B"), std::string::npos) << msg;
  }
  // A failed allocation records nothing.
  EXPECT_EQ(t.current(MemoryCategory::kActivations), 0u);
  EXPECT_EQ(t.current_total(), 600u);
}

TEST(MemoryTracker, ReleasingMoreThanAllocatedIsAnError) {
  MemoryTracker t;
  t.allocate(MemoryCategory::kGradients, 10);
  EXPECT_THROW(t.release(MemoryCategory::kGradients, 11), Error);
}

TEST(Buffer, ChargesItsCategoryForItsLifetime) {
  MemoryTracker t;
  {
    FloatBuffer b(t, MemoryCategory::kOptimizerState, 256);
    EXPECT_EQ(t.current(MemoryCategory::kOptimizerState), 1024u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u);
    for (float v : b.span()) EXPECT_EQ(v, 0.0f);
    FloatBuffer moved = std::move(b);
    EXPECT_EQ(t.current(MemoryCategory::kOptimizerState), 1024u);
  }
  EXPECT_EQ(t.current(MemoryCategory::kOptimizerState), 0u);
  EXPECT_EQ(t.peak(MemoryCategory::kOptimizerState), 1024u);
}

TEST(Buffer, OverCapacityThrowsBeforeAllocating) {
  MemoryTracker t(100);
  EXPECT_THROW(FloatBuffer(t, MemoryCategory::kActivations, 26), OutOfMemoryError);
  EXPECT_EQ(t.current_total(), 0u);
}

}  // namespace
}  // namespace plait
