#pragma once
// Rotary position embeddings on the GPU, the CUDA twin of kernels/rotary.h (Su et al. 2021,
// RoFormer; Hugging Face's rotate-half pairing): for head dimension d and frequency i < d/2,
// angle = p * theta^(-2i/d) at absolute position p = pos0 + t,
//   x'[i] = x[i] cos - x[i + d/2] sin,   x'[i + d/2] = x[i + d/2] cos + x[i] sin.
// Angles, cos and sin in double, once per (position, frequency), as the CPU kernel.
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// In place on x (B, s, row_stride): the first heads * head_dim columns of each row are heads of
// head_dim; token t is at absolute position pos0 + t. Throws plait::Error for an odd or
// non-positive head_dim, heads * head_dim > row_stride, pos0 < 0 or theta <= 0.
template <typename T>
void rotary_forward(T* x, int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                    double theta, const Context& ctx);

// In place on dx: the rotation by -angle (R^T; R is orthogonal).
template <typename T>
void rotary_backward(T* dx, int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                     double theta, const Context& ctx);

}  // namespace plait::kernels::cuda
