// Softmax cross-entropy on bf16 logits (fp32 softmax and log-sum-exp, fp32 losses, bf16
// gradients) against the fp64 kernel on the bf16-rounded logits (bounds: bf16_test_support.h,
// nu = 2^-24).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16_test_support.h"
#include "finite_difference.h"
#include "plait/kernels/cross_entropy.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

TEST(CrossEntropyBf16, LossesInFp32AndGradientsRoundedOnceWithinTheBound) {
  const int n = 4, v = 50257;  // GPT-2's vocabulary: 50 chunks of the kernel's 1024
  const double scale = 1.0 / n;
  const auto logits = bf16_values(random_vector(static_cast<std::size_t>(n) * v, 51, 4.0));
  std::vector<std::int32_t> targets(n);
  for (int i = 0; i < n; ++i) targets[i] = (i * 7919) % v;
  auto grad = round_to_bf16(logits);
  std::vector<float> losses(n);
  const double total =
      cross_entropy_forward_backward(grad.data(), losses.data(), targets.data(), n, v, scale);
  auto ref = logits;
  std::vector<double> ref_losses(n);
  const double ref_total =
      cross_entropy_forward_backward(ref.data(), ref_losses.data(), targets.data(), n, v, scale);

  // Per row, with m the (exact) maximum and R = max_j |x_j - m|: x_j - m rounds by nu |x_j - m|,
  // which exp turns into a relative error, beside exp_fast's own 5 nu (fast_math_test.cpp), so
  // each exponential errs by (5 + R) nu relative; the fp32 sums of K = min(V, 1024) of them by
  // (K - 1) nu of their total (the chunks are added in double: ~1e-16, below the rounding of the
  // terms' first-order bound). So the normaliser Z has r_Z = (K + 4 + R) nu relative, the loss
  // log Z + m - x_t (double) r_Z absolute, plus nu |loss| for its fp32 store. The gradient
  // e_j * fp32(scale / Z) has (5 + R) + (r_Z / nu + 1) + 1 = K + 11 + 2R nu relative error; the
  // target's - fp32(scale) adds nu scale and nu |ref| for the subtraction. The total (double)
  // errs by scale * sum_i r_Z,i.
  const int k = std::min(v, 1024);
  std::vector<double> bound(ref.size()), loss_bound(n);
  double total_bound = 0;
  for (int i = 0; i < n; ++i) {
    const double* row = logits.data() + static_cast<std::size_t>(i) * v;
    const double m = *std::max_element(row, row + v), lo = *std::min_element(row, row + v);
    const double r = m - lo;
    const double r_z = (k + 4 + r) * kNu;
    loss_bound[i] = r_z + kNu * std::abs(ref_losses[i]);
    total_bound += scale * r_z;
    for (int j = 0; j < v; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * v + j;
      const bool target = j == targets[i];
      const double p_scaled = target ? ref[at] + scale : ref[at];  // softmax_j * scale
      double e = (k + 11 + 2 * r) * kNu * std::abs(p_scaled);
      if (target) e += kNu * scale + kNu * std::abs(ref[at]);
      bound[at] = bf16_output_bound(ref[at], e);
    }
  }
  expect_within("cross entropy bf16 dlogits", widen(grad), ref, bound);
  expect_within("cross entropy bf16 losses (fp32)", widen(losses), ref_losses, loss_bound);
  EXPECT_NEAR(total, ref_total, total_bound);
}

}  // namespace
}  // namespace plait::kernels
