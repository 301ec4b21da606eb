#pragma once
// The type a kernel of element type T accumulates and keeps its fp32-side results in: T itself
// for fp32 and the tests' fp64 reference; fp32 for bf16 (mixed precision: statistics, weight and
// bias gradients, dK/dV accumulators, losses and the log-sum-exp stay fp32;
// spec/precision_policy.h). The CUDA twins (kernels/cuda/) make the same choice with `float`.
#include <type_traits>

#include "plait/core/bf16.h"

namespace plait::kernels {

template <typename T>
struct AccumulatorOf {
  using type = T;
};
template <>
struct AccumulatorOf<bf16> {
  using type = float;
};
template <typename T>
using Acc = typename AccumulatorOf<T>::type;

// x, computed in Acc<T>, stored as T: the one rounding of a kernel's output (bf16: to nearest
// even, core/bf16.h; fp32/fp64: unchanged). Inputs go the other way through plait::to_float,
// which is exact. The CUDA twins' device.cuh has the same pair (to_float, from_float<T>).
template <typename T>
inline T from_float(Acc<T> x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16(x);
  } else {
    return x;
  }
}

}  // namespace plait::kernels
