#include "plait/kernels/rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

constexpr int kN = 4, kC = 9;

TEST(RMSNorm, ForwardIsHuggingFaceLlamaRMSNormWithTheGivenEps) {
  // Small inputs, so that eps is a visible part of mean(x^2): 1e-5 and 1e-6 give different rows.
  auto x = random_vector(kN * kC, 1, 3e-3), w = random_vector(kC, 2);
  for (double eps : {1e-5, 1e-6}) {
    std::vector<double> out(kN * kC), rstd(kN);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), kN, kC, eps);
    for (int i = 0; i < kN; ++i) {
      double ms = 0;
      for (int j = 0; j < kC; ++j) ms += x[i * kC + j] * x[i * kC + j] / kC;
      const double r = 1.0 / std::sqrt(ms + eps);  // hidden * torch.rsqrt(variance + eps)
      EXPECT_NEAR(rstd[i], r, 1e-13 * r);
      for (int j = 0; j < kC; ++j) {
        EXPECT_NEAR(out[i * kC + j], w[j] * (x[i * kC + j] * r), 1e-14) << eps;
      }
    }
  }
}

TEST(RMSNorm, BackwardMatchesFiniteDifferences) {
  auto x = random_vector(kN * kC, 1, 2.0), w = random_vector(kC, 2),
       probe = random_vector(kN * kC, 4), dres = random_vector(kN * kC, 5);
  constexpr double kEps = 1e-6;
  std::vector<double> out(kN * kC), rstd(kN);
  auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), kN, kC, kEps);
    return dot(probe, out);
  };
  loss();
  std::vector<double> dx(kN * kC), dw(kC, 0.5);  // dw starts non-zero: W must accumulate
  rmsnorm_backward_input(dx.data(), dres.data(), probe.data(), x.data(), w.data(), rstd.data(), kN,
                         kC);
  for (int i = 0; i < kN * kC; ++i) dx[i] -= dres[i];  // the residual is added unchanged
  rmsnorm_backward_weight(dw.data(), probe.data(), x.data(), rstd.data(), kN, kC);
  for (auto& g : dw) g -= 0.5;
  EXPECT_LT(scaled_max_error(dx, numeric_gradient(loss, x)), kGradientTolerance);
  EXPECT_LT(scaled_max_error(dw, numeric_gradient(loss, w)), kGradientTolerance);
}

TEST(RMSNorm, FloatMatchesDoubleAndInputGradientMayAliasTheResidual) {
  const int n = 64, c = 768;  // threaded path
  auto x = random_vector(n * c, 1, 2.0), w = random_vector(c, 2), g = random_vector(n * c, 4),
       dres = random_vector(n * c, 5);
  std::vector<double> out(n * c), rstd(n), dx(n * c), dw(c);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5);
  rmsnorm_backward_input(dx.data(), dres.data(), g.data(), x.data(), w.data(), rstd.data(), n, c);
  rmsnorm_backward_weight(dw.data(), g.data(), x.data(), rstd.data(), n, c);
  auto xf = to_float(x), wf = to_float(w), gf = to_float(g), dxf = to_float(dres);
  std::vector<float> outf(n * c), rstdf(n), dwf(c);
  rmsnorm_forward(outf.data(), rstdf.data(), xf.data(), wf.data(), n, c, 1e-5);
  // In place: dinp aliases dresidual, as the block's residual stream uses it.
  rmsnorm_backward_input(dxf.data(), dxf.data(), gf.data(), xf.data(), wf.data(), rstdf.data(), n,
                         c);
  rmsnorm_backward_weight(dwf.data(), gf.data(), xf.data(), rstdf.data(), n, c);
  EXPECT_LT(scaled_max_error(to_double(outf), out), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dxf), dx), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dwf), dw), kFloatTolerance);
}

}  // namespace
}  // namespace plait::kernels
