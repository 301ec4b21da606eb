// The CPU backend: its memory operations do what the seam promises (kernels/backend.h), its
// events are complete when recorded, and its kernels are bitwise the kernels it wraps.
#include "plait/kernels/cpu_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "finite_difference.h"
#include "plait/kernels/grad_norm.h"
#include "plait/kernels/matmul.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

TEST(CpuBackend, AllocatesAlignedBlocksLargeOnesOnHugePages) {
  CpuBackend& b = cpu_backend();
  for (std::size_t bytes : {std::size_t{4}, std::size_t{4096}, std::size_t{5} << 20}) {
    void* p = b.allocate(bytes);
    ASSERT_NE(p, nullptr);
    const std::size_t alignment = bytes >= (std::size_t{2} << 20) ? std::size_t{2} << 20 : 64;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignment, 0u) << bytes;
    std::memset(p, 1, bytes);  // all of it is writable
    b.deallocate(p, bytes);
  }
}

TEST(CpuBackend, ZeroFillCopyAndAccumulate) {
  CpuBackend& b = cpu_backend();
  // Past the parallel threshold (16 MiB), with a tail that is not a whole chunk.
  const std::size_t n = (std::size_t{5} << 20) + 3;
  std::vector<float> x(n, 7.0f);
  b.zero(x.data() + 1, (n - 2) * sizeof(float));
  EXPECT_EQ(x.front(), 7.0f);
  EXPECT_EQ(x.back(), 7.0f);
  for (std::size_t i = 1; i + 1 < n; ++i) ASSERT_EQ(x[i], 0.0f) << i;
  b.fill(x.data(), 5, 1.5f);
  EXPECT_EQ(x[4], 1.5f);
  EXPECT_EQ(x[5], 0.0f);
  std::vector<float> y(5);
  b.copy(y.data(), x.data(), 5 * sizeof(float), CopyKind::kDeviceToHost);
  EXPECT_EQ(y, std::vector<float>(5, 1.5f));
  const std::vector<float> src = {1, 2, 3, 4, 5};
  b.accumulate(y.data(), src.data(), 5);
  EXPECT_EQ(y, (std::vector<float>{2.5f, 3.5f, 4.5f, 5.5f, 6.5f}));
}

TEST(CpuBackend, EventsAreCompleteWhenRecorded) {
  CpuBackend& b = cpu_backend();
  const Event first = b.record();
  const Event second = b.record();
  EXPECT_GT(first.sequence, 0u);
  EXPECT_GT(second.sequence, first.sequence);
  EXPECT_TRUE(b.ready(first));
  EXPECT_TRUE(b.ready(second));
  b.wait(second);
  b.synchronize();
}

TEST(CpuBackend, NormalInitDependsOnlyOnKeyAndIndex) {
  CpuBackend& b = cpu_backend();
  // Above the parallel threshold, so threads split the range; a prefix fill must agree.
  const std::size_t n = 200003;
  std::vector<float> whole(n), prefix(1000), other(1000);
  b.normal_init(whole.data(), n, 0.02, 42);
  b.normal_init(prefix.data(), prefix.size(), 0.02, 42);
  b.normal_init(other.data(), other.size(), 0.02, 43);
  EXPECT_EQ(std::memcmp(whole.data(), prefix.data(), prefix.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(other.data(), prefix.data(), prefix.size() * sizeof(float)), 0);
  double sum = 0, sq = 0;
  for (float v : whole) {
    sum += v;
    sq += double(v) * v;
  }
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  // 200k draws: the mean's standard error is 0.02 / 447, the deviation's ~0.02 / 632.
  EXPECT_NEAR(mean, 0.0, 5 * 0.02 / 447);
  EXPECT_NEAR(sd, 0.02, 5 * 0.02 / 632);
}

TEST(CpuBackend, KernelsAreBitwiseTheKernelsItWraps) {
  const int n = 5, c = 7, oc = 9;
  const std::vector<float> inp = to_float(random_vector(n * c, 1));
  const std::vector<float> w = to_float(random_vector(oc * c, 2));
  const std::vector<float> bias = to_float(random_vector(oc, 3));
  std::vector<float> direct(n * oc), through(n * oc);
  matmul_forward<float>(direct.data(), inp.data(), w.data(), bias.data(), nullptr, n, c, oc);
  cpu_backend().matmul_forward(through.data(), inp.data(), w.data(), bias.data(), nullptr, n, c, oc);
  EXPECT_EQ(std::memcmp(direct.data(), through.data(), direct.size() * sizeof(float)), 0);
  EXPECT_EQ(cpu_backend().sum_of_squares(inp.data(), inp.size()),
            sum_of_squares(inp.data(), inp.size()));
}

}  // namespace
}  // namespace plait::kernels
