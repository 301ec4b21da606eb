#pragma once
// IEEE 754 binary16 ("half", fp16) as stored bits: 1 sign bit, 5 exponent bits (bias 15), 10
// significand bits; largest finite 65504, subnormals down to 2^-24. plait never computes in it:
// Hugging Face checkpoints often store weights in it (torch.float16), so the conversions read
// and write such files (checkpoint/safetensors_format.h). Conversion from fp32 rounds to
// nearest, ties to even (as torch's .half() and the F16C instruction vcvtps2ph do); values whose
// magnitude rounds above 65504 become infinities, NaNs stay NaNs (quiet). To fp32 is exact.
#include <bit>
#include <cstdint>

namespace plait {

inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return sign != 0 ? -magnitude : magnitude;
}

inline std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));  // NaN
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504: inf
  if (abs >= 0x38800000u) {
    // Normal in fp16 (>= 2^-14): rebias the exponent, round the 13 dropped bits to nearest even.
    const std::uint32_t rebiased = abs - (112u << 23);
    const std::uint32_t rounded = rebiased + 0xFFFu + ((rebiased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal in fp16: the significand with its implicit bit, shifted to units of 2^-24 and
  // rounded to nearest even (a carry into the exponent field gives the smallest normal, right).
  const std::uint32_t exponent = abs >> 23;
  const std::uint32_t significand = (abs & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;  // 14..24: value = significand * 2^(exponent-150)
  const std::uint32_t kept = significand >> shift;
  const std::uint32_t rest = significand & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  const std::uint32_t rounded = kept + ((rest > halfway || (rest == halfway && (kept & 1u))) ? 1u : 0u);
  return static_cast<std::uint16_t>(sign | rounded);
}

}  // namespace plait
