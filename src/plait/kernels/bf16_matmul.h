#pragma once
// The three GEMMs of a linear layer in bf16 mixed precision, weights stored (OC, C) as in
// matmul.h (llm.c's layout; F, B and W as zero-bubble pipelines split them): bf16 operands, fp32
// accumulation, one rounding to bf16 at the end of a bf16 result; weight and bias gradients fp32
// (spec/precision_policy.h). Computed by oneDNN's matmul where its ISA multiplies bf16 natively,
// else by sgemm on widened operands (onednn_context.h, "Path"; context.path() says which).
// Zero rows or columns are a no-op; a zero reduction length with a non-empty result is an Error.
#include "plait/core/bf16.h"
#include "plait/kernels/onednn_context.h"

namespace plait::kernels {

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC) [+ residual (N,OC)]: bias and residual
// (either may be null) are added to the fp32 accumulator before the one rounding (oneDNN: the
// bias argument and a binary-add post-op). out must not alias inp, weight or residual.
void matmul_forward_bf16(OneDnnContext& context, bf16* out, const bf16* inp, const bf16* weight,
                         const bf16* bias, const bf16* residual, int n, int c, int oc);

// dinp (N,C) = dout (N,OC) @ weight (OC,C), or += when accumulate: the old bf16 value is added to
// the fp32 accumulator before the one rounding (oneDNN's sum post-op), so an accumulated input
// gradient is rounded once per call, not twice.
void matmul_backward_input_bf16(OneDnnContext& context, bf16* dinp, const bf16* dout,
                                const bf16* weight, int n, int c, int oc, bool accumulate);

// dweight (OC,C) fp32 += dout (N,OC)^T @ inp (N,C) (sum post-op on an fp32 dst: no rounding to
// bf16 anywhere); dbias (OC) fp32 += column sums of dout (may be null), summed in fp32 row by
// row in order (the same bits for any thread count).
void matmul_backward_weight_bf16(OneDnnContext& context, float* dweight, float* dbias,
                                 const bf16* dout, const bf16* inp, int n, int c, int oc);

// Tensor parallelism's partial products (model/tensor_parallel.h), fp32 results that the TP group
// sums before the one rounding to bf16, so the sum over ranks adds fp32 values as the single
// process's accumulator does:
// out (N,OC) fp32 = inp (N,C) @ weight (OC,C)^T (a row-parallel linear's partial output);
void matmul_forward_bf16_fp32(OneDnnContext& context, float* out, const bf16* inp, const bf16* weight,
                              int n, int c, int oc);
// dinp (N,C) fp32 = [or +=] dout (N,OC) @ weight (OC,C) (a column-parallel linear's partial input
// gradient).
void matmul_backward_input_bf16_fp32(OneDnnContext& context, float* dinp, const bf16* dout,
                                     const bf16* weight, int n, int c, int oc, bool accumulate);

}  // namespace plait::kernels
