#pragma once
// The type a kernel of element type T accumulates and keeps its fp32-side results in: T itself
// for fp32 and the tests' fp64 reference; fp32 for bf16 (mixed precision: statistics, weight and
// bias gradients, dK/dV accumulators, losses and the log-sum-exp stay fp32;
// spec/precision_policy.h). The CUDA twins (kernels/cuda/) make the same choice with `float`.
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

}  // namespace plait::kernels
