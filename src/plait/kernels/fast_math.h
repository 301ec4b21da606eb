#pragma once
// exp and tanh for fp32 written so that GCC vectorises loops calling them (no libm calls, no
// branches: selects only). The double overloads are the libm functions, so the tests' double
// instantiations of the kernels are exact references.
//
// exp: Cephes expf's scheme (S. Moshier, Cephes Math Library, expf.c): x = n*ln2 + r with
// |r| <= ln2/2, ln2 split in two constants so n*ln2 is exact, degree-6 polynomial for e^r, 2^n
// built in the exponent bits. Relative error about 1e-7 (tests/kernels/fast_math_test.cpp).
// tanh: Cephes tanhf's scheme: for |x| < 0.625 an odd polynomial (no cancellation near 0),
// otherwise 1 - 2/(e^{2|x|} + 1) with the sign restored.
#include <bit>
#include <cmath>
#include <cstdint>

namespace plait::kernels {

inline float exp_fast(float x) {
  // Clamp to the range where the result is a normal float (below: ~1e-38, not 0, which is
  // harmless for softmax; above: ~3e38).
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.7f ? 88.7f : x;
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

inline float tanh_fast(float x) {
  const float a = x < 0.0f ? -x : x;
  // Large |x|: 1 - 2/(e^{2a} + 1); e^{2a} saturates at ~3e38, giving exactly 1.
  const float e = exp_fast(2.0f * a);
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0.0f ? -big : big;
  // Small |x|: Cephes tanhf polynomial in x^2.
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  return a < 0.625f ? small : big;
}

inline double exp_fast(double x) { return std::exp(x); }
inline double tanh_fast(double x) { return std::tanh(x); }

}  // namespace plait::kernels
