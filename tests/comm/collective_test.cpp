// Collectives: reductions over the world and over overlapping subgroups with several buckets
// in flight at once, broadcast from a non-zero root, scalar reductions, barrier.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_session.h"
#include "plait/comm/communicator.h"
#include "plait/core/error.h"

namespace plait::comm {
namespace {

Communicator& world() { return test::mpi_session().world(); }

TEST(Collective, AllreduceOverTheWorld) {
  Communicator& comm = world();
  const int n = comm.size();
  const int r = comm.rank();
  constexpr std::size_t kLength = 1000;
  std::vector<float> sum(kLength), max(kLength), min(kLength);
  for (std::size_t i = 0; i < kLength; ++i) {
    sum[i] = static_cast<float>(r + static_cast<int>(i));
    max[i] = min[i] = static_cast<float>((r * 37 + static_cast<int>(i)) % n);
  }
  comm.allreduce(sum, ReduceOp::kSum);
  comm.allreduce(max, ReduceOp::kMax);
  comm.allreduce(min, ReduceOp::kMin);
  for (std::size_t i = 0; i < kLength; ++i) {
    // sum over r of (r + i) = n i + n (n - 1) / 2; integers, exact in fp32.
    ASSERT_EQ(sum[i], static_cast<float>(n * static_cast<int>(i) + n * (n - 1) / 2)) << i;
    // (37 r + i) mod n over all r: 37 is prime to every n here, so every residue appears.
    ASSERT_EQ(max[i], static_cast<float>(n - 1)) << i;
    ASSERT_EQ(min[i], 0.0f) << i;
  }
}

// The layout the runtime will build: p = 2 stages x d = n / 2 replicas, rank = 2 j + s. Each
// rank belongs to its stage's data-parallel group and to its replica's tied-embedding pair
// (first and last stage). Gradient buckets of both are reduced at once, overlapped with
// point-to-point traffic and with compute that polls for progress.
TEST(Collective, NonblockingAllreduceBucketsOverOverlappingGroups) {
  Communicator& comm = world();
  const int n = comm.size();
  if (n < 4 || n % 2 != 0) GTEST_SKIP() << "needs an even number of ranks >= 4";
  const int me = comm.rank();
  std::vector<std::vector<int>> groups;
  for (int s = 0; s < 2; ++s) {
    std::vector<int> stage;
    for (int j = 0; j < n / 2; ++j) stage.push_back(2 * j + s);
    groups.push_back(stage);
  }
  for (int j = 0; j < n / 2; ++j) groups.push_back({2 * j, 2 * j + 1});
  std::vector<std::unique_ptr<Communicator>> made = comm.create_groups(groups);
  Communicator& stage_group = *made[static_cast<std::size_t>(me % 2)];
  Communicator& tie_group = *made[static_cast<std::size_t>(2 + me / 2)];

  auto gradient = [](int rank, int bucket, std::size_t i) {
    return static_cast<float>(rank * 100 + bucket * 10 + static_cast<int>(i % 7));
  };
  constexpr int kBuckets = 3;
  constexpr std::size_t kBucketLength = 4096;
  std::vector<std::vector<float>> buckets(kBuckets, std::vector<float>(kBucketLength));
  std::vector<float> tied(512);
  for (int b = 0; b < kBuckets; ++b) {
    for (std::size_t i = 0; i < kBucketLength; ++i) buckets[b][i] = gradient(me, b, i);
  }
  for (std::size_t i = 0; i < tied.size(); ++i) tied[i] = gradient(me, 9, i);

  // Activations to the partner stage, in flight alongside the reductions.
  const int partner = me % 2 == 0 ? me + 1 : me - 1;
  std::vector<float> activation_out(256, static_cast<float>(me));
  std::vector<float> activation_in(256, -1.0f);

  std::vector<Request> pending;
  pending.push_back(comm.irecv(activation_in, partner, 1));
  for (int b = 0; b < kBuckets; ++b) {
    pending.push_back(stage_group.iallreduce(buckets[b], ReduceOp::kSum));
  }
  pending.push_back(tie_group.iallreduce(tied, ReduceOp::kSum));
  pending.push_back(comm.isend(activation_out, partner, 1));
  double work = 0.0;
  int polls = 0;
  while (!test_all(pending)) {
    for (int k = 0; k < 1000; ++k) work += std::sqrt(static_cast<double>(k + polls));
    ++polls;
  }
  EXPECT_GT(work, 0.0);

  for (int b = 0; b < kBuckets; ++b) {
    for (std::size_t i = 0; i < kBucketLength; ++i) {
      float expected = 0.0f;
      for (int j = 0; j < n / 2; ++j) expected += gradient(2 * j + me % 2, b, i);
      ASSERT_EQ(buckets[b][i], expected) << "bucket " << b << " element " << i;
    }
  }
  for (std::size_t i = 0; i < tied.size(); ++i) {
    const int first = me - me % 2;
    ASSERT_EQ(tied[i], gradient(first, 9, i) + gradient(first + 1, 9, i)) << i;
  }
  for (float v : activation_in) ASSERT_EQ(v, static_cast<float>(partner));
}

// Blocks of uneven sizes, as shards proportional to device memory make them: rank r's block has
// (37 r mod 5) * 100 + 3 r elements, so rank 0's is empty and the others differ.
std::vector<std::size_t> uneven_blocks(int n) {
  std::vector<std::size_t> counts;
  for (int r = 0; r < n; ++r) counts.push_back(static_cast<std::size_t>((r * 37) % 5 * 100 + 3 * r));
  return counts;
}

TEST(Collective, ReduceScatterLeavesEachRankItsSummedBlockInPlace) {
  Communicator& comm = world();
  const int n = comm.size(), me = comm.rank();
  const std::vector<std::size_t> counts = uneven_blocks(n);
  std::size_t total = 0, offset = 0;
  for (int r = 0; r < n; ++r) {
    if (r == me) offset = total;
    total += counts[static_cast<std::size_t>(r)];
  }
  auto value = [](int rank, std::size_t i) { return static_cast<float>(rank * 1000 + static_cast<int>(i % 97)); };
  std::vector<float> data(total);
  for (std::size_t i = 0; i < total; ++i) data[i] = value(me, i);
  Request request = comm.ireduce_scatter(data, counts, ReduceOp::kSum);
  while (!request.test()) {
  }
  for (std::size_t i = offset; i < offset + counts[static_cast<std::size_t>(me)]; ++i) {
    float expected = 0;
    for (int r = 0; r < n; ++r) expected += value(r, i);  // integers: exact in fp32
    ASSERT_EQ(data[i], expected) << "element " << i << " of rank " << me << "'s block at " << offset;
  }
}

// bf16 gradients (train.grad_reduce "bf16"): each rank's values v_r, summed by comm/bf16_sum.h in
// whatever order the transport's algorithm takes. Any order of n - 1 roundings, each at most
// u = 2^-8 of a partial sum (and 2^-24 for its fp32 addition) whose magnitude is at most
// (1 + u)^(n-1) sum_r |v_r|, is within (n - 1) (u + 2^-24) (1 + u)^(n-1) sum_r |v_r| of the exact
// sum (bf16_sum.h). Every rank must end with the same bytes (level-0 replicas update alike).
float bf16_value(int rank, std::size_t i) {
  // Mixed signs and magnitudes over 2^-12 .. 2^3, so partial sums round and cancel.
  const int k = static_cast<int>((i * 2654435761u + static_cast<std::size_t>(rank) * 40503u) % 1000);
  return std::ldexp((k % 2 == 0 ? 1.0f : -1.0f) * (1.0f + static_cast<float>(k) / 997.0f), k % 16 - 12);
}

double bf16_sum_bound(int n, std::size_t i) {
  double magnitude = 0;
  for (int r = 0; r < n; ++r) magnitude += std::abs(static_cast<float>(bf16(bf16_value(r, i))));
  const double u = 1.0 / 256;
  return (n - 1) * (u + std::ldexp(1.0, -24)) * std::pow(1 + u, n - 1) * magnitude;
}

double bf16_exact_sum(int n, std::size_t i) {
  double exact = 0;
  for (int r = 0; r < n; ++r) exact += static_cast<float>(bf16(bf16_value(r, i)));
  return exact;
}

TEST(Collective, Bf16AllreduceIsWithinTheRoundingBoundAndTheSameBytesOnEveryRank) {
  Communicator& comm = world();
  const int n = comm.size(), me = comm.rank();
  constexpr std::size_t kLength = 20000;
  std::vector<bf16> data(kLength);
  for (std::size_t i = 0; i < kLength; ++i) data[i] = bf16(bf16_value(me, i));
  comm.iallreduce(std::span<bf16>(data), ReduceOp::kSum).wait();
  std::vector<float> mine(kLength), first(kLength);
  int rounded = 0;
  for (std::size_t i = 0; i < kLength; ++i) {
    mine[i] = first[i] = static_cast<float>(data[i]);
    const double err = std::abs(mine[i] - bf16_exact_sum(n, i));
    ASSERT_LE(err, bf16_sum_bound(n, i)) << "element " << i << " on rank " << me;
    rounded += err > 0;
  }
  if (n > 1) {
    EXPECT_GT(rounded, 0) << "the sums must really round to bf16";
  }
  comm.broadcast(std::span<float>(first), 0);
  EXPECT_EQ(std::memcmp(first.data(), mine.data(), kLength * sizeof(float)), 0) << "rank " << me << " differs from rank 0";
  EXPECT_THROW(comm.iallreduce(std::span<bf16>(data), ReduceOp::kMax), Error);
}

TEST(Collective, Bf16ReduceScatterLeavesEachRankItsBlockWithinTheBound) {
  Communicator& comm = world();
  const int n = comm.size(), me = comm.rank();
  const std::vector<std::size_t> counts = uneven_blocks(n);
  std::size_t total = 0, offset = 0;
  for (int r = 0; r < n; ++r) {
    if (r == me) offset = total;
    total += counts[static_cast<std::size_t>(r)];
  }
  std::vector<bf16> data(total);
  for (std::size_t i = 0; i < total; ++i) data[i] = bf16(bf16_value(me, i));
  comm.ireduce_scatter(std::span<bf16>(data), counts, ReduceOp::kSum).wait();
  for (std::size_t i = offset; i < offset + counts[static_cast<std::size_t>(me)]; ++i) {
    ASSERT_LE(std::abs(static_cast<float>(data[i]) - bf16_exact_sum(n, i)), bf16_sum_bound(n, i))
        << "element " << i << " of rank " << me << "'s block at " << offset;
  }
}

TEST(Collective, AllgatherPutsEveryBlockInItsPlaceOnEveryRank) {
  Communicator& comm = world();
  const int n = comm.size(), me = comm.rank();
  const std::vector<std::size_t> counts = uneven_blocks(n);
  std::size_t total = 0;
  std::vector<int> owner;
  for (int r = 0; r < n; ++r) {
    total += counts[static_cast<std::size_t>(r)];
    owner.insert(owner.end(), counts[static_cast<std::size_t>(r)], r);
  }
  std::vector<float> data(total, -1.0f);
  for (std::size_t i = 0; i < total; ++i) {
    if (owner[i] == me) data[i] = static_cast<float>(me) + 0.5f * static_cast<float>(i % 13);
  }
  comm.iallgather(data, counts).wait();
  for (std::size_t i = 0; i < total; ++i) {
    ASSERT_EQ(data[i], static_cast<float>(owner[i]) + 0.5f * static_cast<float>(i % 13)) << i;
  }
}

// Reduce-scatter then all-gather of the same blocks is an all-reduce (the ZeRO identity the
// runtime relies on), here over a subgroup listed in reverse order, with several in flight.
TEST(Collective, ReduceScatterThenAllgatherIsAnAllreduceOverAGroup) {
  Communicator& comm = world();
  const int n = comm.size();
  std::vector<int> reversed;
  for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
  auto made = comm.create_groups({reversed});
  Communicator& group = *made[0];
  const std::vector<std::size_t> counts = {7, 0, 5, 11, 2, 9, 1, 4};
  const std::vector<std::size_t> mine(counts.begin(), counts.begin() + group.size());
  std::size_t total = 0;
  for (std::size_t c : mine) total += c;
  std::vector<float> a(total), b(total), reference(total);
  for (std::size_t i = 0; i < total; ++i) {
    a[i] = static_cast<float>(group.rank() + 1) * static_cast<float>(i);
    b[i] = -a[i];
    reference[i] = a[i];
  }
  group.allreduce(reference, ReduceOp::kSum);
  std::vector<Request> pending;
  pending.push_back(group.ireduce_scatter(a, mine, ReduceOp::kSum));
  pending.push_back(group.ireduce_scatter(b, mine, ReduceOp::kSum));
  wait_all(pending);
  pending.clear();
  pending.push_back(group.iallgather(a, mine));
  pending.push_back(group.iallgather(b, mine));
  wait_all(pending);
  for (std::size_t i = 0; i < total; ++i) {
    ASSERT_EQ(a[i], reference[i]) << i;
    ASSERT_EQ(b[i], -reference[i]) << i;
  }
}

TEST(Collective, BlockCountsThatDoNotCoverTheBufferFailClearly) {
  Communicator& comm = world();
  std::vector<float> data(10);
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 1);
  try {
    comm.ireduce_scatter(data, counts, ReduceOp::kSum).wait();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the blocks hold " + std::to_string(comm.size()) +
                                         " elements but the buffer has 10"),
              std::string::npos)
        << e.what();
  }
  counts.push_back(1);
  EXPECT_THROW(comm.iallgather(std::span<float>(data.data(), counts.size()), counts).wait(), std::exception);
}

TEST(Collective, BroadcastFromANonZeroRootOfAGroup) {
  Communicator& comm = world();
  const int n = comm.size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  // The world in reverse order: group rank 1 is world rank n - 2.
  std::vector<int> reversed;
  for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
  std::vector<std::unique_ptr<Communicator>> made = comm.create_groups({reversed});
  Communicator& group = *made[0];
  ASSERT_EQ(group.world_rank_of(1), n - 2);
  std::vector<float> values(100, -1.0f);
  std::vector<std::int32_t> ints(10, -1);
  if (comm.rank() == n - 2) {
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
    for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = 123456789 + static_cast<int>(i);
  }
  group.broadcast(values, 1);
  group.broadcast(ints, 1);
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], 0.5f * static_cast<float>(i));
  for (std::size_t i = 0; i < ints.size(); ++i) ASSERT_EQ(ints[i], 123456789 + static_cast<int>(i));
}

TEST(Collective, ScalarReductions) {
  Communicator& comm = world();
  const int n = comm.size();
  const double r = comm.rank();
  EXPECT_EQ(comm.allreduce(r + 0.25, ReduceOp::kSum), n * (n - 1) / 2.0 + 0.25 * n);
  EXPECT_EQ(comm.allreduce(-r, ReduceOp::kMin), -(n - 1.0));
  EXPECT_EQ(comm.allreduce(r, ReduceOp::kMax), n - 1.0);
  std::vector<double> several = {r, 2 * r, 1.0};
  comm.allreduce(several, ReduceOp::kSum);
  EXPECT_EQ(several[0], n * (n - 1) / 2.0);
  EXPECT_EQ(several[1], static_cast<double>(n * (n - 1)));
  EXPECT_EQ(several[2], static_cast<double>(n));
}

// The runtime detects a non-finite loss or gradient on any rank by reducing with kSum.
TEST(Collective, NonFiniteValueOnOneRankReachesEveryRankThroughSum) {
  Communicator& comm = world();
  const int last = comm.size() - 1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(comm.allreduce(comm.rank() == last ? nan : 1.0, ReduceOp::kSum)));
  const double with_inf = comm.allreduce(comm.rank() == last ? inf : 1.0, ReduceOp::kSum);
  EXPECT_TRUE(std::isinf(with_inf) && with_inf > 0);
}

TEST(Collective, BarrierWaitsForEveryRank) {
  Communicator& comm = world();
  const int n = comm.size();
  // Rank 0 makes a fresh directory and broadcasts its name.
  std::vector<std::int32_t> name(256, 0);
  if (comm.rank() == 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / "plait-barrier-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    for (std::size_t i = 0; i < pattern.size() && i < name.size() - 1; ++i) name[i] = pattern[i];
  }
  comm.broadcast(name, 0);
  std::string dir;
  for (std::int32_t c : name) {
    if (c == 0) break;
    dir += static_cast<char>(c);
  }
  // The last rank arrives late: nobody may leave the barrier before its file exists.
  if (comm.rank() == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::ofstream(dir + "/" + std::to_string(comm.rank())) << "here\n";
  comm.barrier();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + std::to_string(r)))
        << "rank " << comm.rank() << " left the barrier before rank " << r << " arrived";
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace plait::comm
