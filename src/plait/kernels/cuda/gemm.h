#pragma once
// Row-major GEMM through cuBLASLt, the CUDA twin of kernels/blas.h (same arguments, same
// meaning): C (m,n) = alpha * op(A) (m,k) @ op(B) (k,n) + beta * C, enqueued on ctx's stream.
// Accumulation is fp32 in every mode (CUBLAS_COMPUTE_32F, never TF32):
//   gemm<float, float>  fp32 inputs and output: the exactness mode the GPU tests compare with the
//                       CPU kernels at 1e-5;
//   gemm<bf16, bf16>    bf16 inputs and output (activations in mixed precision);
//   gemm<bf16, float>   bf16 inputs, fp32 output (weight gradients accumulated into fp32).
// When beta is 0, C is not read (it may hold anything, NaN included).
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

template <typename TIn, typename TOut>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const TIn* a, int lda,
          const TIn* b, int ldb, float beta, TOut* c, int ldc, const Context& ctx);

}  // namespace plait::kernels::cuda
