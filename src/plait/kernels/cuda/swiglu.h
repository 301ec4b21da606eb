#pragma once
// SwiGLU on the GPU, the CUDA twin of kernels/swiglu.h (Shazeer 2020, eq. 6; Hugging Face
// LlamaMLP): out = silu(g) * u, silu(g) = g / (1 + e^{-g}), the gate g and the up projection u in
// ONE (N, 2F) buffer: gate in columns [0, F), up in [F, 2F).
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// out (N,F) = silu(gate_up[:, :F]) * gate_up[:, F:]; gate_up (N,2F).
template <typename T>
void swiglu_forward(T* out, const T* gate_up, int n, int f, const Context& ctx);

// dgate_up (N,2F) from dout (N,F) and gate_up (N,2F), s = sigmoid(g):
//   dg = dout * u * s (1 + g (1 - s)),   du = dout * silu(g).
template <typename T>
void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, int n, int f,
                     const Context& ctx);

}  // namespace plait::kernels::cuda
