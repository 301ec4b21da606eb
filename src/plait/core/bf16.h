#pragma once
// bfloat16, the 16-bit storage type of mixed precision (Kalamkar et al., arXiv 1905.12322): the
// top half of an IEEE fp32 value — sign, the same 8 exponent bits, 7 stored significand bits (8
// significant bits, unit roundoff 2^-8). plait stores activations, K/V and the compute copy of
// the weights in it and does all arithmetic in fp32 (spec/precision_policy.h), so the type only
// stores and converts; it has no arithmetic of its own on purpose.
//
// Conversion from fp32 rounds to nearest, ties to even (as AVX-512 BF16's vcvtneps2bf16, CUDA's
// __float2bfloat16 and PyTorch do); NaNs stay NaNs (quiet), infinities and signed zeros are
// kept, values above the largest finite bf16 round to infinity. To fp32 is exact.
#include <bit>
#include <cstdint>

namespace plait {

struct bf16 {
  std::uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float value) : bits(round_bits(value)) {}
  explicit operator float() const { return std::bit_cast<float>(std::uint32_t{bits} << 16); }

  static bf16 from_bits(std::uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }
  // Round to nearest even: add 0x7FFF plus the lowest kept bit, then truncate. A NaN is made
  // quiet instead (the rounding could carry a signalling NaN's payload into infinity).
  static std::uint16_t round_bits(float value) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
};
static_assert(sizeof(bf16) == 2);

inline float to_float(bf16 v) { return static_cast<float>(v); }
inline float to_float(float v) { return v; }
inline double to_float(double v) { return v; }

// The value of fp32 x after a round trip through bf16 (what storing it keeps).
inline float round_to_bf16(float x) { return static_cast<float>(bf16(x)); }

}  // namespace plait
