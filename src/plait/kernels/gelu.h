#pragma once
// GELU, tanh form as in GPT-2 (Hendrycks & Gimpel 2016, section 2):
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3),
// evaluated through the exact identity 0.5 (1 + tanh u) = sigmoid(2u) = 1 / (1 + e^{-2u}),
// i.e. gelu(x) = x / (1 + e^{-2u}): one exponential and one division per element, no
// cancellation anywhere.
// T is float (the engine), double (the tests' reference) or bf16 (mixed precision: inputs
// widened exactly, arithmetic in fp32, each output rounded once to bf16).
#include <cstddef>

#include "plait/core/bf16.h"

namespace plait::kernels {

// out (N) = gelu(inp (N)).
template <typename T>
void gelu_forward(T* out, const T* inp, std::size_t n);

// dinp (N) = dout (N) * gelu'(inp (N)); dinp may alias dout. With s = sigmoid(2u):
//   gelu'(x) = s + 2 x s (1 - s) u',  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// (= 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u').
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n);

}  // namespace plait::kernels
