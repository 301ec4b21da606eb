#include "plait/kernels/rotary.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "plait/core/error.h"
#include "plait/kernels/accumulator.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {
namespace {

// Frequencies are handled in chunks of this many, so the cos/sin of one position live on the
// stack whatever the head dimension (and a call allocates nothing).
constexpr int kFrequencyChunk = 64;

void check_arguments(int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                     double theta) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw Error("rotary: head_dim must be even and positive (pairs i, i + head_dim/2); got " +
                std::to_string(head_dim));
  }
  if (batch < 0 || s < 0 || heads <= 0 || std::int64_t{heads} * head_dim > row_stride) {
    throw Error("rotary: need batch, s >= 0 and 0 < heads * head_dim <= row_stride; got batch=" +
                std::to_string(batch) + " s=" + std::to_string(s) +
                " heads=" + std::to_string(heads) + " head_dim=" + std::to_string(head_dim) +
                " row_stride=" + std::to_string(row_stride));
  }
  if (pos0 < 0 || !(theta > 0)) {
    throw Error("rotary: need pos0 >= 0 and theta > 0; got pos0=" + std::to_string(pos0) +
                " theta=" + std::to_string(theta));
  }
}

// x' = R(sign * angle) x for every head of every row; sign = +1 forward, -1 for R^T. cos and sin
// are F = Acc<T> (fp32 for bf16): the pair is widened, rotated in F and each result rounded once.
template <typename T>
void rotate(T* x, int batch, int s, int heads, int head_dim, int row_stride, int pos0, double theta,
            int sign) {
  using F = Acc<T>;
  check_arguments(batch, s, heads, head_dim, row_stride, pos0, theta);
  const int half = head_dim / 2;
  const std::int64_t work = std::int64_t{batch} * s * heads * head_dim;
  for (int i0 = 0; i0 < half; i0 += kFrequencyChunk) {
    const int count = std::min(kFrequencyChunk, half - i0);
    double inv_freq[kFrequencyChunk];  // theta^(-2i/d) (HF: 1 / base^(arange(0, d, 2) / d))
    for (int k = 0; k < count; ++k) inv_freq[k] = std::pow(theta, -2.0 * (i0 + k) / head_dim);
    // One position per iteration: it owns its rows, so the result does not depend on the
    // threads.
#pragma omp parallel for schedule(static) if (parallel_worthwhile(work))
    for (int t = 0; t < s; ++t) {
      const double p = static_cast<double>(pos0) + t;
      F cos_[kFrequencyChunk], sin_[kFrequencyChunk];
      for (int k = 0; k < count; ++k) {
        const double angle = p * inv_freq[k];
        cos_[k] = static_cast<F>(std::cos(angle));
        sin_[k] = static_cast<F>(sign * std::sin(angle));
      }
      for (int b = 0; b < batch; ++b) {
        T* row = x + (static_cast<std::size_t>(b) * s + t) * row_stride + i0;
        for (int h = 0; h < heads; ++h) {
          T* lo = row + static_cast<std::size_t>(h) * head_dim;
          T* hi = lo + half;
#pragma omp simd
          for (int k = 0; k < count; ++k) {
            const F a = to_float(lo[k]), c = to_float(hi[k]);
            lo[k] = from_float<T>(a * cos_[k] - c * sin_[k]);
            hi[k] = from_float<T>(c * cos_[k] + a * sin_[k]);
          }
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void rotary_forward(T* x, int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                    double theta) {
  rotate(x, batch, s, heads, head_dim, row_stride, pos0, theta, +1);
}

template <typename T>
void rotary_backward(T* dx, int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                     double theta) {
  rotate(dx, batch, s, heads, head_dim, row_stride, pos0, theta, -1);
}

template void rotary_forward<float>(float*, int, int, int, int, int, int, double);
template void rotary_forward<double>(double*, int, int, int, int, int, int, double);
template void rotary_backward<float>(float*, int, int, int, int, int, int, double);
template void rotary_backward<double>(double*, int, int, int, int, int, int, double);
template void rotary_forward<bf16>(bf16*, int, int, int, int, int, int, double);
template void rotary_backward<bf16>(bf16*, int, int, int, int, int, int, double);

}  // namespace plait::kernels
