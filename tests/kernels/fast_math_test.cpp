#include "plait/kernels/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

TEST(FastMath, MaxOfFindsTheMaximumAnywhere) {
  std::vector<float> x(37);
  for (int pos : {0, 15, 16, 31, 36}) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = -1.0f - static_cast<float>(i);
    x[static_cast<std::size_t>(pos)] = 3.0f;
    EXPECT_EQ(max_of(x.data(), static_cast<int>(x.size())), 3.0f) << pos;
  }
  EXPECT_EQ(max_of(x.data(), 1), -1.0f);
}

}  // namespace
}  // namespace plait::kernels
