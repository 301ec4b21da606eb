// Rotary embeddings in place on bf16 rows against the fp64 kernel on the bf16-rounded inputs
// (bounds: bf16_test_support.h) and bitwise against the fp32 kernel on the widened rows rounded
// once (the same fp32 operations per element).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bf16_test_support.h"
#include "finite_difference.h"
#include "plait/kernels/rotary.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

TEST(RotaryBf16, ForwardAndBackwardWithinTheBoundAndBitwiseTheFp32KernelRounded) {
  // The threaded path; 80 frequencies (more than the kernel's chunk of 64); rows twice as wide as
  // the heads (the V part of a K/V row, never touched); positions from 2000.
  const int batch = 2, s = 40, heads = 4, d = 160, stride = 2 * heads * d, pos0 = 2000;
  const double theta = 10000.0;
  const auto x = bf16_values(random_vector(static_cast<std::size_t>(batch) * s * stride, 31));
  for (int sign : {+1, -1}) {
    const auto rotate = [&](auto* data) {
      if (sign > 0) {
        rotary_forward(data, batch, s, heads, d, stride, pos0, theta);
      } else {
        rotary_backward(data, batch, s, heads, d, stride, pos0, theta);
      }
    };
    auto y = round_to_bf16(x);
    rotate(y.data());
    auto ref = x;
    rotate(ref.data());
    // x'_i = a cos - c sin (or c cos + a sin) with cos, sin computed in double and rounded to
    // fp32 (nu each), two products (nu each) and the sum (nu):
    // e = 2 nu (|a cos| + |c sin|) + nu |x'_i|.
    std::vector<double> bound(x.size());
    for (int r = 0; r < batch * s; ++r) {
      const int t = r % s;
      for (int j = 0; j < stride; ++j) {
        const std::size_t k = static_cast<std::size_t>(r) * stride + j;
        if (j >= heads * d) {
          bound[k] = 0;  // untouched, exactly
          continue;
        }
        const int h = j / d, i = j % d, half = d / 2, f = i % half;
        const double angle = (pos0 + t) * std::pow(theta, -2.0 * f / d);
        const std::size_t lo = static_cast<std::size_t>(r) * stride + h * d + f, hi = lo + half;
        const double a = x[i < half ? lo : hi], c = x[i < half ? hi : lo];
        const double e = 2 * kNu * (std::abs(a * std::cos(angle)) + std::abs(c * std::sin(angle))) +
                         kNu * std::abs(ref[k]);
        bound[k] = bf16_output_bound(ref[k], e);
      }
    }
    const char* what = sign > 0 ? "rotary bf16 forward" : "rotary bf16 backward";
    expect_within(what, widen(y), ref, bound);
    auto yf = to_float(x);
    rotate(yf.data());
    expect_bitwise(std::string(what) + " = bf16(fp32 kernel)", y, round_to_bf16(yf));
  }
}

}  // namespace
}  // namespace plait::kernels
