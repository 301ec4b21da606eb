#include "plait/kernels/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>

namespace plait::kernels {
namespace {

// Dense sweep of the range softmax and GELU use; relative error against libm in double.
TEST(FastMath, ExpIsAccurateToAboutOneUlp) {
  double worst = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 2000000.0f;
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_fast(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2.5e-7);
  EXPECT_EQ(exp_fast(0.0f), 1.0f);
  EXPECT_LT(exp_fast(-1000.0f), 1e-37f);  // clamped, no denormals or NaN
}

TEST(FastMath, TanhIsAccurateIncludingNearZero) {
  double worst = 0;
  for (int i = -1000000; i <= 1000000; ++i) {
    const float x = 12.0f * static_cast<float>(i) / 1000000.0f;
    if (x == 0.0f) continue;
    const double ref = std::tanh(static_cast<double>(x));
    worst = std::max(worst, std::abs(tanh_fast(x) - ref) / std::abs(ref));
  }
  for (float x = 1e-30f; x < 1e-2f; x *= 1.7f) {  // tiny arguments: relative error must hold
    const double ref = std::tanh(static_cast<double>(x));
    worst = std::max(worst, std::abs(tanh_fast(x) - ref) / ref);
  }
  EXPECT_LT(worst, 4e-7);
  EXPECT_EQ(tanh_fast(50.0f), 1.0f);
  EXPECT_EQ(tanh_fast(-50.0f), -1.0f);
}

}  // namespace
}  // namespace plait::kernels
