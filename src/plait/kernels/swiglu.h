#pragma once
// SwiGLU feed-forward activation (Shazeer 2020, "GLU Variants Improve Transformer", eq. 6; as
// Hugging Face LlamaMLP: down_proj(silu(gate_proj(x)) * up_proj(x))):
//   out = silu(g) * u,  silu(g) = g * sigmoid(g) = g / (1 + e^{-g}),
// where the gate g and the up projection u come out of ONE matmul as a (N, 2F) buffer: gate in
// columns [0, F), up in [F, 2F).
// T is float (the engine), double (the tests' reference) or bf16 (mixed precision: inputs
// widened exactly, arithmetic in fp32, each output rounded once to bf16).
#include "plait/core/bf16.h"

namespace plait::kernels {

// out (N,F) = silu(gate_up[:, :F]) * gate_up[:, F:]; gate_up (N,2F).
template <typename T>
void swiglu_forward(T* out, const T* gate_up, int n, int f);

// dgate_up (N,2F) from dout (N,F) and gate_up (N,2F), with s = sigmoid(g):
//   dg = dout * u * silu'(g),  silu'(g) = s (1 + g (1 - s)),   du = dout * silu(g).
template <typename T>
void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, int n, int f);

}  // namespace plait::kernels
