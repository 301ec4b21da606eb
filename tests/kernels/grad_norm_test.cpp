#include "plait/kernels/grad_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

TEST(GradNorm, SumOfSquaresAddsAcrossPieces) {
  const std::size_t n = 200001;
  const std::vector<float> x = to_float(random_vector(n, 1));
  double ref = 0;
  for (float v : x) ref += double(v) * double(v);
  const double whole = sum_of_squares(x.data(), n);
  const double pieces = sum_of_squares(x.data(), 70000) + sum_of_squares(x.data() + 70000, n - 70000);
  EXPECT_NEAR(whole, ref, 1e-10 * ref);
  EXPECT_NEAR(pieces, ref, 1e-10 * ref);
}

TEST(GradNorm, ClippingScalesToTheMaximumNorm) {
  EXPECT_DOUBLE_EQ(clip_factor(0.5, 1.0), 1.0);
  EXPECT_NEAR(clip_factor(4.0, 1.0), 0.25, 1e-6);
  EXPECT_DOUBLE_EQ(clip_factor(4.0, 0.0), 1.0);  // disabled
  std::vector<float> g = {3.0f, 4.0f};
  const double f = clip_factor(std::sqrt(sum_of_squares(g.data(), 2)), 1.0);
  scale_in_place(g.data(), 2, float(f));
  EXPECT_NEAR(std::sqrt(sum_of_squares(g.data(), 2)), 1.0, 1e-6);
}

}  // namespace
}  // namespace plait::kernels
