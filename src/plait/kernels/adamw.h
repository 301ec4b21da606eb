#pragma once
// AdamW update, one pass over parameters, gradients and both moments (Loshchilov & Hutter,
// "Decoupled Weight Decay Regularization", ICLR 2019, Algorithm 2; the form of PyTorch's
// torch.optim.AdamW):
//   p -= lr * weight_decay * p
//   g  = grad_scale * grad                      (grad_scale: gradient clipping, folded in)
//   m  = beta1 m + (1 - beta1) g
//   v  = beta2 v + (1 - beta2) g^2
//   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// Mixed precision keeps params (the master weights), grads, m and v in fp32 and can write the
// bf16 compute copy of the updated params in the same pass (as kernels/cuda/adamw.h).
#include <cstddef>

#include "plait/core/bf16.h"

namespace plait::kernels {

struct AdamWHyper {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  int step;          // t, counted from 1
  float grad_scale;  // multiplies every gradient (1 = no clipping)
};

// params, grads, m, v: (N).
void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                  const AdamWHyper& hyper);

// The same update (params, m, v bitwise those of the call above), and params_bf16 (N) = bf16(the
// updated params), rounded to nearest even; params_bf16 null: exactly the call above.
void adamw_update(float* params, bf16* params_bf16, const float* grads, float* m, float* v,
                  std::size_t n, const AdamWHyper& hyper);

}  // namespace plait::kernels
