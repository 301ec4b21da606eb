#include "plait/core/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace plait {
namespace {

TEST(Fp16, EveryHalfConvertsToFloatAndBackUnchanged) {
  // Exhaustive: every one of the 65536 bit patterns; a NaN stays a NaN (its payload's top bits
  // and the quiet bit), everything else round-trips exactly.
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = half_bits_to_float(h);
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(f)))) << bits;
    } else {
      EXPECT_EQ(float_to_half_bits(f), h) << bits << " -> " << f;
    }
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(half_bits_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_bits_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_bits_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(half_bits_to_float(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(half_bits_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(float_to_half_bits(0.1f), 0x2E66);  // 0.0999755859375, as torch's .half()
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
}

TEST(Fp16, RoundsToNearestTiesToEvenAndOverflowsToInfinity) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to the even one, 1.
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Just above a halfway point rounds up.
  EXPECT_EQ(float_to_half_bits(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3C01);
  // 65519 rounds down to 65504; 65520 (halfway to 65536) rounds to the even, infinite, one.
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7C00);
  EXPECT_EQ(float_to_half_bits(-1e9f), 0xFC00);
  // Subnormals: 2^-25 (halfway between 0 and 2^-24) rounds to even 0, 3 * 2^-25 to 2 * 2^-24.
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half_bits(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -30)), 0x0000);
  // The largest subnormal plus half a step carries into the smallest normal.
  EXPECT_EQ(float_to_half_bits(std::ldexp(1023.5f, -24)), 0x0400);
}

TEST(Fp16, MatchesNearestRoundingOnAGridOfFloats) {
  // Against a reference by search: the nearest half (ties to the even bit pattern) of values
  // spread over the normal and subnormal range.
  for (float x = 1e-8f; x < 70000.0f; x *= 1.0137f) {
    const std::uint16_t got = float_to_half_bits(x);
    if (x >= 65520.0f) {
      EXPECT_EQ(got, 0x7C00) << x;
      continue;
    }
    const float g = half_bits_to_float(got);
    const float below = half_bits_to_float(static_cast<std::uint16_t>(got - (got > 0 ? 1 : 0)));
    const float above = half_bits_to_float(static_cast<std::uint16_t>(got + 1));
    EXPECT_LE(std::fabs(g - x), std::fabs(below - x)) << x;
    EXPECT_LE(std::fabs(g - x), std::fabs(above - x)) << x;
  }
}

}  // namespace
}  // namespace plait
