// NcclCommunicator on GPUs, one GPU per rank (NCCL refuses two ranks of one communicator on one
// GPU): device buffers over NCCL, host buffers over the MPI control plane, links in both
// directions with receives posted early, the order check of the headers, subgroups. Every test
// skips with the reason on machines with fewer GPUs than ranks (CI, the build machines, and the
// one-GPU device machines for the two-rank run).
#include "plait/comm/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mpi_test_session.h"
#include "plait/core/error.h"

namespace plait::comm {
namespace {

Communicator& world() { return test::mpi_session().world(); }

// Why these ranks cannot each have a GPU here, or "" (the same answer on every rank).
std::string unavailable(int ranks) {
  int devices = 0;
  const cudaError_t code = cudaGetDeviceCount(&devices);
  if (code != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(code) + ": " +
           cudaGetErrorString(code);
  }
  if (devices < ranks) {
    return "no CUDA device for every rank: " + std::to_string(devices) + " GPUs for " +
           std::to_string(ranks) + " ranks (NCCL needs one GPU per rank)";
  }
  return "";
}

class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& values) : n_(values.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, values.data(), n_ * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(p_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::span<float> span() { return {p_, n_}; }
  std::vector<float> read() const {
    std::vector<float> v(n_);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  float* p_ = nullptr;
  std::size_t n_;
};

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = unavailable(world().size());
    if (!why.empty()) GTEST_SKIP() << why;
    int devices = 0;
    cudaGetDeviceCount(&devices);
    ASSERT_EQ(cudaSetDevice(world().rank() % devices), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&compute_), cudaSuccess);
  }
  void TearDown() override {
    if (compute_) cudaStreamDestroy(compute_);
  }
  // Links both ways between neighbours of the ring 0, 1, ..., n-1.
  static std::vector<NcclCommunicator::Link> ring_links(int n) {
    std::vector<NcclCommunicator::Link> links;
    for (int r = 0; n > 1 && r < n; ++r) {
      const int next = (r + 1) % n;
      if (n == 2 && r == 1) break;  // two ranks: one pair
      links.push_back({r, next});
      links.push_back({next, r});
    }
    return links;
  }
  cudaStream_t compute_ = nullptr;
};

TEST_F(NcclTest, AllreduceAndBroadcastOfDeviceBuffers) {
  NcclCommunicator comm(world(), {}, compute_);
  const int n = comm.size(), r = comm.rank();
  DeviceFloats sum(std::vector<float>(257, static_cast<float>(r + 1)));
  comm.allreduce(sum.span(), ReduceOp::kSum);
  for (float x : sum.read()) ASSERT_EQ(x, static_cast<float>(n * (n + 1) / 2));
  DeviceFloats b(std::vector<float>(33, static_cast<float>(r)));
  comm.broadcast(b.span(), n - 1);
  for (float x : b.read()) ASSERT_EQ(x, static_cast<float>(n - 1));
}

// Blocks of uneven sizes, one empty: rank r's block ends holding the sum over ranks, then every
// rank gets every block.
TEST_F(NcclTest, ReduceScatterAndAllGatherOfUnevenBlocks) {
  NcclCommunicator comm(world(), {}, compute_);
  const int n = comm.size(), r = comm.rank();
  std::vector<std::size_t> counts;
  for (int k = 0; k < n; ++k) counts.push_back(k == 1 ? 0 : std::size_t(3 + k));
  std::size_t total = 0, mine = 0;
  for (int k = 0; k < n; ++k) {
    if (k == r) mine = total;
    total += counts[std::size_t(k)];
  }
  DeviceFloats x(std::vector<float>(total, static_cast<float>(r + 1)));
  comm.ireduce_scatter(x.span(), counts, ReduceOp::kSum).wait();
  const auto reduced = x.read();
  for (std::size_t i = 0; i < counts[std::size_t(r)]; ++i) {
    ASSERT_EQ(reduced[mine + i], static_cast<float>(n * (n + 1) / 2));
  }
  std::vector<float> own(total, -1.0f);
  for (std::size_t i = 0; i < counts[std::size_t(r)]; ++i) own[mine + i] = static_cast<float>(r);
  DeviceFloats y(own);
  comm.iallgather(y.span(), counts).wait();
  const auto gathered = y.read();
  std::size_t at = 0;
  for (int k = 0; k < n; ++k) {
    for (std::size_t i = 0; i < counts[std::size_t(k)]; ++i) {
      ASSERT_EQ(gathered[at++], static_cast<float>(k));
    }
  }
}

TEST_F(NcclTest, HostBuffersGoOverTheControlPlane) {
  NcclCommunicator comm(world(), {}, compute_);
  EXPECT_EQ(comm.allreduce(2.0, ReduceOp::kSum), 2.0 * comm.size());
  std::vector<float> host(5, 1.0f);
  comm.allreduce(host, ReduceOp::kMax);
  for (float x : host) EXPECT_EQ(x, 1.0f);
}

// Each rank posts its receives first (as the executor does), then sends: with a stream per
// directed link this cannot deadlock.
TEST_F(NcclTest, RingBothWaysWithReceivesPostedEarly) {
  const int n = world().size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  NcclCommunicator comm(world(), ring_links(n), compute_);
  const int r = comm.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
  DeviceFloats from_prev(std::vector<float>(1000, -1.0f)),
      from_next(std::vector<float>(1000, -1.0f));
  DeviceFloats mine(std::vector<float>(1000, static_cast<float>(r)));
  std::vector<Request> pending;
  pending.push_back(comm.irecv(from_prev.span(), prev, 3));
  if (next != prev) pending.push_back(comm.irecv(from_next.span(), next, 4));
  pending.push_back(comm.isend(mine.span(), next, 3));
  if (next != prev) pending.push_back(comm.isend(mine.span(), prev, 4));
  wait_all(pending);
  for (float x : from_prev.read()) ASSERT_EQ(x, static_cast<float>(prev));
  if (next != prev) {
    for (float x : from_next.read()) ASSERT_EQ(x, static_cast<float>(next));
  }
}

// Receives posted in another order than the sends: the headers catch it on both receives.
TEST_F(NcclTest, ReceivesOutOfTheSendOrderFailNamingBoth) {
  if (world().size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
  NcclCommunicator comm(world(), {{0, 1}}, compute_);
  DeviceFloats a(std::vector<float>(8, 1.0f)), b(std::vector<float>(8, 2.0f));
  if (comm.rank() == 0) {
    std::vector<Request> sends;
    sends.push_back(comm.isend(a.span(), 1, 1));
    sends.push_back(comm.isend(b.span(), 1, 2));
    wait_all(sends);
  } else {
    Request second = comm.irecv(b.span(), 0, 2);  // link position 0, matches send #1
    Request first = comm.irecv(a.span(), 0, 1);   // link position 1, matches send #0
    try {
      second.wait();
      ADD_FAILURE() << "an out-of-order receive completed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("receive #0 on its NCCL link but matched send #1"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(first.wait(), Error);
  }
  comm.barrier();
}

TEST_F(NcclTest, LinksMustJoinTwoRanks) {
  EXPECT_THROW(NcclCommunicator(world(), {{0, 0}}, compute_), Error);
}

TEST_F(NcclTest, CreateGroupsReducesOverEachGroup) {
  NcclCommunicator comm(world(), {}, compute_);
  const int n = comm.size();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  auto groups = comm.create_groups({{0}, all});
  DeviceFloats x(std::vector<float>(16, 1.0f));
  groups[1]->allreduce(x.span(), ReduceOp::kSum);
  for (float v : x.read()) ASSERT_EQ(v, static_cast<float>(n));
  if (comm.rank() == 0) {
    ASSERT_NE(groups[0], nullptr);
    DeviceFloats y(std::vector<float>(4, 3.0f));
    groups[0]->allreduce(y.span(), ReduceOp::kSum);
    for (float v : y.read()) ASSERT_EQ(v, 3.0f);
  } else {
    EXPECT_EQ(groups[0], nullptr);
  }
}

}  // namespace
}  // namespace plait::comm
