#pragma once
// GELU on the GPU, the CUDA twin of kernels/gelu.h: the tanh form of GPT-2 (Hendrycks & Gimpel
// 2016), evaluated as gelu(x) = x / (1 + e^{-2u}), u = sqrt(2/pi) (x + 0.044715 x^3), the exact
// identity 0.5 (1 + tanh u) = sigmoid(2u) the CPU kernel uses (one exp, no cancellation).
#include <cstddef>

#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// out (N) = gelu(inp (N)).
template <typename T>
void gelu_forward(T* out, const T* inp, std::size_t n, const Context& ctx);

// dinp (N) = dout (N) * gelu'(inp (N)), gelu'(x) = s + 2 x s (1 - s) u', s = sigmoid(2u),
// u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2). dinp may alias dout.
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n, const Context& ctx);

}  // namespace plait::kernels::cuda
