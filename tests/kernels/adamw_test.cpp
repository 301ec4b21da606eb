#include "plait/kernels/adamw.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "finite_difference.h"
#include "plait/core/bf16.h"

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

TEST(AdamW, Bf16CopyIsTheRoundedMasterAndTheFp32StateIsUnchanged) {
  // Mixed precision: the same update writes bf16(params) into the compute copy. params, m and v
  // must be bitwise those of the fp32-only call, the copy bitwise bf16 of the updated master;
  // a null copy is the fp32-only call.
  const std::size_t n = 100003;
  const auto p0 = to_float(random_vector(n, 4)), g = to_float(random_vector(n, 5));
  std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f);
  std::vector<float> pc = p0, mc(n, 0.0f), vc(n, 0.0f);
  std::vector<float> pn = p0, mn(n, 0.0f), vn(n, 0.0f);
  std::vector<bf16> copy(n, bf16::from_bits(0xFFFF));  // NaN: an unwritten element shows
  for (int t = 1; t <= 3; ++t) {
    const AdamWHyper h{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.5f};
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, h);
    adamw_update(pc.data(), copy.data(), g.data(), mc.data(), vc.data(), n, h);
    adamw_update(pn.data(), nullptr, g.data(), mn.data(), vn.data(), n, h);
  }
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    differ += std::bit_cast<std::uint32_t>(pc[i]) != std::bit_cast<std::uint32_t>(p[i]);
    differ += std::bit_cast<std::uint32_t>(mc[i]) != std::bit_cast<std::uint32_t>(m[i]);
    differ += std::bit_cast<std::uint32_t>(vc[i]) != std::bit_cast<std::uint32_t>(v[i]);
    differ += std::bit_cast<std::uint32_t>(pn[i]) != std::bit_cast<std::uint32_t>(p[i]);
    differ += copy[i].bits != bf16(p[i]).bits;
  }
  EXPECT_EQ(differ, 0u);
}

}  // namespace
}  // namespace plait::kernels
