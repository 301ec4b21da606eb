#pragma once
// RMS normalisation on the GPU, the CUDA twin of kernels/rmsnorm.h (Zhang & Sennrich 2019, eq. 4;
// Hugging Face LlamaRMSNorm): out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps), backward
// split into B and W as for layernorm.h. T is float or bf16; rstd and the weight gradient fp32.
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// out (N,C), rstd (N) from inp (N,C), weight (C).
template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int n, int c, double eps,
                     const Context& ctx);

// dinp (N,C) = [dresidual (N,C) +] rstd * (dnorm - xhat * mean(dnorm * xhat)), dnorm = dout *
// weight, xhat = x * rstd. dresidual may be null; dinp may alias dresidual.
template <typename T>
void rmsnorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                            const T* weight, const float* rstd, int n, int c, const Context& ctx);

// dweight (C) += sum_n dout * xhat (deterministic column sums).
template <typename T>
void rmsnorm_backward_weight(float* dweight, const T* dout, const T* inp, const float* rstd, int n,
                             int c, const Context& ctx);

}  // namespace plait::kernels::cuda
