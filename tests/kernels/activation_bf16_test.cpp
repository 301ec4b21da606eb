// GELU and SwiGLU in bf16 against the fp64 kernels on the bf16-rounded inputs (bounds:
// bf16_test_support.h; e = the fp32 arithmetic's error, first order in nu = 2^-24), and bitwise
// against the fp32 kernels on the widened inputs rounded once to bf16: elementwise, the two
// instantiations do the same fp32 operations per element, so a bf16 output that is not exactly
// bf16(fp32 output) would be a second rounding or a lost fp32 step.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bf16_test_support.h"
#include "finite_difference.h"
#include "plait/kernels/gelu.h"
#include "plait/kernels/swiglu.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
// exp_fast's relative error (tests/kernels/fast_math_test.cpp: < 2.5e-7 = 4.2 nu) and the
// absolute floor where it clamps (its argument above 88.7 or below -87.3: e^-87.3 < 2^-125;
// in the quotients below that leaves at most |numerator| 2^-125).
constexpr double kExpError = 5 * kNu;
constexpr double kClampFloor = 0x1p-125;

// 100003 elements: the threaded path and a tail; inputs N(0, 3), so exp's clamps are reached
// (|x| > 9.4 about once in 5000).
constexpr std::size_t kElements = 100003;

TEST(GeluBf16, ForwardAndBackwardWithinTheBoundAndBitwiseTheFp32KernelRounded) {
  const std::size_t n = kElements;
  const auto x = bf16_values(random_vector(n, 21, 3.0)), dy = bf16_values(random_vector(n, 22));
  const auto xb = round_to_bf16(x), dyb = round_to_bf16(dy);
  std::vector<bf16> out(n);
  gelu_forward(out.data(), xb.data(), n);
  auto dx = dyb;  // dinp aliases dout, as the engine calls it
  gelu_backward(dx.data(), xb.data(), dx.data(), n);

  std::vector<double> ref(n), dref(n);
  gelu_forward(ref.data(), x.data(), n);
  gelu_backward(dref.data(), x.data(), dy.data(), n);
  // u = sqrt(2/pi) (x + c x^3): x^3 (2 nu), c rounded and the product (2 nu), the sum of
  // same-signed terms (nu), the constant and the product (2 nu): 7 nu. E = exp(-2u): exp's own
  // error plus 2|u| 7 nu from its argument, r_E = 5 nu + 14 |u| nu. gelu = x / (1 + E): r_E plus
  // 2 nu; r_s for s = 1 / (1 + E) likewise.
  // gelu' = s + T2, T2 = 2 x s (1 - s) u', u' = sqrt(2/pi) (1 + 3c x^2) (6 nu): 1 - s errs by
  // e_s + nu (1 - s) absolutely, e_s = r_s s, so T2 by |T2| (r_s + 10 nu) + 2 |x| s u' e_s; the
  // sum s + T2 adds e_s and nu |gelu'|, the product with dout nu |ref|.
  std::vector<double> bound(n), dbound(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double u = kSqrt2OverPi * (x[i] + kCubic * x[i] * x[i] * x[i]);
    const double r_s = (7 + 14 * std::abs(u)) * kNu;
    bound[i] = bf16_output_bound(ref[i], r_s * std::abs(ref[i]) + kClampFloor * std::abs(x[i]));
    const double s = 1 / (1 + std::exp(-2 * u));
    const double du = kSqrt2OverPi * (1 + 3 * kCubic * x[i] * x[i]);
    const double t2 = 2 * x[i] * s * (1 - s) * du, d = s + t2, e_s = r_s * s;
    const double e_d = e_s + std::abs(t2) * (r_s + 10 * kNu) + 2 * std::abs(x[i]) * s * du * e_s +
                       kNu * std::abs(d) + kClampFloor * (1 + 2 * std::abs(x[i]) * du);
    dbound[i] = bf16_output_bound(dref[i], std::abs(dy[i]) * e_d + kNu * std::abs(dref[i]));
  }
  expect_within("gelu bf16 forward", widen(out), ref, bound);
  expect_within("gelu bf16 backward (in place)", widen(dx), dref, dbound);

  const auto xf = to_float(x), dyf = to_float(dy);
  std::vector<float> outf(n), dxf(n);
  gelu_forward(outf.data(), xf.data(), n);
  gelu_backward(dxf.data(), xf.data(), dyf.data(), n);
  expect_bitwise("gelu bf16 forward = bf16(fp32 kernel)", out, round_to_bf16(outf));
  expect_bitwise("gelu bf16 backward = bf16(fp32 kernel)", dx, round_to_bf16(dxf));
}

TEST(SwigluBf16, ForwardAndBackwardWithinTheBoundAndBitwiseTheFp32KernelRounded) {
  const int n = 37, f = 1379;  // odd widths; n * f over the threading threshold
  const std::size_t nf = static_cast<std::size_t>(n) * f;
  const auto gu = bf16_values(random_vector(2 * nf, 23, 3.0)),
             dy = bf16_values(random_vector(nf, 24));
  const auto gub = round_to_bf16(gu), dyb = round_to_bf16(dy);
  std::vector<bf16> out(nf), dgu(2 * nf);
  swiglu_forward(out.data(), gub.data(), n, f);
  swiglu_backward(dgu.data(), dyb.data(), gub.data(), n, f);
  std::vector<double> ref(nf), dref(2 * nf);
  swiglu_forward(ref.data(), gu.data(), n, f);
  swiglu_backward(dref.data(), dy.data(), gu.data(), n, f);
  // s = 1 / (1 + exp(-g)) (exact argument): r_s = 5 nu + 2 nu. out = g s u: r_s + 2 nu.
  // du = dout g s: r_s + 2 nu. dg = dout u s A, A = 1 + g (1 - s): 1 - s errs by e_s + nu (1 - s)
  // (e_s = r_s s), g (1 - s) by |g| e_s + 2 nu |g (1 - s)|, A by that plus nu |A|; the products
  // add (r_s + 3 nu) |dg| and |dout u s| e_A. Where exp clamps (|g| > 87), s is off by < 2^-125.
  std::vector<double> bound(nf), dbound(2 * nf);
  const double r_s = 7 * kNu;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < f; ++j) {
      const std::size_t o = static_cast<std::size_t>(i) * f + j;
      const std::size_t gi = static_cast<std::size_t>(i) * 2 * f + j, ui = gi + f;
      const double g = gu[gi], u = gu[ui], s = 1 / (1 + std::exp(-g)), e_s = r_s * s;
      bound[o] = bf16_output_bound(ref[o], (r_s + 2 * kNu) * std::abs(ref[o]) +
                                               kClampFloor * std::abs(g * u));
      const double a = 1 + g * (1 - s);
      const double e_a = std::abs(g) * e_s + 2 * kNu * std::abs(g * (1 - s)) + kNu * std::abs(a);
      dbound[gi] = bf16_output_bound(
          dref[gi], (r_s + 3 * kNu) * std::abs(dref[gi]) + std::abs(dy[o] * u * s) * e_a +
                        kClampFloor * std::abs(dy[o] * u) * (1 + std::abs(g)));
      dbound[ui] = bf16_output_bound(dref[ui], (r_s + 2 * kNu) * std::abs(dref[ui]) +
                                                   kClampFloor * std::abs(dy[o] * g));
    }
  }
  expect_within("swiglu bf16 forward", widen(out), ref, bound);
  expect_within("swiglu bf16 backward", widen(dgu), dref, dbound);

  const auto guf = to_float(gu), dyf = to_float(dy);
  std::vector<float> outf(nf), dguf(2 * nf);
  swiglu_forward(outf.data(), guf.data(), n, f);
  swiglu_backward(dguf.data(), dyf.data(), guf.data(), n, f);
  expect_bitwise("swiglu bf16 forward = bf16(fp32 kernel)", out, round_to_bf16(outf));
  expect_bitwise("swiglu bf16 backward = bf16(fp32 kernel)", dgu, round_to_bf16(dguf));
}

}  // namespace
}  // namespace plait::kernels
