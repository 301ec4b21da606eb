#include "plait/kernels/gelu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

TEST(Gelu, ForwardIsTheTanhForm) {
  // Computed as x * sigmoid(2u), the same function: equal to double rounding.
  const std::vector<double> x = {-3.0, -0.5, 0.0, 0.1, 1.0, 4.0};
  std::vector<double> out(x.size());
  gelu_forward(out.data(), x.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double u = std::sqrt(2.0 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
    EXPECT_NEAR(out[i], 0.5 * x[i] * (1.0 + std::tanh(u)), 1e-15 * (1.0 + std::abs(x[i])));
  }
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  auto x = random_vector(50, 1, 2.0), probe = random_vector(50, 2);
  std::vector<double> out(50);
  auto loss = [&] {
    gelu_forward(out.data(), x.data(), x.size());
    return dot(probe, out);
  };
  std::vector<double> dx(50);
  gelu_backward(dx.data(), x.data(), probe.data(), x.size());
  EXPECT_LT(scaled_max_error(dx, numeric_gradient(loss, x)), kGradientTolerance);
}

TEST(Gelu, FloatMatchesDouble) {
  const std::size_t n = 100000;  // threaded and vectorised path
  auto x = random_vector(n, 1, 3.0), g = random_vector(n, 2);
  std::vector<double> out(n), dx(n);
  gelu_forward(out.data(), x.data(), n);
  gelu_backward(dx.data(), x.data(), g.data(), n);
  auto xf = to_float(x), gf = to_float(g);
  std::vector<float> outf(n);
  gelu_forward(outf.data(), xf.data(), n);
  gelu_backward(gf.data(), xf.data(), gf.data(), n);  // in place: dinp aliases dout
  EXPECT_LT(scaled_max_error(to_double(outf), out), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(gf), dx), kFloatTolerance);
}

}  // namespace
}  // namespace plait::kernels
