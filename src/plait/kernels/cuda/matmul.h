#pragma once
// Linear layers on the GPU, the CUDA twin of kernels/matmul.h (llm.c matmul_forward/backward):
// weights stored (OC, C) so that out = inp @ weight^T + bias, the backward split into B (input)
// and W (weight, bias) as zero-bubble schedules need it. The same calls in the same order as the
// CPU kernels (bias and residual pre-fill out, the GEMM accumulates with beta = 1), each GEMM a
// cuBLASLt call with fp32 accumulation (gemm.h). T is float (fp32 mode) or bf16; weight and
// bias gradients are fp32 in both (mixed precision keeps gradients in fp32).
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC) [+ residual (N,OC)]; bias and residual
// may be null. out must not alias inp or residual.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, const T* residual, int n,
                    int c, int oc, const Context& ctx);

// dinp (N,C) = dout (N,OC) @ weight (OC,C), or += when accumulate.
template <typename T>
void matmul_backward_input(T* dinp, const T* dout, const T* weight, int n, int c, int oc,
                           bool accumulate, const Context& ctx);

// dweight (OC,C) += dout (N,OC)^T @ inp (N,C); dbias (OC) += sum over rows of dout (dbias may be
// null). The bias sums are deterministic (device.cuh column_sums).
template <typename T>
void matmul_backward_weight(float* dweight, float* dbias, const T* dout, const T* inp, int n, int c,
                            int oc, const Context& ctx);

}  // namespace plait::kernels::cuda
