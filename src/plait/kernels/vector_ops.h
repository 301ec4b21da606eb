#pragma once
// Whole-buffer operations the engine needs besides the layers' kernels: zeroing (gradients, dK/dV
// accumulators), filling with a constant (norm gains), adding one buffer into another (the tied
// embedding's gradient copies), and converting between fp32 and bf16 (mixed precision: the bf16
// compute copy of fp32 values, fp32 views of bf16 tensors).
#include <cstddef>

#include "plait/core/bf16.h"
#include "plait/kernels/accumulator.h"

namespace plait::kernels {

// bytes of dst set to 0; large buffers in parallel chunks, so the pages are touched by several
// threads at once (a GPT-2 small gradient buffer is ~500 MB).
void zero_bytes(void* dst, std::size_t bytes);
// dst (n) = value.
void fill(float* dst, std::size_t n, float value);
// dst (n) += src (n).
void accumulate(float* dst, const float* src, std::size_t n);
// dst (n) = src (n) rounded to bf16, to nearest even (core/bf16.h: NaN stays NaN, infinities
// and signed zeros kept, beyond the largest finite bf16 to infinity); bitwise bf16(src[i]).
void convert(bf16* dst, const float* src, std::size_t n);
// dst (n) = src (n) widened to fp32 (exact).
void convert(float* dst, const bf16* src, std::size_t n);

// out (N,C) = sum (N,C) + bias (C) + residual (N,C), added in that order in fp32 and rounded once
// to T (bias, residual: either may be null): the end of a tensor-parallel row-parallel linear,
// whose partial products the group reduce-scattered in fp32 (model/tensor_parallel.h), with the
// bias and residual that matmul_forward would have added to its accumulator. T: float or bf16.
template <typename T>
void add_bias_residual(T* out, const float* sum, const T* bias, const T* residual, int n, int c);

}  // namespace plait::kernels
