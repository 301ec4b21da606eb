#pragma once
// Softmax cross-entropy on the GPU, the CUDA twin of kernels/cross_entropy.h, forward and
// backward fused, one block per row, the logits overwritten with their gradient:
//   loss_n = logsumexp(logits_n) - logits_n[target_n]
//   dlogits_n = loss_scale * (softmax(logits_n) - onehot(target_n)).
// The launch is asynchronous, so the per-row losses are the result (the CPU kernel's returned
// total is their sum times loss_scale, for the caller to reduce). A target outside [0, V) makes
// its row's loss and gradient NaN (a kernel cannot throw; the caller checks targets on the host),
// except kNoTarget (-1, a packed sequence's padding: kernels/cross_entropy.h), whose row has loss
// 0 and gradient 0.
#include <cstdint>

#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

inline constexpr std::int32_t kNoTarget = -1;  // kernels/cross_entropy.h's

// logits (N,V) in, dlogits (N,V) out (in place); targets (N) in [0, V) or kNoTarget; losses (N)
// out, fp32.
template <typename T>
void cross_entropy_forward_backward(T* logits, float* losses, const std::int32_t* targets, int n,
                                    int v, double loss_scale, const Context& ctx);

}  // namespace plait::kernels::cuda
