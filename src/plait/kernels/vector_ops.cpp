#include "plait/kernels/vector_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "plait/kernels/parallel.h"

namespace plait::kernels {

void zero_bytes(void* dst, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto n = static_cast<std::int64_t>(bytes);
  constexpr std::int64_t kChunk = std::int64_t{4} << 20;
#pragma omp parallel for schedule(static) if (n > 4 * kChunk)
  for (std::int64_t i = 0; i < n; i += kChunk) {
    std::memset(d + i, 0, static_cast<std::size_t>(std::min(kChunk, n - i)));
  }
}

void fill(float* dst, std::size_t n, float value) { std::fill_n(dst, n, value); }

void accumulate(float* dst, const float* src, std::size_t n) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) dst[i] += src[i];
}

// Both conversions are branch-free per element (bf16::round_bits' NaN test compiles to a
// select), so GCC vectorises them: widening is a zero-extension and a shift, rounding integer
// adds, a shift and a blend.
void convert(bf16* dst, const float* src, std::size_t n) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) dst[i] = bf16(src[i]);
}

void convert(float* dst, const bf16* src, std::size_t n) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]);
}

template <typename T>
void add_bias_residual(T* out, const float* sum, const T* bias, const T* residual, int n, int c) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const std::size_t row = static_cast<std::size_t>(i) * c;
    for (int j = 0; j < c; ++j) {
      float x = sum[row + j];
      if (bias) x += static_cast<float>(to_float(bias[j]));
      if (residual) x += static_cast<float>(to_float(residual[row + j]));
      out[row + j] = from_float<T>(x);
    }
  }
}

template void add_bias_residual<float>(float*, const float*, const float*, const float*, int, int);
template void add_bias_residual<bf16>(bf16*, const float*, const bf16*, const bf16*, int, int);

}  // namespace plait::kernels
