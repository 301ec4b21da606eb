#pragma once
// Layer normalisation on the GPU, the CUDA twin of kernels/layernorm.h (Ba, Kiros, Hinton 2016;
// llm.c layernorm_forward/backward): same formulas, same B/W split. T is float or bf16; the row
// statistics mean and rstd are fp32, the weight and bias gradients fp32.
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// out (N,C), mean (N), rstd (N) from inp (N,C), weight (C), bias (C):
//   xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps),  out = xhat * weight + bias.
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int n, int c, double eps, const Context& ctx);

// dinp (N,C) = [dresidual (N,C) +] rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)),
// dnorm = dout * weight. dresidual may be null; dinp may alias dresidual.
template <typename T>
void layernorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                              const T* weight, const float* mean, const float* rstd, int n, int c,
                              const Context& ctx);

// dweight (C) += sum_n dout * xhat, dbias (C) += sum_n dout (deterministic column sums).
template <typename T>
void layernorm_backward_weight(float* dweight, float* dbias, const T* dout, const T* inp,
                               const float* mean, const float* rstd, int n, int c,
                               const Context& ctx);

}  // namespace plait::kernels::cuda
