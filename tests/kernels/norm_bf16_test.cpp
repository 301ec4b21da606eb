// LayerNorm and RMSNorm in bf16 (mixed precision: bf16 activations and weights, fp32 arithmetic
// and statistics, fp32 weight gradients) against the fp64 kernels on the bf16-rounded inputs,
// with the bounds of bf16_test_support.h; e below is the fp32 arithmetic's error bound, first
// order in nu = 2^-24 (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., ch. 3:
// a sum of c terms errs by at most (c-1) nu sum|terms| in any order, a product of k rounded
// factors by k nu relative).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16_test_support.h"
#include "finite_difference.h"
#include "plait/kernels/layernorm.h"
#include "plait/kernels/rmsnorm.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

// 67 rows of 771: the threaded path (n * c >= 2^15) and rows that are no multiple of any vector
// width. Inputs off-centre (mean 3) so that the centring matters.
constexpr int kRows = 67, kCols = 771;

struct NormInputs {
  std::vector<double> x, w, b, dy, dres;  // bf16 values, as doubles
};

NormInputs make_inputs(int n, int c) {
  NormInputs in;
  in.x = random_vector(static_cast<std::size_t>(n) * c, 11, 2.0);
  for (double& v : in.x) v += 3.0;
  in.x = bf16_values(in.x);
  in.w = bf16_values(random_vector(c, 12));
  in.b = bf16_values(random_vector(c, 13));
  in.dy = bf16_values(random_vector(static_cast<std::size_t>(n) * c, 14));
  in.dres = bf16_values(random_vector(static_cast<std::size_t>(n) * c, 15));
  return in;
}

std::vector<double> row_abs_mean(const std::vector<double>& v, int n, int c) {
  std::vector<double> r(n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < c; ++j) r[i] += std::abs(v[static_cast<std::size_t>(i) * c + j]) / c;
  }
  return r;
}

TEST(LayerNormBf16, ForwardWithinTheBoundAndStatisticsInFp32) {
  const int n = kRows, c = kCols;
  const auto in = make_inputs(n, c);
  const auto xb = round_to_bf16(in.x), wb = round_to_bf16(in.w), bb = round_to_bf16(in.b);
  std::vector<bf16> out(in.x.size());
  std::vector<float> mean(n), rstd(n);
  layernorm_forward(out.data(), mean.data(), rstd.data(), xb.data(), wb.data(), bb.data(), n, c);

  std::vector<double> ref(in.x.size()), rm(n), rs(n);
  layernorm_forward(ref.data(), rm.data(), rs.data(), in.x.data(), in.w.data(), in.b.data(), n, c);
  // mean: a sum of c exact terms and a division, |m^ - m| <= (c-1) nu sum|x| / c + nu |m| <=
  // c nu mean|x| =: e_m. rstd: the centred sum of squares errs by (c-1) nu sum d^2 plus 3 nu per
  // term (x - m^, the square; the shift by m^ - m enters only at second order, sum_j d_j = 0),
  // then / c, + eps, sqrt (half the relative error, plus nu) and 1 / (nu): relative
  // r_s = (c/2 + 4) nu. out_j = (x_j - m^) s^ w_j + b_j: |w_j| (s e_m + |xhat_j| (r_s + 3 nu))
  // for the normalised value and its product with w, plus nu |out_j| for the bias addition.
  const auto abs_mean = row_abs_mean(in.x, n, c);
  const double r_s = (c / 2.0 + 4) * kNu;
  std::vector<double> bound(ref.size()), mean_bound(n), rstd_bound(n);
  for (int i = 0; i < n; ++i) {
    const double e_m = c * kNu * abs_mean[i];
    mean_bound[i] = e_m;
    rstd_bound[i] = r_s * rs[i];
    for (int j = 0; j < c; ++j) {
      const std::size_t k = static_cast<std::size_t>(i) * c + j;
      const double xhat = (in.x[k] - rm[i]) * rs[i];
      const double e = std::abs(in.w[j]) * (rs[i] * e_m + std::abs(xhat) * (r_s + 3 * kNu)) +
                       kNu * std::abs(ref[k]);
      bound[k] = bf16_output_bound(ref[k], e);
    }
  }
  expect_within("layernorm bf16 out", widen(out), ref, bound);
  expect_within("layernorm bf16 mean (fp32)", widen(mean), rm, mean_bound);
  expect_within("layernorm bf16 rstd (fp32)", widen(rstd), rs, rstd_bound);

  // The fp32 kernel on the widened inputs computes the same statistics; its in-row sums are
  // vectorised over 16 fp32 lanes where the bf16 kernel's (loading 16-bit values) use 32, so the
  // two agree within both bounds rather than bitwise.
  const auto xf = to_float(in.x), wf = to_float(in.w), bf = to_float(in.b);
  std::vector<float> outf(in.x.size()), meanf(n), rstdf(n);
  layernorm_forward(outf.data(), meanf.data(), rstdf.data(), xf.data(), wf.data(), bf.data(), n,
                    c);
  std::vector<double> twice_mean(n), twice_rstd(n);
  for (int i = 0; i < n; ++i) {
    twice_mean[i] = 2 * mean_bound[i];
    twice_rstd[i] = 2 * rstd_bound[i];
  }
  expect_within("layernorm bf16 mean vs fp32 kernel", widen(mean), to_double(meanf), twice_mean);
  expect_within("layernorm bf16 rstd vs fp32 kernel", widen(rstd), to_double(rstdf), twice_rstd);
}

TEST(LayerNormBf16, BackwardWithinTheBoundResidualAddedBeforeTheRounding) {
  const int n = kRows, c = kCols;
  const auto in = make_inputs(n, c);
  // Both kernels get the same fp32 statistics (those of the bf16 forward), so only the backward's
  // own errors count.
  const auto xb = round_to_bf16(in.x), wb = round_to_bf16(in.w), bb = round_to_bf16(in.b),
             dyb = round_to_bf16(in.dy);
  std::vector<bf16> out(in.x.size());
  std::vector<float> mean(n), rstd(n);
  layernorm_forward(out.data(), mean.data(), rstd.data(), xb.data(), wb.data(), bb.data(), n, c);
  const auto m = to_double(mean), s = to_double(rstd);

  // dinp aliases dresidual, as the engine calls it.
  auto dx = round_to_bf16(in.dres);
  layernorm_backward_input(dx.data(), dx.data(), dyb.data(), xb.data(), wb.data(), mean.data(),
                           rstd.data(), n, c);
  std::vector<double> ref(in.x.size());
  layernorm_backward_input(ref.data(), in.dres.data(), in.dy.data(), in.x.data(), in.w.data(),
                           m.data(), s.data(), n, c);
  // With dnorm_j = dy_j w_j, xhat_j = (x_j - m) s, A1 = mean|dnorm|, A2 = mean|dnorm xhat|:
  // mean(dnorm) errs by (c+1) nu A1 (one product per term, the sum, the division), and
  // mean(dnorm xhat) by (c+4) nu A2 (four roundings per term). g_j = s (dnorm_j - mean(dnorm) -
  // xhat_j mean(dnorm xhat)) then errs by s nu (3 B_j + (c+1) A1 + (c+4) |xhat_j| A2) + nu |g_j|,
  // B_j = |dnorm_j| + |mean(dnorm)| + |xhat_j mean(dnorm xhat)| (the recomputed terms, two
  // subtractions), and adding dresidual in fp32 before the rounding adds nu |ref_j|.
  std::vector<double> bound(ref.size());
  for (int i = 0; i < n; ++i) {
    double dmean = 0, dxmean = 0, a1 = 0, a2 = 0;
    for (int j = 0; j < c; ++j) {
      const std::size_t k = static_cast<std::size_t>(i) * c + j;
      const double dnorm = in.dy[k] * in.w[j], xhat = (in.x[k] - m[i]) * s[i];
      dmean += dnorm / c;
      dxmean += dnorm * xhat / c;
      a1 += std::abs(dnorm) / c;
      a2 += std::abs(dnorm * xhat) / c;
    }
    for (int j = 0; j < c; ++j) {
      const std::size_t k = static_cast<std::size_t>(i) * c + j;
      const double dnorm = in.dy[k] * in.w[j], xhat = (in.x[k] - m[i]) * s[i];
      const double g = s[i] * (dnorm - dmean - xhat * dxmean);
      const double b_j = std::abs(dnorm) + std::abs(dmean) + std::abs(xhat * dxmean);
      const double e = s[i] * kNu * (3 * b_j + (c + 1) * a1 + (c + 4) * std::abs(xhat) * a2) +
                       kNu * std::abs(g) + kNu * std::abs(ref[k]);
      bound[k] = bf16_output_bound(ref[k], e);
    }
  }
  expect_within("layernorm bf16 dinp (+ dresidual, in place)", widen(dx), ref, bound);
}

TEST(LayerNormBf16, WeightGradientIsTheFp32KernelsBitwiseAndWithinTheBound) {
  const int n = kRows, c = kCols;
  const auto in = make_inputs(n, c);
  const auto xb = round_to_bf16(in.x), dyb = round_to_bf16(in.dy);
  std::vector<float> mean(n), rstd(n);
  for (int i = 0; i < n; ++i) {
    mean[i] = 3.0f + 0.01f * i;
    rstd[i] = 0.5f + 0.001f * i;
  }
  // Accumulates into what is there.
  const auto dw0 = to_float(random_vector(c, 16)), db0 = to_float(random_vector(c, 17));
  auto dw = dw0, db = db0;
  layernorm_backward_weight(dw.data(), db.data(), dyb.data(), xb.data(), mean.data(), rstd.data(),
                            n, c);
  // The same column sums in the same row order as the fp32 kernel on the widened inputs.
  auto dwf = dw0, dbf = db0;
  const auto xf = to_float(in.x), dyf = to_float(in.dy);
  layernorm_backward_weight(dwf.data(), dbf.data(), dyf.data(), xf.data(), mean.data(),
                            rstd.data(), n, c);
  expect_bitwise("layernorm bf16 dweight vs fp32 kernel", dw, dwf);
  expect_bitwise("layernorm bf16 dbias vs fp32 kernel", db, dbf);

  auto rw = to_double(dw0), rb = to_double(db0);
  const auto m = to_double(mean), s = to_double(rstd);
  layernorm_backward_weight(rw.data(), rb.data(), in.dy.data(), in.x.data(), m.data(), s.data(),
                            n, c);
  // dweight_j: n terms dy (x - m) s of three roundings each, summed over the rows ((n-1) nu),
  // added to the initial value (nu): (n + 2) nu sum_i |term| + nu |ref|; dbias: (n-1) nu
  // sum_i |dy| + nu |ref|.
  std::vector<double> bw(c), bb(c);
  for (int j = 0; j < c; ++j) {
    double sw = std::abs(dw0[j]), sb = std::abs(db0[j]);
    for (int i = 0; i < n; ++i) {
      const std::size_t k = static_cast<std::size_t>(i) * c + j;
      sw += std::abs(in.dy[k] * (in.x[k] - m[i]) * s[i]);
      sb += std::abs(in.dy[k]);
    }
    bw[j] = (n + 2) * kNu * sw + kNu * std::abs(rw[j]);
    bb[j] = n * kNu * sb + kNu * std::abs(rb[j]);
  }
  expect_within("layernorm bf16 dweight (fp32)", to_double(dw), rw, bw);
  expect_within("layernorm bf16 dbias (fp32)", to_double(db), rb, bb);
}

TEST(RMSNormBf16, ForwardWithinTheBoundAndRstdInFp32) {
  const int n = kRows, c = kCols;
  const double eps = 1e-6;
  const auto in = make_inputs(n, c);
  const auto xb = round_to_bf16(in.x), wb = round_to_bf16(in.w);
  std::vector<bf16> out(in.x.size());
  std::vector<float> rstd(n);
  rmsnorm_forward(out.data(), rstd.data(), xb.data(), wb.data(), n, c, eps);
  std::vector<double> ref(in.x.size()), rs(n);
  rmsnorm_forward(ref.data(), rs.data(), in.x.data(), in.w.data(), n, c, eps);
  // rstd: c squares (nu each) summed ((c-1) nu), / c, + eps, sqrt, 1 / : relative
  // r_s = (c/2 + 4) nu (as layernorm's). out_j = x_j s^ w_j: r_s + 2 nu relative.
  const double r_s = (c / 2.0 + 4) * kNu;
  std::vector<double> bound(ref.size()), rstd_bound(n);
  for (int i = 0; i < n; ++i) {
    rstd_bound[i] = r_s * rs[i];
    for (int j = 0; j < c; ++j) {
      const std::size_t k = static_cast<std::size_t>(i) * c + j;
      bound[k] = bf16_output_bound(ref[k], (r_s + 2 * kNu) * std::abs(ref[k]));
    }
  }
  expect_within("rmsnorm bf16 out", widen(out), ref, bound);
  expect_within("rmsnorm bf16 rstd (fp32)", widen(rstd), rs, rstd_bound);
  // Against the fp32 kernel on the widened inputs: within both bounds (different lane counts in
  // the in-row sum, as for layernorm).
  const auto xf = to_float(in.x), wf = to_float(in.w);
  std::vector<float> outf(in.x.size()), rstdf(n);
  rmsnorm_forward(outf.data(), rstdf.data(), xf.data(), wf.data(), n, c, eps);
  for (double& b : rstd_bound) b *= 2;
  expect_within("rmsnorm bf16 rstd vs fp32 kernel", widen(rstd), to_double(rstdf), rstd_bound);
}

TEST(RMSNormBf16, BackwardWithinTheBoundWeightGradientBitwiseTheFp32Kernels) {
  const int n = kRows, c = kCols;
  const auto in = make_inputs(n, c);
  const auto xb = round_to_bf16(in.x), wb = round_to_bf16(in.w), dyb = round_to_bf16(in.dy);
  std::vector<bf16> out(in.x.size());
  std::vector<float> rstd(n);
  rmsnorm_forward(out.data(), rstd.data(), xb.data(), wb.data(), n, c, 1e-5);
  const auto s = to_double(rstd);

  auto dx = round_to_bf16(in.dres);  // dinp aliases dresidual
  rmsnorm_backward_input(dx.data(), dx.data(), dyb.data(), xb.data(), wb.data(), rstd.data(), n,
                         c);
  std::vector<double> ref(in.x.size());
  rmsnorm_backward_input(ref.data(), in.dres.data(), in.dy.data(), in.x.data(), in.w.data(),
                         s.data(), n, c);
  // mean(dnorm xhat) (terms dy w x s, three roundings each; the sum; / c) errs by (c+3) nu A2,
  // A2 = mean|dnorm xhat|; g_j = s (dnorm_j - xhat_j mean(dnorm xhat)) by
  // s nu (3 B_j + (c+3) |xhat_j| A2) + nu |g_j|, B_j = |dnorm_j| + |xhat_j mean(dnorm xhat)|;
  // the residual's addition nu |ref_j|.
  std::vector<double> bound(ref.size());
  for (int i = 0; i < n; ++i) {
    double dxmean = 0, a2 = 0;
    for (int j = 0; j < c; ++j) {
      const std::size_t k = static_cast<std::size_t>(i) * c + j;
      const double t = in.dy[k] * in.w[j] * in.x[k] * s[i];
      dxmean += t / c;
      a2 += std::abs(t) / c;
    }
    for (int j = 0; j < c; ++j) {
      const std::size_t k = static_cast<std::size_t>(i) * c + j;
      const double dnorm = in.dy[k] * in.w[j], xhat = in.x[k] * s[i];
      const double g = s[i] * (dnorm - xhat * dxmean);
      const double b_j = std::abs(dnorm) + std::abs(xhat * dxmean);
      const double e = s[i] * kNu * (3 * b_j + (c + 3) * std::abs(xhat) * a2) +
                       kNu * std::abs(g) + kNu * std::abs(ref[k]);
      bound[k] = bf16_output_bound(ref[k], e);
    }
  }
  expect_within("rmsnorm bf16 dinp (+ dresidual, in place)", widen(dx), ref, bound);

  const auto dw0 = to_float(random_vector(c, 18));
  auto dw = dw0, dwf = dw0;
  rmsnorm_backward_weight(dw.data(), dyb.data(), xb.data(), rstd.data(), n, c);
  const auto xf = to_float(in.x), dyf = to_float(in.dy);
  rmsnorm_backward_weight(dwf.data(), dyf.data(), xf.data(), rstd.data(), n, c);
  expect_bitwise("rmsnorm bf16 dweight vs fp32 kernel", dw, dwf);
  auto rw = to_double(dw0);
  rmsnorm_backward_weight(rw.data(), in.dy.data(), in.x.data(), s.data(), n, c);
  // n terms dy x s (two roundings each), the column sum, the initial value: (n + 1) nu
  // sum_i |term| + nu |ref|.
  std::vector<double> bw(c);
  for (int j = 0; j < c; ++j) {
    double sw = std::abs(dw0[j]);
    for (int i = 0; i < n; ++i) {
      const std::size_t k = static_cast<std::size_t>(i) * c + j;
      sw += std::abs(in.dy[k] * in.x[k] * s[i]);
    }
    bw[j] = (n + 1) * kNu * sw + kNu * std::abs(rw[j]);
  }
  expect_within("rmsnorm bf16 dweight (fp32)", to_double(dw), rw, bw);
}

}  // namespace
}  // namespace plait::kernels
