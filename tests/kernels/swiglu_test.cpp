#include "plait/kernels/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

double silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST(SwiGLU, ForwardIsSiluOfGateTimesUp) {
  // One row, F = 6: gates in the first half, ups in the second, including saturated gates.
  const std::vector<double> gate_up = {-100.0, -3.0, -0.5, 0.0, 2.0, 100.0,
                                       0.7,    -1.2, 3.0,  5.0, -2.0, 0.25};
  std::vector<double> out(6);
  swiglu_forward(out.data(), gate_up.data(), 1, 6);
  for (int j = 0; j < 6; ++j) {
    const double g = gate_up[j], u = gate_up[6 + j];
    EXPECT_NEAR(out[j], g * (1.0 / (1.0 + std::exp(-g))) * u, 1e-15 * (1.0 + std::abs(g * u)));
  }
  // fp32 (fast exp, clamped): finite and correct at the saturated ends too.
  std::vector<float> gate_upf(gate_up.begin(), gate_up.end()), outf(6);
  swiglu_forward(outf.data(), gate_upf.data(), 1, 6);
  for (int j = 0; j < 6; ++j) {
    EXPECT_NEAR(outf[j], out[j], 2e-7 * (1.0 + std::abs(out[j]))) << j;
  }
}

TEST(SwiGLU, BackwardMatchesFiniteDifferences) {
  const int n = 3, f = 7;
  auto gate_up = random_vector(n * 2 * f, 1, 2.0);
  const auto probe = random_vector(n * f, 2);
  std::vector<double> out(n * f);
  auto loss = [&] {
    swiglu_forward(out.data(), gate_up.data(), n, f);
    return dot(probe, out);
  };
  std::vector<double> dgate_up(n * 2 * f);
  swiglu_backward(dgate_up.data(), probe.data(), gate_up.data(), n, f);
  EXPECT_LT(scaled_max_error(dgate_up, numeric_gradient(loss, gate_up)), kGradientTolerance);
  // The up half's gradient is exactly dout * silu(g).
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < f; ++j) {
      EXPECT_NEAR(dgate_up[i * 2 * f + f + j], probe[i * f + j] * silu(gate_up[i * 2 * f + j]),
                  1e-15);
    }
  }
}

TEST(SwiGLU, FloatMatchesDouble) {
  const int n = 64, f = 2051;  // threaded and vectorised, F not a multiple of the vector width
  const auto gate_up = random_vector(static_cast<std::size_t>(n) * 2 * f, 1, 3.0);
  const auto g = random_vector(static_cast<std::size_t>(n) * f, 2);
  std::vector<double> out(g.size()), dgate_up(gate_up.size());
  swiglu_forward(out.data(), gate_up.data(), n, f);
  swiglu_backward(dgate_up.data(), g.data(), gate_up.data(), n, f);
  const auto gate_upf = to_float(gate_up), gf = to_float(g);
  std::vector<float> outf(g.size()), dgate_upf(gate_up.size());
  swiglu_forward(outf.data(), gate_upf.data(), n, f);
  swiglu_backward(dgate_upf.data(), gf.data(), gate_upf.data(), n, f);
  EXPECT_LT(scaled_max_error(to_double(outf), out), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dgate_upf), dgate_up), kFloatTolerance);
}

}  // namespace
}  // namespace plait::kernels
