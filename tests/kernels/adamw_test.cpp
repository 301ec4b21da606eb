#include "plait/kernels/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

TEST(AdamW, ThreeStepsMatchTheAlgorithmWrittenOut) {
  const std::size_t n = 100003;  // threaded path, odd tail
  auto p0 = random_vector(n, 1), g1 = random_vector(n, 2), g2 = random_vector(n, 3);
  std::vector<float> p = to_float(p0), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> pr = to_double(p), mr(n, 0.0), vr(n, 0.0);
  const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, scale = 0.5;
  for (int t = 1; t <= 3; ++t) {
    const auto& g = t == 2 ? g2 : g1;
    std::vector<float> gf = to_float(g);
    adamw_update(p.data(), gf.data(), m.data(), v.data(), n,
                 {float(lr), float(b1), float(b2), float(eps), float(wd), t, float(scale)});
    for (std::size_t i = 0; i < n; ++i) {
      const double gi = double(gf[i]) * scale;
      pr[i] -= lr * wd * pr[i];
      mr[i] = b1 * mr[i] + (1 - b1) * gi;
      vr[i] = b2 * vr[i] + (1 - b2) * gi * gi;
      const double mhat = mr[i] / (1 - std::pow(b1, t));
      const double vhat = vr[i] / (1 - std::pow(b2, t));
      pr[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  EXPECT_LT(scaled_max_error(to_double(p), pr), 1e-6);
  EXPECT_LT(scaled_max_error(to_double(m), mr), 1e-6);
  EXPECT_LT(scaled_max_error(to_double(v), vr), 1e-6);
}

}  // namespace
}  // namespace plait::kernels
