#pragma once
// exp and a row maximum for fp32 written so that GCC vectorises them (no libm calls, no
// branches: selects only). The double overloads are the libm functions, so the tests' double
// instantiations of the kernels are exact references.
//
// exp: Cephes expf's scheme (S. Moshier, Cephes Math Library, expf.c): x = n*ln2 + r with
// |r| <= ln2/2, ln2 split in two constants so n*ln2 is exact, degree-6 polynomial for e^r, 2^n
// built in the exponent bits. Relative error about 1e-7 (tests/kernels/fast_math_test.cpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "plait/kernels/accumulator.h"

namespace plait::kernels {

// Always inlined: it vectorises only inside its caller's loop, and GCC's inliner gives up on it
// in a large unit (attention.cpp with both tile-product forms: the calls took 41% of the bf16
// attention's time).
[[gnu::always_inline]] inline float exp_fast(float x) {
  // Clamp to the range where the result is a normal float (below: ~1e-38, not 0, which is
  // harmless for softmax; above: ~3e38). min/max, not selects of constants, which GCC would
  // propagate into three masked copies of the polynomial.
  x = std::min(std::max(x, -87.3f), 88.7f);
  // Round x/ln2 to the nearest integer with the 1.5*2^23 trick (pure arithmetic, vectorises).
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const std::int32_t ni = std::bit_cast<std::int32_t>(shifted) - 0x4B400000;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((ni + 127) << 23);
}

inline double exp_fast(double x) { return std::exp(x); }

// max_j x[j], n >= 1, in Acc<T> (bf16 values widened exactly, so the maximum is one of them). A
// `simd reduction(max)` loop is not vectorised by GCC without fast-math (NaN ordering), so this
// keeps 16 running maxima, one per lane, and combines them at the end.
template <typename T>
Acc<T> max_of(const T* x, int n) {
  constexpr int kLanes = 16;
  Acc<T> lanes[kLanes];
  for (int k = 0; k < kLanes; ++k) lanes[k] = to_float(x[0]);
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const Acc<T> xk = to_float(x[j + k]);
      lanes[k] = lanes[k] > xk ? lanes[k] : xk;
    }
  }
  Acc<T> m = lanes[0];
  for (int k = 1; k < kLanes; ++k) m = std::max(m, lanes[k]);
  for (; j < n; ++j) m = std::max(m, to_float(x[j]));
  return m;
}

}  // namespace plait::kernels
