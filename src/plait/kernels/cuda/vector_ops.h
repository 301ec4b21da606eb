#pragma once
// Filling, adding and converting buffers on the GPU, the CUDA twins of kernels/vector_ops.h's
// fill, accumulate and convert: the norm gains' initial ones and the tied embedding's gradient
// copies summed (fp32: parameters and gradients are fp32 in both precisions), and the bf16
// compute copy of fp32 values in mixed precision (the master weights after an update, a load or
// a gather; a segment's fp32 dK/dV accumulator at its own B; model/layer_precision.h).
#include <cstddef>

#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// dst (N) = value.
void fill(float* dst, std::size_t n, float value, const Context& ctx);

// dst (N) += src (N), one fp32 addition per element (bitwise the CPU kernel's).
void accumulate(float* dst, const float* src, std::size_t n, const Context& ctx);

// dst (N) = src (N) rounded to bf16, to nearest even (__float2bfloat16): bitwise the CPU's
// bf16(src[i]) for every non-NaN value (infinities and signed zeros kept, beyond the largest
// finite bf16 to infinity); a NaN becomes CUDA's canonical quiet NaN 0x7FFF, where the CPU keeps
// the payload's top bits (both NaN).
void convert(bf16* dst, const float* src, std::size_t n, const Context& ctx);

// dst (N) = src (N) widened to fp32 (exact).
void convert(float* dst, const bf16* src, std::size_t n, const Context& ctx);

}  // namespace plait::kernels::cuda
