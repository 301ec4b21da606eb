#pragma once
// Layer normalisation (Ba, Kiros, Hinton 2016) over the last dimension, eps = 1e-5 by default as
// in GPT-2 (a model's norm_eps otherwise):
//   xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps),  out = xhat * weight + bias.
// Backward split into B (input) and W (weight, bias), as for the linear layers.
// T is float (the engine), double (the tests' reference) or bf16 (mixed precision: inputs
// widened exactly, all arithmetic in fp32, each output rounded once to bf16; mean, rstd and the
// weight and bias gradients are Acc<T>, fp32, as HF/Megatron compute norms in fp32).
#include "plait/kernels/accumulator.h"

namespace plait::kernels {

inline constexpr double kLayerNormEps = 1e-5;

// out (N,C), mean (N), rstd (N) from inp (N,C), weight (C), bias (C).
template <typename T>
void layernorm_forward(T* out, Acc<T>* mean, Acc<T>* rstd, const T* inp, const T* weight, const T* bias,
                       int n, int c, double eps = kLayerNormEps);

// dinp (N,C) = [dresidual (N,C) +] dL/dinp given dout (N,C), with
//   dinp = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)),  dnorm = dout * weight.
// dresidual may be null; dinp may alias dresidual.
template <typename T>
void layernorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                              const T* weight, const Acc<T>* mean, const Acc<T>* rstd, int n,
                              int c);

// dweight (C) += sum_n dout * xhat, dbias (C) += sum_n dout.
template <typename T>
void layernorm_backward_weight(Acc<T>* dweight, Acc<T>* dbias, const T* dout, const T* inp,
                               const Acc<T>* mean, const Acc<T>* rstd, int n, int c);

}  // namespace plait::kernels
