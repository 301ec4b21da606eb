#include "plait/kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"
#include "plait/core/error.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

TEST(CrossEntropy, LossIsNegativeLogSoftmaxAndGradientMatchesFiniteDifferences) {
  const int n = 4, v = 11;
  const double scale = 0.37;
  auto logits = random_vector(n * v, 1, 2.0);
  const std::vector<std::int32_t> targets = {3, 0, 10, 3};
  auto loss = [&] {
    std::vector<double> copy = logits, losses(n);
    return cross_entropy_forward_backward(copy.data(), losses.data(), targets.data(), n, v, scale);
  };
  std::vector<double> grad = logits, losses(n);
  const double total =
      cross_entropy_forward_backward(grad.data(), losses.data(), targets.data(), n, v, scale);
  double expected = 0;
  for (int i = 0; i < n; ++i) {
    double z = 0;
    for (int j = 0; j < v; ++j) z += std::exp(logits[i * v + j]);
    const double li = std::log(z) - logits[i * v + targets[i]];
    EXPECT_NEAR(losses[i], li, 1e-12);
    expected += li * scale;
  }
  EXPECT_NEAR(total, expected, 1e-12);
  EXPECT_LT(scaled_max_error(grad, numeric_gradient(loss, logits)), kGradientTolerance);
}

TEST(CrossEntropy, FloatMatchesDoubleOverALargeVocabulary) {
  const int n = 8, v = 50257;
  auto logits = random_vector(static_cast<std::size_t>(n) * v, 1, 4.0);
  std::vector<std::int32_t> targets(n);
  for (int i = 0; i < n; ++i) targets[i] = (i * 7919) % v;
  std::vector<double> losses(n);
  std::vector<float> lf = to_float(logits), lossesf(n);
  const double total =
      cross_entropy_forward_backward(logits.data(), losses.data(), targets.data(), n, v, 1.0 / n);
  const double totalf =
      cross_entropy_forward_backward(lf.data(), lossesf.data(), targets.data(), n, v, 1.0 / n);
  EXPECT_NEAR(totalf, total, 1e-5 * std::abs(total));
  EXPECT_LT(scaled_max_error(to_double(lf), logits), kFloatTolerance);
}

TEST(CrossEntropy, RowsWithoutATargetCountNothing) {
  // kNoTarget (a packed sequence's padding): loss 0 and a zero gradient row; the other rows as
  // without it.
  const int n = 3, v = 7;
  const auto logits = random_vector(n * v, 4, 2.0);
  const std::vector<std::int32_t> targets = {2, kNoTarget, 6};
  std::vector<double> grad = logits, losses(n);
  const double total = cross_entropy_forward_backward(grad.data(), losses.data(), targets.data(), n, v, 0.5);
  const std::vector<std::int32_t> kept = {2, 6};
  std::vector<double> grad_kept, losses_kept(2);
  grad_kept.insert(grad_kept.end(), logits.begin(), logits.begin() + v);
  grad_kept.insert(grad_kept.end(), logits.begin() + 2 * v, logits.end());
  const double want = cross_entropy_forward_backward(grad_kept.data(), losses_kept.data(), kept.data(), 2, v, 0.5);
  EXPECT_EQ(total, want);
  EXPECT_EQ(losses[1], 0.0);
  for (int j = 0; j < v; ++j) {
    EXPECT_EQ(grad[v + j], 0.0);
    EXPECT_EQ(grad[j], grad_kept[j]);
    EXPECT_EQ(grad[2 * v + j], grad_kept[v + j]);
  }
  const std::vector<std::int32_t> other_negative = {-2, 0, 0};
  EXPECT_THROW(cross_entropy_forward_backward(grad.data(), losses.data(), other_negative.data(), n, v, 0.5), Error);
}

TEST(CrossEntropy, RejectsTargetsOutsideTheVocabulary) {
  std::vector<float> logits(6), losses(2);
  const std::vector<std::int32_t> targets = {1, 3};
  EXPECT_THROW(cross_entropy_forward_backward(logits.data(), losses.data(), targets.data(), 2, 3,
                                              1.0),
               Error);
}

}  // namespace
}  // namespace plait::kernels
