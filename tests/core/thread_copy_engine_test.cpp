// The CPU copy engine: copies run on its own thread, in submission order, and an event waits
// for its copy and every earlier one.
#include "plait/core/thread_copy_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace plait {
namespace {

TEST(ThreadCopyEngine, CopiesInOrderAndEventsCoverEarlierCopies) {
  ThreadCopyEngine engine;
  std::vector<float> a(1 << 20), b(1 << 20, -1.0f), c(1 << 20, -1.0f);
  std::iota(a.begin(), a.end(), 0.0f);
  // a -> b, then b -> c: the second reads what the first wrote only because copies keep order.
  engine.submit(b.data(), a.data(), a.size() * sizeof(float));
  const CopyEvent last = engine.submit(c.data(), b.data(), b.size() * sizeof(float));
  engine.wait(last);
  EXPECT_TRUE(engine.ready(last));
  EXPECT_EQ(b, a);
  EXPECT_EQ(c, a);
  EXPECT_EQ(engine.bytes_copied(), 2 * a.size() * sizeof(float));
  EXPECT_TRUE(engine.ready(CopyEvent{}));  // nothing to wait for
}

TEST(ThreadCopyEngine, RunsBesideTheCallerAndSynchronizes) {
  ThreadCopyEngine engine;
  std::vector<std::vector<float>> src(8, std::vector<float>(1 << 18, 3.0f)), dst(8, std::vector<float>(1 << 18));
  const std::thread::id caller = std::this_thread::get_id();
  for (std::size_t i = 0; i < src.size(); ++i) {
    engine.submit(dst[i].data(), src[i].data(), src[i].size() * sizeof(float));
  }
  // The caller is free while the copies move.
  EXPECT_EQ(std::this_thread::get_id(), caller);
  engine.synchronize();
  for (const auto& d : dst) EXPECT_EQ(d, src[0]);
}

TEST(ThreadCopyEngine, DestructionFinishesQueuedCopies) {
  std::vector<float> src(1 << 20, 2.0f), dst(1 << 20);
  {
    ThreadCopyEngine engine;
    engine.submit(dst.data(), src.data(), src.size() * sizeof(float));
  }
  EXPECT_EQ(dst, src);
}

// Paced to a host link (activation offload on CPU ranks): a copy is not done before bytes /
// bandwidth has passed from its start (a lower bound, which load cannot break), and the bytes
// arrive as without pacing.
TEST(ThreadCopyEngine, PacesCopiesToTheHostLink) {
  std::vector<float> src(1 << 18, 3.0f), dst(1 << 18);  // 1 MiB
  const double bytes = static_cast<double>(src.size() * sizeof(float));
  ThreadCopyEngine engine(bytes / 0.05);  // 50 ms for the copy
  const auto start = std::chrono::steady_clock::now();
  const CopyEvent e = engine.submit(dst.data(), src.data(), src.size() * sizeof(float));
  engine.wait(e);
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.05);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(engine.bytes_copied(), src.size() * sizeof(float));
}

// The link serves the copies in order: two copies of 50 ms each are not both done before 100 ms,
// and an event is not ready before its copy's link time has passed, whatever the memcpy took.
TEST(ThreadCopyEngine, PacedCopiesShareTheLinkInOrder) {
  std::vector<float> src(1 << 18, 5.0f), first(1 << 18), second(1 << 18);  // 1 MiB each
  const double bytes = static_cast<double>(src.size() * sizeof(float));
  ThreadCopyEngine engine(bytes / 0.05);
  const auto start = std::chrono::steady_clock::now();
  const CopyEvent a = engine.submit(first.data(), src.data(), src.size() * sizeof(float));
  const CopyEvent b = engine.submit(second.data(), src.data(), src.size() * sizeof(float));
  engine.wait(a);
  EXPECT_TRUE(engine.ready(a));
  engine.wait(b);
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.1);
  EXPECT_TRUE(engine.ready(b));
  EXPECT_EQ(first, src);
  EXPECT_EQ(second, src);
  engine.synchronize();  // nothing left: returns
}

}  // namespace
}  // namespace plait
