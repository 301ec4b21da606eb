// Waiting: requests complete once each, dropped receives are cancelled, and a rank that waits
// leaves the CPU to others instead of spinning.
#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <thread>
#include <vector>

#include "mpi_test_session.h"
#include "plait/comm/communicator.h"

namespace plait::comm {
namespace {

Communicator& world() { return test::mpi_session().world(); }

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

TEST(Wait, EmptyRequestIsComplete) {
  Request r;
  EXPECT_FALSE(r.active());
  EXPECT_TRUE(r.test());
  r.wait();
  std::vector<Request> none(3);
  EXPECT_EQ(wait_any(none), std::nullopt);
  EXPECT_TRUE(test_all(none));
}

TEST(Wait, WaitAnyReportsEachCompletedRequestOnce) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr int kCount = 8;
  if (comm.rank() == 1) {
    // Sent in reverse tag order, one at a time.
    for (int tag = kCount - 1; tag >= 0; --tag) {
      const std::int32_t value = 100 + tag;
      comm.isend(std::span<const std::int32_t>(&value, 1), 0, tag).wait();
    }
  } else if (comm.rank() == 0) {
    std::vector<std::int32_t> values(kCount, -1);
    std::vector<Request> receives;
    for (int tag = 0; tag < kCount; ++tag) {
      receives.push_back(comm.irecv(std::span<std::int32_t>(&values[tag], 1), 1, tag));
    }
    std::vector<int> seen(kCount, 0);
    while (std::optional<std::size_t> i = wait_any(receives)) {
      ASSERT_LT(*i, static_cast<std::size_t>(kCount));
      ++seen[*i];
      EXPECT_FALSE(receives[*i].active());
      EXPECT_EQ(values[*i], 100 + static_cast<int>(*i));
    }
    for (int tag = 0; tag < kCount; ++tag) EXPECT_EQ(seen[tag], 1) << "tag " << tag;
  }
}

TEST(Wait, DroppedReceiveIsCancelledAndLaterMessagesFindTheNextReceive) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<float> dropped(1, -1.0f);
  if (comm.rank() == 0) {
    // Dropped while active: prints a warning and cancels, without waiting.
    Request r = comm.irecv(dropped, 1, 5);
  }
  comm.barrier();
  if (comm.rank() == 1) {
    const float value = 42.0f;
    comm.isend(std::span<const float>(&value, 1), 0, 5).wait();
  } else if (comm.rank() == 0) {
    std::vector<float> fresh(1, -1.0f);
    Request r = comm.irecv(fresh, 1, 5);
    // Were the dropped receive still posted, it would take the message and this would hang
    // until the test's timeout.
    r.wait();
    EXPECT_EQ(fresh[0], 42.0f);
    EXPECT_EQ(dropped[0], -1.0f);
  }
}

// A rank waiting 0.6 s for a late message uses a small fraction of that time on the CPU
// (a spinning MPI_Wait uses all of it when it has a core to itself).
TEST(Wait, WaitingLeavesTheCoreToOthers) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  if (comm.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    const float value = 1.0f;
    comm.isend(std::span<const float>(&value, 1), 0, 11).wait();
  } else if (comm.rank() == 0) {
    float value = 0.0f;
    Request r = comm.irecv(std::span<float>(&value, 1), 1, 11);
    const auto wall_start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_seconds();
    r.wait();
    const double cpu = thread_cpu_seconds() - cpu_start;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    EXPECT_EQ(value, 1.0f);
    EXPECT_GT(wall, 0.3);
    EXPECT_LT(cpu, 0.2 * wall) << "the wait used " << cpu << " s of CPU in " << wall << " s";
    std::printf("[          ] waiting %.3f s cost %.4f s of CPU (%.1f%%)\n", wall, cpu,
                100.0 * cpu / wall);
  }
}

}  // namespace
}  // namespace plait::comm
