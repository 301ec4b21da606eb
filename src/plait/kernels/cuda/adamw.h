#pragma once
// Fused AdamW on the GPU, the CUDA twin of kernels/adamw.h (Loshchilov & Hutter 2019, Alg. 2;
// PyTorch torch.optim.AdamW), one pass over fp32 master weights, fp32 gradients and both fp32
// moments, writing the bf16 copy the forward and backward read in mixed precision:
//   p -= lr * weight_decay * p;  g = grad_scale * grad;  m = beta1 m + (1 - beta1) g;
//   v = beta2 v + (1 - beta2) g^2;  p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) +
//   eps).
#include <cstddef>

#include "plait/kernels/adamw.h"
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// params, grads, m, v: (N) fp32; params_bf16 (N), the bf16 copy of the updated params, or null
// (fp32 mode).
void adamw_update(float* params, bf16* params_bf16, const float* grads, float* m, float* v,
                  std::size_t n, const AdamWHyper& hyper, const Context& ctx);

}  // namespace plait::kernels::cuda
