// The fp32 <-> bf16 conversions of kernels/vector_ops.h against a rounding written out
// independently: the two bf16 neighbours of x, the nearer one, ties to the even significand
// (IEEE 754-2019, 4.3.1 roundTiesToEven), decoded in double; plus the special values.
#include "plait/kernels/vector_ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace plait::kernels {
namespace {

// The value of a bf16 bit pattern without its sign, from its fields (1 sign, 8 exponent, 7
// significand bits); exponent 255 decodes as 2^128 for the pattern just above the largest finite
// one (infinity), as a rounding with an unbounded exponent would see it.
double magnitude(std::uint32_t pattern) {
  const int e = static_cast<int>((pattern >> 7) & 0xFF);
  const int m = static_cast<int>(pattern & 0x7F);
  return e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134);
}

// The bf16 pattern round-to-nearest-even gives for a finite or infinite x.
std::uint16_t expected_rounding(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (u >> 16) & 0x8000, t = (u >> 16) & 0x7FFF;  // truncated magnitude
  if (std::isinf(x)) return static_cast<std::uint16_t>(sign | 0x7F80);
  const double a = std::abs(static_cast<double>(x)), below = magnitude(t), above = magnitude(t + 1);
  const double to_below = a - below, to_above = above - a;
  const bool up = to_above < to_below || (to_above == to_below && (t & 1) != 0);
  return static_cast<std::uint16_t>(sign | (up ? t + 1 : t));  // t + 1 = 0x7F80 is infinity
}

TEST(ConvertToBf16, RoundsToNearestEvenOverEveryExponentAndSignificand) {
  // Every bf16 pattern as the high half, with low halves at the rounding boundaries (0, just
  // above 0, just below / at / just above the tie, all ones) and random ones: normals, denormals,
  // zeros, the overflow boundary, infinities, NaNs. Over 2^15 elements: the threaded path.
  std::vector<std::uint32_t> lows = {0x0000, 0x0001, 0x4000, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
  std::mt19937 rng(7);
  for (int k = 0; k < 3; ++k) lows.push_back(rng() & 0xFFFF);
  std::vector<float> x;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (std::uint32_t lo : lows) x.push_back(std::bit_cast<float>(hi << 16 | lo));
  }
  std::vector<bf16> y(x.size());
  convert(y.data(), x.data(), x.size());
  std::size_t failures = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint16_t got = y[i].bits;
    if (got != bf16(x[i]).bits && failures++ < 5) {
      ADD_FAILURE() << "convert differs from bf16(x) at " << std::hex
                    << std::bit_cast<std::uint32_t>(x[i]);
    }
    if (std::isnan(x[i])) {
      // NaN stays NaN, quiet, with its sign (a signalling NaN whose payload sits in the low half
      // would otherwise truncate to infinity).
      const bool ok = (got & 0x7F80) == 0x7F80 && (got & 0x0040) != 0 &&
                      (got & 0x8000) == ((std::bit_cast<std::uint32_t>(x[i]) >> 16) & 0x8000);
      if (!ok && failures++ < 5) {
        ADD_FAILURE() << "NaN " << std::hex << std::bit_cast<std::uint32_t>(x[i]) << " -> " << got;
      }
    } else if (got != expected_rounding(x[i]) && failures++ < 5) {
      ADD_FAILURE() << std::hex << std::bit_cast<std::uint32_t>(x[i]) << " -> " << got
                    << ", expected " << expected_rounding(x[i]);
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST(ConvertToBf16, NamedCases) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {
      1.0f + 0x1p-8f,             // halfway between 1 and 1 + 2^-7: to the even one, 1
      1.0f + 3 * 0x1p-8f,         // halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6
      1.0f + 0x1p-8f + 0x1p-23f,  // just above the tie: up
      -(1.0f + 0x1p-8f),          // the sign is kept
      std::numeric_limits<float>::max(),  // beyond the largest finite bf16: infinity
      0x1.FEp127f,                // the largest finite bf16 itself
      0x1.FFp127f,                // halfway to 2^128: to even (0x7F7F is odd), infinity
      inf, -inf, 0.0f, -0.0f,
      0x1p-149f,                  // the smallest fp32 denormal: below half of 2^-133, to 0
      0x1p-134f,                  // exactly half of bf16's smallest denormal: to even, 0
      0x1p-134f + 0x1p-149f,      // just above: 2^-133
      0x1p-127f,                  // an fp32 denormal that bf16 holds exactly
      std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> want = {1.0f,  1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -1.0f, inf, 0x1.FEp127f,
                                   inf,   inf,            -inf,           0.0f,  -0.0f, 0.0f, 0.0f,
                                   0x1p-133f, 0x1p-127f};
  std::vector<bf16> y(x.size());
  convert(y.data(), x.data(), x.size());
  std::vector<float> back(x.size());
  convert(back.data(), y.data(), y.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(back[i]), std::bit_cast<std::uint32_t>(want[i]))
        << "case " << i << ": " << x[i] << " -> " << back[i] << ", expected " << want[i];
  }
  EXPECT_TRUE(std::isnan(back.back()));
}

TEST(ConvertToFp32, WidensEveryPatternExactlyAndRoundTrips) {
  std::vector<bf16> x(0x10000);
  for (std::uint32_t p = 0; p < 0x10000; ++p) x[p] = bf16::from_bits(static_cast<std::uint16_t>(p));
  std::vector<float> y(x.size());
  convert(y.data(), x.data(), x.size());
  std::vector<bf16> again(x.size());
  convert(again.data(), y.data(), y.size());
  for (std::uint32_t p = 0; p < 0x10000; ++p) {
    const bool nan = (p & 0x7F80) == 0x7F80 && (p & 0x7F) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(y[p])) << std::hex << p;
      ASSERT_EQ(again[p].bits, p | 0x0040) << std::hex << p;  // made quiet, payload kept
      continue;
    }
    const double v = (p & 0x8000 ? -1 : 1) * magnitude(p & 0x7FFF);
    if ((p & 0x7FFF) == 0x7F80) {
      ASSERT_TRUE(std::isinf(y[p]) && (y[p] < 0) == ((p & 0x8000) != 0)) << std::hex << p;
    } else {
      ASSERT_EQ(static_cast<double>(y[p]), v) << std::hex << p;
      ASSERT_EQ(std::signbit(y[p]), (p & 0x8000) != 0) << std::hex << p;
    }
    ASSERT_EQ(again[p].bits, p) << std::hex << p;  // exact both ways
  }
  // The threaded path: a buffer over 2^15 elements, widened and rounded back unchanged.
  std::vector<bf16> big(100003);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = x[(i * 40503) % 0x7F80];  // finite, +
  std::vector<float> wide(big.size());
  convert(wide.data(), big.data(), big.size());
  std::vector<bf16> narrow(big.size());
  convert(narrow.data(), wide.data(), wide.size());
  for (std::size_t i = 0; i < big.size(); ++i) ASSERT_EQ(narrow[i].bits, big[i].bits) << i;
}

}  // namespace
}  // namespace plait::kernels
