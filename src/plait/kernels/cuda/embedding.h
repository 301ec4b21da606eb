#pragma once
// Input embedding on the GPU, the CUDA twin of kernels/embedding.h (llm.c encoder_forward/
// backward): token embedding plus the learned absolute position embedding (GPT-2), or the token
// embedding alone when wpe / dwpe is null (LLaMA). pos0 is the absolute position of the first
// column, so a Seq1F1B segment embeds exactly as inside the whole sequence.
//
// Tokens live on the device, where a kernel cannot throw: the CPU kernel's check of the
// vocabulary range belongs to the caller (the data loader, before the upload). A token outside
// [0, vocab) is never used as an index: its output row is NaN (so the loss shows it) and the
// backward skips it.
#include <cstdint>

#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// out (B,s,C): out[b,t] = wte[tokens[b,t]] [+ wpe[pos0 + t]]; tokens (B,s), wte (vocab, C),
// wpe (>= pos0 + s, C) or null.
template <typename T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int batch,
                       int s, int c, int pos0, int vocab, const Context& ctx);

// dwte[tokens[b,t]] += dout[b,t]; dwpe[pos0 + t] += sum_b dout[b,t] unless dwpe is null; fp32
// gradients, dout (B,s,C). Deterministic and bitwise equal to the CPU kernel in fp32: every
// gradient row is owned by one warp that adds its rows in the CPU's order (b, then t). vocab
// (which the CPU kernel does not need) partitions the token ids among the blocks.
template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const std::int32_t* tokens,
                        int batch, int s, int c, int pos0, int vocab, const Context& ctx);

}  // namespace plait::kernels::cuda
