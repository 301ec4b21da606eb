#include "plait/kernels/rotary.h"

#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"
#include "plait/core/error.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

// A K/V-like layout: 3 heads of 8 rotated, then 10 more columns (the V part) left alone.
constexpr int kBatch = 2, kHeads = 3, kHeadDim = 8, kStride = kHeads * kHeadDim + 10;

// Hugging Face transformers' apply_rotary_pos_emb, transcribed for one head vector at position p:
//   inv_freq = 1 / base^(arange(0, d, 2) / d);  emb = cat(freqs, freqs);
//   q_embed = q * cos(emb) + rotate_half(q) * sin(emb),  rotate_half(x) = cat(-x2, x1).
std::vector<double> hf_apply_rotary(const double* x, int d, double p, double base) {
  std::vector<double> emb(d), rotated(d), out(d);
  for (int j = 0; j < d / 2; ++j) {
    const double inv_freq = 1.0 / std::pow(base, static_cast<double>(2 * j) / d);
    emb[j] = emb[j + d / 2] = p * inv_freq;
  }
  for (int j = 0; j < d / 2; ++j) {
    rotated[j] = -x[j + d / 2];
    rotated[j + d / 2] = x[j];
  }
  for (int j = 0; j < d; ++j) out[j] = x[j] * std::cos(emb[j]) + rotated[j] * std::sin(emb[j]);
  return out;
}

TEST(Rotary, ForwardIsHuggingFaceRotateHalfAtAbsolutePositions) {
  for (double theta : {10000.0, 500000.0}) {
    for (int pos0 : {0, 5, 1000}) {
      const int s = 4;
      const auto x = random_vector(kBatch * s * kStride, 1);
      auto y = x;
      rotary_forward(y.data(), kBatch, s, kHeads, kHeadDim, kStride, pos0, theta);
      for (int b = 0; b < kBatch; ++b) {
        for (int t = 0; t < s; ++t) {
          const std::size_t row = (static_cast<std::size_t>(b) * s + t) * kStride;
          for (int h = 0; h < kHeads; ++h) {
            const auto ref =
                hf_apply_rotary(x.data() + row + h * kHeadDim, kHeadDim, pos0 + t, theta);
            for (int j = 0; j < kHeadDim; ++j) {
              EXPECT_NEAR(y[row + h * kHeadDim + j], ref[j], 1e-13)
                  << "theta " << theta << " pos " << pos0 + t << " head " << h << " j " << j;
            }
          }
          for (int j = kHeads * kHeadDim; j < kStride; ++j) EXPECT_EQ(y[row + j], x[row + j]);
        }
      }
    }
  }
}

TEST(Rotary, SegmentsRotateExactlyAsInsideTheWholeSequence) {
  const int total = 13;
  const auto x = random_vector(kBatch * total * kStride, 2);
  auto whole = x;
  rotary_forward(whole.data(), kBatch, total, kHeads, kHeadDim, kStride, 0, 10000.0);
  int start = 0;
  for (int len : {4, 1, 5, 3}) {
    // The segment's rows, (B, len, stride), as the engine holds them.
    std::vector<double> seg(static_cast<std::size_t>(kBatch) * len * kStride);
    for (int b = 0; b < kBatch; ++b) {
      for (int t = 0; t < len; ++t) {
        for (int j = 0; j < kStride; ++j) {
          seg[(static_cast<std::size_t>(b) * len + t) * kStride + j] =
              x[(static_cast<std::size_t>(b) * total + start + t) * kStride + j];
        }
      }
    }
    rotary_forward(seg.data(), kBatch, len, kHeads, kHeadDim, kStride, start, 10000.0);
    for (int b = 0; b < kBatch; ++b) {
      for (int t = 0; t < len; ++t) {
        for (int j = 0; j < kStride; ++j) {
          ASSERT_EQ(seg[(static_cast<std::size_t>(b) * len + t) * kStride + j],
                    whole[(static_cast<std::size_t>(b) * total + start + t) * kStride + j])
              << "segment at " << start << " b " << b << " t " << t << " j " << j;
        }
      }
    }
    start += len;
  }
}

TEST(Rotary, BackwardMatchesFiniteDifferences) {
  const int s = 5, pos0 = 7;
  auto x = random_vector(kBatch * s * kStride, 3);
  const auto probe = random_vector(x.size(), 4);
  auto loss = [&] {
    auto y = x;
    rotary_forward(y.data(), kBatch, s, kHeads, kHeadDim, kStride, pos0, 10000.0);
    return dot(probe, y);
  };
  auto dx = probe;
  rotary_backward(dx.data(), kBatch, s, kHeads, kHeadDim, kStride, pos0, 10000.0);
  EXPECT_LT(scaled_max_error(dx, numeric_gradient(loss, x)), kGradientTolerance);
}

TEST(Rotary, FloatMatchesDouble) {
  // Big enough for the threaded path; head_dim 160 has 80 frequencies, more than one chunk of
  // the kernel's 64, so the second (partial) chunk is covered too.
  const int batch = 2, s = 300, heads = 4, d = 160, stride = 2 * heads * d, pos0 = 2000;
  const auto x = random_vector(static_cast<std::size_t>(batch) * s * stride, 5);
  auto y = x, dx = x;
  rotary_forward(y.data(), batch, s, heads, d, stride, pos0, 10000.0);
  rotary_backward(dx.data(), batch, s, heads, d, stride, pos0, 10000.0);
  auto yf = to_float(x), dxf = to_float(x);
  rotary_forward(yf.data(), batch, s, heads, d, stride, pos0, 10000.0);
  rotary_backward(dxf.data(), batch, s, heads, d, stride, pos0, 10000.0);
  EXPECT_LT(scaled_max_error(to_double(yf), y), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(dxf), dx), kFloatTolerance);
  // The backward is the inverse rotation: it undoes the forward.
  rotary_backward(y.data(), batch, s, heads, d, stride, pos0, 10000.0);
  EXPECT_LT(scaled_max_error(y, x), 1e-13);
}

TEST(Rotary, RejectsOddHeadDimAndHeadsWiderThanTheRow) {
  std::vector<float> x(64);
  EXPECT_THROW(rotary_forward(x.data(), 1, 2, 2, 7, 16, 0, 10000.0), Error);
  EXPECT_THROW(rotary_backward(x.data(), 1, 2, 2, 7, 16, 0, 10000.0), Error);
  EXPECT_THROW(rotary_forward(x.data(), 1, 2, 3, 8, 16, 0, 10000.0), Error);
  EXPECT_THROW(rotary_forward(x.data(), 1, 2, 2, 8, 16, -1, 10000.0), Error);
  EXPECT_NO_THROW(rotary_forward(x.data(), 1, 2, 2, 8, 16, 0, 10000.0));
}

}  // namespace
}  // namespace plait::kernels
