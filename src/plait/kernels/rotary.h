#pragma once
// Rotary position embeddings (Su et al. 2021, RoFormer, eq. 34) in Hugging Face's convention
// (transformers' rotate_half, as LlamaRotaryEmbedding / apply_rotary_pos_emb), so that weights
// mean the same thing there. For head dimension d (even) and frequency i in [0, d/2):
//   inv_freq_i = theta^(-2i/d),  angle = p * inv_freq_i at absolute position p,
//   x'[i]       = x[i] cos - x[i + d/2] sin,
//   x'[i + d/2] = x[i + d/2] cos + x[i] sin,
// i.e. x' = x cos + rotate_half(x) sin with rotate_half(x) = cat(-x[d/2:], x[:d/2]): element i is
// paired with i + d/2 (not with its neighbour, as in the paper's and Meta's complex form).
// Angles are computed in double, cos and sin once per (position, frequency) per call.
// T is float (the engine), double (the tests' reference) or bf16 (mixed precision: cos and sin
// in fp32, each pair widened exactly, rotated in fp32 and rounded once to bf16).
#include "plait/core/bf16.h"

namespace plait::kernels {

// In place on x (B, s, row_stride): the first heads * head_dim columns of each row are heads
// of head_dim, token t of the segment is at absolute position pos0 + t (a Seq1F1B segment
// starting at pos0 rotates exactly as inside the whole sequence). Throws plait::Error for an odd
// or non-positive head_dim, heads * head_dim > row_stride, pos0 < 0 or theta <= 0.
template <typename T>
void rotary_forward(T* x, int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                    double theta);

// In place on dx (same layout and arguments): the gradient w.r.t. the unrotated input given the
// gradient w.r.t. the rotated one, dx <- R^T dx, i.e. the rotation by -angle (R is orthogonal).
template <typename T>
void rotary_backward(T* dx, int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                     double theta);

}  // namespace plait::kernels
