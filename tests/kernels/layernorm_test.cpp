#include "plait/kernels/layernorm.h"

#include <gtest/gtest.h>

#include "finite_difference.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

constexpr int kN = 4, kC = 9;

TEST(LayerNorm, ForwardNormalisesEachRow) {
  auto x = random_vector(kN * kC, 1, 3.0);
  std::vector<double> w(kC, 1.0), b(kC, 0.0), out(kN * kC), mean(kN), rstd(kN);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kN, kC);
  for (int i = 0; i < kN; ++i) {
    double m = 0, v = 0;
    for (int j = 0; j < kC; ++j) m += out[i * kC + j];
    for (int j = 0; j < kC; ++j) v += out[i * kC + j] * out[i * kC + j];
    EXPECT_NEAR(m / kC, 0.0, 1e-12);
    EXPECT_NEAR(v / kC, 1.0, 1e-4);  // var/(var+eps)
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  auto x = random_vector(kN * kC, 1, 2.0), w = random_vector(kC, 2), b = random_vector(kC, 3),
       probe = random_vector(kN * kC, 4), dres = random_vector(kN * kC, 5);
  std::vector<double> out(kN * kC), mean(kN), rstd(kN);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kN, kC);
    return dot(probe, out);
  };
  loss();
  std::vector<double> dx(kN * kC), dw(kC, 0.0), db(kC, 0.0);
  layernorm_backward_input(dx.data(), dres.data(), probe.data(), x.data(), w.data(), mean.data(),
                           rstd.data(), kN, kC);
  for (int i = 0; i < kN * kC; ++i) dx[i] -= dres[i];  // the residual is added unchanged
  layernorm_backward_weight(dw.data(), db.data(), probe.data(), x.data(), mean.data(), rstd.data(),
                            kN, kC);
  EXPECT_LT(scaled_max_error(dx, numeric_gradient(loss, x)), kGradientTolerance);
  EXPECT_LT(scaled_max_error(dw, numeric_gradient(loss, w)), kGradientTolerance);
  EXPECT_LT(scaled_max_error(db, numeric_gradient(loss, b)), kGradientTolerance);
}

TEST(LayerNorm, FloatMatchesDouble) {
  const int n = 64, c = 768;
  auto x = random_vector(n * c, 1, 2.0), w = random_vector(c, 2), b = random_vector(c, 3),
       g = random_vector(n * c, 4);
  std::vector<double> out(n * c), mean(n), rstd(n), dx(n * c), dw(c), db(c);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c);
  layernorm_backward_input<double>(dx.data(), nullptr, g.data(), x.data(), w.data(), mean.data(),
                                   rstd.data(), n, c);
  layernorm_backward_weight(dw.data(), db.data(), g.data(), x.data(), mean.data(), rstd.data(), n,
                            c);
  auto xf = to_float(x), wf = to_float(w), bf = to_float(b), gf = to_float(g);
  std::vector<float> outf(n * c), meanf(n), rstdf(n), dxf(n * c), dwf(c), dbf(c);
  layernorm_forward(outf.data(), meanf.data(), rstdf.data(), xf.data(), wf.data(), bf.data(), n, c);
  layernorm_backward_input<float>(dxf.data(), nullptr, gf.data(), xf.data(), wf.data(),
                                  meanf.data(), rstdf.data(), n, c);
  layernorm_backward_weight(dwf.data(), dbf.data(), gf.data(), xf.data(), meanf.data(),
                            rstdf.data(), n, c);
  EXPECT_LT(scaled_max_error(to_double(outf), out), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dxf), dx), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dwf), dw), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dbf), db), kFloatTolerance);
}

}  // namespace
}  // namespace plait::kernels
