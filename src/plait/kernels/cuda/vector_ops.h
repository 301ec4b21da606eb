#pragma once
// Filling and adding buffers on the GPU, the CUDA twins of kernels/vector_ops.h's fill and
// accumulate (the norm gains' initial ones, the tied embedding's gradient copies summed). fp32
// only: they act on parameters and gradients, which are fp32 in both precisions.
#include <cstddef>

#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// dst (N) = value.
void fill(float* dst, std::size_t n, float value, const Context& ctx);

// dst (N) += src (N), one fp32 addition per element (bitwise the CPU kernel's).
void accumulate(float* dst, const float* src, std::size_t n, const Context& ctx);

}  // namespace plait::kernels::cuda
