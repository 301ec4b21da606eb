#include "plait/kernels/matmul.h"

#include <gtest/gtest.h>

#include "finite_difference.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

constexpr int kN = 5, kC = 7, kOC = 4;

std::vector<double> forward(const std::vector<double>& x, const std::vector<double>& w,
                            const std::vector<double>& b, const std::vector<double>& r) {
  std::vector<double> out(kN * kOC);
  matmul_forward(out.data(), x.data(), w.data(), b.data(), r.data(), kN, kC, kOC);
  return out;
}

TEST(Matmul, ForwardIsInputTimesWeightTransposedPlusBiasPlusResidual) {
  auto x = random_vector(kN * kC, 1), w = random_vector(kOC * kC, 2), b = random_vector(kOC, 3),
       r = random_vector(kN * kOC, 4);
  const auto out = forward(x, w, b, r);
  for (int i = 0; i < kN; ++i) {
    for (int o = 0; o < kOC; ++o) {
      double ref = b[o] + r[i * kOC + o];
      for (int j = 0; j < kC; ++j) ref += x[i * kC + j] * w[o * kC + j];
      EXPECT_NEAR(out[i * kOC + o], ref, 1e-12);
    }
  }
  std::vector<double> plain(kN * kOC);
  matmul_forward<double>(plain.data(), x.data(), w.data(), nullptr, nullptr, kN, kC, kOC);
  EXPECT_NEAR(plain[3] + b[3] + r[3], out[3], 1e-12);
}

TEST(Matmul, BackwardMatchesFiniteDifferences) {
  auto x = random_vector(kN * kC, 1), w = random_vector(kOC * kC, 2), b = random_vector(kOC, 3),
       r = random_vector(kN * kOC, 4), probe = random_vector(kN * kOC, 5);
  auto loss = [&] { return dot(probe, forward(x, w, b, r)); };

  // Gradients start non-zero to check that W accumulates and B overwrites (or accumulates).
  std::vector<double> dx(kN * kC, 0.5), dw(kOC * kC, 0.25), db(kOC, -1.0);
  matmul_backward_input(dx.data(), probe.data(), w.data(), kN, kC, kOC, false);
  matmul_backward_weight(dw.data(), db.data(), probe.data(), x.data(), kN, kC, kOC);
  for (auto& v : dw) v -= 0.25;
  for (auto& v : db) v += 1.0;

  EXPECT_LT(scaled_max_error(dx, numeric_gradient(loss, x)), kGradientTolerance);
  EXPECT_LT(scaled_max_error(dw, numeric_gradient(loss, w)), kGradientTolerance);
  EXPECT_LT(scaled_max_error(db, numeric_gradient(loss, b)), kGradientTolerance);
  EXPECT_LT(scaled_max_error(probe, numeric_gradient(loss, r)), kGradientTolerance);

  std::vector<double> dx_acc(kN * kC, 0.5);
  matmul_backward_input(dx_acc.data(), probe.data(), w.data(), kN, kC, kOC, true);
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx_acc[i], dx[i] + 0.5, 1e-12);
}

TEST(Matmul, FloatMatchesDouble) {
  // Large enough for OpenBLAS's threaded, blocked path.
  const int n = 300, c = 257, oc = 129;
  auto x = random_vector(n * c, 1), w = random_vector(oc * c, 2), b = random_vector(oc, 3),
       g = random_vector(n * oc, 4);
  std::vector<double> out(n * oc), dx(n * c), dw(oc * c), db(oc);
  matmul_forward<double>(out.data(), x.data(), w.data(), b.data(), nullptr, n, c, oc);
  matmul_backward_input(dx.data(), g.data(), w.data(), n, c, oc, false);
  matmul_backward_weight(dw.data(), db.data(), g.data(), x.data(), n, c, oc);
  auto xf = to_float(x), wf = to_float(w), bf = to_float(b), gf = to_float(g);
  std::vector<float> outf(n * oc), dxf(n * c), dwf(oc * c), dbf(oc);
  matmul_forward<float>(outf.data(), xf.data(), wf.data(), bf.data(), nullptr, n, c, oc);
  matmul_backward_input(dxf.data(), gf.data(), wf.data(), n, c, oc, false);
  matmul_backward_weight(dwf.data(), dbf.data(), gf.data(), xf.data(), n, c, oc);
  EXPECT_LT(scaled_max_error(to_double(outf), out), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dxf), dx), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dwf), dw), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dbf), db), kFloatTolerance);
}

}  // namespace
}  // namespace plait::kernels
