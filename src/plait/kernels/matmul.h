#pragma once
// Linear layers as in llm.c (karpathy/llm.c, train_gpt2.c, matmul_forward/backward), weights
// stored (OC, C) so that out = inp @ weight^T + bias. The backward is split the way zero-bubble
// pipelines need it (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2):
// B = gradient w.r.t. the input, W = gradient w.r.t. weight and bias.
// T is float (the engine) or double (the tests' references).
#include "plait/kernels/accumulator.h"

namespace plait::kernels {

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC) [+ residual (N,OC)]; bias and residual
// may be null. out must not alias inp or residual.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, const T* residual, int n,
                    int c, int oc);

// dinp (N,C) = dout (N,OC) @ weight (OC,C), or += when accumulate.
template <typename T>
void matmul_backward_input(T* dinp, const T* dout, const T* weight, int n, int c, int oc,
                           bool accumulate);

// dweight (OC,C) += dout (N,OC)^T @ inp (N,C); dbias (OC) += sum over rows of dout (dbias may be
// null).
template <typename T>
void matmul_backward_weight(Acc<T>* dweight, Acc<T>* dbias, const T* dout, const T* inp, int n, int c,
                            int oc);

}  // namespace plait::kernels
