#pragma once
// What the bf16 kernels' tests share: rounding test inputs to bf16, reading bf16 results back,
// and the per-element bound every bf16 output is held to.
//
// The reference is the fp64 instantiation of the same kernel run on the bf16-rounded inputs
// (widened exactly), so only the bf16 kernel's own errors count: its fp32 arithmetic and the one
// rounding of each output. For an output whose fp32 value z errs from the reference r by at most
// e (derived per op in each test, first order in the fp32 unit roundoff nu = 2^-24), rounding z
// to bf16 (round to nearest even, 8 significant bits) moves it by at most 2^-8 |z| <=
// 2^-8 (|r| + e), or by half the subnormal spacing 2^-134 below bf16's normal range, so
//   |out - r| <= 2^-8 |r| + (1 + 2^-8) e + 2^-134                        (bf16_output_bound).
// Outputs kept in fp32 (statistics, weight gradients, losses) are held to e alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plait/core/bf16.h"

namespace plait::kernels::testing {

inline constexpr double kNu = 0x1p-24;                 // fp32 unit roundoff
inline constexpr double kBf16Unit = 0x1p-8;            // bf16 unit roundoff
inline constexpr double kBf16SubnormalHalfStep = 0x1p-134;

inline std::vector<bf16> round_to_bf16(const std::vector<double>& v) {
  std::vector<bf16> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = bf16(static_cast<float>(v[i]));
  return r;
}

// An fp32 kernel's outputs rounded once to bf16.
inline std::vector<bf16> round_to_bf16(const std::vector<float>& v) {
  std::vector<bf16> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = bf16(v[i]);
  return r;
}

template <typename T>
std::vector<double> widen(const std::vector<T>& v) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = static_cast<double>(static_cast<float>(v[i]));
  return r;
}

inline std::vector<float> widen_to_float(const std::vector<bf16>& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = static_cast<float>(v[i]);
  return r;
}

// The values v takes once stored in bf16 (what the bf16 kernel reads), as doubles.
inline std::vector<double> bf16_values(const std::vector<double>& v) {
  return widen(round_to_bf16(v));
}

inline double bf16_output_bound(double ref, double fp32_error) {
  return kBf16Unit * (std::abs(ref) + fp32_error) + fp32_error + kBf16SubnormalHalfStep;
}

// Expects |got_i - ref_i| <= bound_i for every i (NaN fails) and prints the worst ratio.
inline void expect_within(const std::string& what, const std::vector<double>& got,
                          const std::vector<double>& ref, const std::vector<double>& bound) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  ASSERT_EQ(got.size(), bound.size()) << what;
  double worst = 0;
  std::size_t failures = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - ref[i]);
    if (!(err <= bound[i])) {
      if (failures++ == 0) first = i;
    }
    worst = std::max(worst, err / bound[i]);
  }
  std::printf("[ measured ] %s: worst |error| / bound %.3g over %zu elements\n", what.c_str(),
              worst, got.size());
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " elements outside the bound, first at "
                          << first << ": got " << got[first] << ", reference " << ref[first]
                          << ", bound " << bound[first];
}

// Expects the same bits (bf16: the 16-bit patterns; fp32: the 32-bit ones).
template <typename T>
void expect_bitwise(const std::string& what, const std::vector<T>& got,
                    const std::vector<T>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t failures = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && failures++ == 0) first = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " elements differ, first at " << first
                          << ": " << static_cast<float>(got[first]) << " vs "
                          << static_cast<float>(want[first]);
}

}  // namespace plait::kernels::testing
