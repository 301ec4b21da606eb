// The bf16 gradient reduction's operation (comm/bf16_sum.h) against an fp64 sum: recursive
// summation of n bf16 values with one fp32 addition and one bf16 rounding per partial sum is
// within sum_k (2^-8 |s_k| + 2^-24 |t_k|) of the exact sum, where s_k is the k-th computed partial
// sum (round to nearest: |x - fl(x)| <= u |fl(x)|, u = 2^-8) and t_k the exact sum of its two
// operands (the fp32 addition, exact unless their exponents differ by more than 16) — Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., sec. 4.2. And the rounding really
// happens (ties to even), and the operation is commutative bitwise (what lets MPI combine in any
// operand order and still give every rank the same bytes).
#include "plait/comm/bf16_sum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace plait::comm {
namespace {

constexpr double kUnitRoundoff = 1.0 / 256;  // bf16: 8 significant bits

TEST(Bf16Sum, RoundsEachPartialSumToNearestEven) {
  std::vector<bf16> inout = {bf16(1.0f), bf16(1.0f), bf16(-2.0f)};
  const std::vector<bf16> in = {bf16(1.0f / 256), bf16(3.0f / 512), bf16(2.0f)};
  bf16_sum_into(in, inout);
  EXPECT_EQ(static_cast<float>(inout[0]), 1.0f);              // 1 + 2^-8: a tie, to the even 1
  EXPECT_EQ(static_cast<float>(inout[1]), 1.0f + 1.0f / 128);  // 1 + 3 * 2^-9: up to 1 + 2^-7
  EXPECT_EQ(static_cast<float>(inout[2]), 0.0f);              // exact cancellation
}

TEST(Bf16Sum, RecursiveSumIsWithinTheRoundingBoundOfTheFp64Sum) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 4);
  constexpr std::size_t kElements = 4096;
  for (int ranks : {2, 3, 4, 8, 16}) {
    // Each rank's gradient: bf16 values of mixed signs and magnitudes (so partial sums cancel).
    std::vector<std::vector<bf16>> g(static_cast<std::size_t>(ranks), std::vector<bf16>(kElements));
    for (auto& rank : g) {
      for (bf16& v : rank) v = bf16(std::ldexp(normal(rng), exponent(rng)));
    }
    std::vector<bf16> sum = g[0];
    std::vector<double> bound(kElements, 0.0);
    for (int r = 1; r < ranks; ++r) {
      std::vector<double> operands(kElements);
      for (std::size_t i = 0; i < kElements; ++i) {
        operands[i] = static_cast<double>(static_cast<float>(sum[i])) + static_cast<float>(g[static_cast<std::size_t>(r)][i]);
      }
      bf16_sum_into(g[static_cast<std::size_t>(r)], sum);
      for (std::size_t i = 0; i < kElements; ++i) {
        bound[i] += kUnitRoundoff * std::abs(static_cast<float>(sum[i])) + std::ldexp(std::abs(operands[i]), -24);
      }
    }
    int rounded = 0;
    for (std::size_t i = 0; i < kElements; ++i) {
      double exact = 0;
      for (const auto& rank : g) exact += static_cast<float>(rank[i]);
      const double err = std::abs(static_cast<float>(sum[i]) - exact);
      ASSERT_LE(err, bound[i]) << ranks << " ranks, element " << i;
      rounded += err > 0;
    }
    EXPECT_GT(rounded, 0) << "the bound is tested on sums that actually round";
  }
}

TEST(Bf16Sum, IsCommutativeBitwise) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<unsigned> bits(0, 0xFFFF);
  std::vector<bf16> a(1 << 16), b(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = bf16::from_bits(static_cast<std::uint16_t>(bits(rng)));
    b[i] = bf16::from_bits(static_cast<std::uint16_t>(bits(rng)));
  }
  std::vector<bf16> ab = b, ba = a;
  bf16_sum_into(a, ab);
  bf16_sum_into(b, ba);
  EXPECT_EQ(std::memcmp(ab.data(), ba.data(), ab.size() * sizeof(bf16)), 0);
}

}  // namespace
}  // namespace plait::comm
