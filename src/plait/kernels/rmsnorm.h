#pragma once
// RMS normalisation (Zhang & Sennrich 2019, eq. 4; as Hugging Face LlamaRMSNorm) over the last
// dimension: no mean subtraction, no bias,
//   out = x * rstd * weight,  rstd = 1 / sqrt(mean(x^2) + eps),
// eps a parameter (LLaMA uses 1e-5 or 1e-6). Backward split into B (input) and W (weight), as
// for layernorm.h, whose signatures these mirror.
// T is float (the engine), double (the tests' reference) or bf16 (mixed precision: inputs
// widened exactly, all arithmetic in fp32, each output rounded once to bf16; rstd and the weight
// gradient are Acc<T>, fp32, as HF/Megatron compute norms in fp32).
#include "plait/kernels/accumulator.h"

namespace plait::kernels {

// out (N,C), rstd (N) from inp (N,C), weight (C).
template <typename T>
void rmsnorm_forward(T* out, Acc<T>* rstd, const T* inp, const T* weight, int n, int c, double eps);

// dinp (N,C) = [dresidual (N,C) +] dL/dinp given dout (N,C), with
//   dinp = rstd * (dnorm - xhat * mean(dnorm * xhat)),  dnorm = dout * weight,  xhat = x * rstd.
// dresidual may be null; dinp may alias dresidual.
template <typename T>
void rmsnorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                            const T* weight, const Acc<T>* rstd, int n, int c);

// dweight (C) += sum_n dout * xhat.
template <typename T>
void rmsnorm_backward_weight(Acc<T>* dweight, const T* dout, const T* inp, const Acc<T>* rstd,
                             int n, int c);

}  // namespace plait::kernels
