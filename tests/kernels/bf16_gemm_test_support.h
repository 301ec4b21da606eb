#pragma once
// Shared by the bf16 GEMM tests: bf16 operands, the fp64 reference of one output element and its
// error bound, and a context on either path.
//
// The bound. The operands are bf16 values, exactly representable in fp32 and fp64, so the fp64
// reference r = sum_t x_t (K products plus bias, residual or the old value: K' terms) is exact up
// to ~K'·2^-53 relative to sum_t |x_t|, negligible here. The kernels form each product of two
// bf16 exactly in fp32 (8 + 8 significant bits <= 24) and add the K' terms in fp32 in some order
// (OpenBLAS's blocking, oneDNN's brgemm and its vdpbf16ps pairs): any order of K' - 1 additions,
// each rounded once, errs by at most gamma(K') · sum_t |x_t|, gamma(n) = n·u / (1 - n·u), u = 2^-24
// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 4.4 and Lemma 3.1). A
// bf16 result is then rounded once, to nearest: a further 2^-8 relative (8 significant bits).
// So, per element:  |out - r| <= 2^-8 · |r| + (1 + 2^-8) · gamma(K') · sum_t |x_t|  (bf16 out),
//                   |out - r| <= gamma(K') · sum_t |x_t|                           (fp32 out).
// Inputs are O(1), far from fp32 denormals (which vdpbf16ps flushes to zero).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "finite_difference.h"
#include "plait/core/bf16.h"
#include "plait/core/host_memory.h"
#include "plait/core/memory_tracker.h"
#include "plait/kernels/onednn_context.h"

namespace plait::kernels::testing {

inline std::vector<bf16> random_bf16(std::size_t n, std::uint64_t seed) {
  std::vector<bf16> out(n);
  const std::vector<double> v = random_vector(n, seed);
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16(static_cast<float>(v[i]));
  return out;
}

inline double gamma_fp32(std::size_t terms) {
  const double nu = static_cast<double>(terms) * std::ldexp(1.0, -24);
  return nu / (1.0 - nu);
}

// The reference of one output element, accumulated term by term.
struct Reference {
  double sum = 0, abs_sum = 0;
  std::size_t terms = 0;
  void add(double x) {
    sum += x;
    abs_sum += std::fabs(x);
    ++terms;
  }
  double bound_bf16() const {
    return std::ldexp(std::fabs(sum), -8) + (1.0 + std::ldexp(1.0, -8)) * gamma_fp32(terms) * abs_sum;
  }
  double bound_fp32() const { return gamma_fp32(terms) * abs_sum; }
};

// Counts the elements outside their bound, reporting the first few.
struct BoundCheck {
  int bad = 0;
  void operator()(const char* name, int i, int j, double got, double reference, double bound) {
    if (std::fabs(got - reference) > bound && ++bad <= 3) {
      ADD_FAILURE() << name << "[" << i << "," << j << "] = " << got << ", reference " << reference
                    << ", bound " << bound;
    }
  }
};

// A context on the native (oneDNN) or the forced fallback path, charging `tracker`.
struct PathContext {
  MemoryTracker tracker;
  std::unique_ptr<OneDnnContext> context;
  explicit PathContext(bool fallback, std::size_t cache_capacity = 64) {
    context = std::make_unique<OneDnnContext>(host_memory(), tracker, MemoryCategory::kActivations,
                                              OneDnnContextOptions{cache_capacity, fallback});
  }
};

// Skips the current test when the native path was asked for and oneDNN has no native bf16.
#define PLAIT_SKIP_UNLESS_PATH(ctx, fallback)                                                   \
  do {                                                                                          \
    if (!(fallback) && (ctx).path() != Bf16GemmPath::kOneDnn) {                                 \
      GTEST_SKIP() << "oneDNN's ISA here is " << (ctx).isa()                                    \
                   << ", without native bf16: the oneDNN path is not taken on this CPU";        \
    }                                                                                           \
  } while (0)

}  // namespace plait::kernels::testing
