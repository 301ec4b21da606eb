#pragma once
// GPT-2 input embedding (llm.c encoder_forward/backward): token embedding plus learned absolute
// position embedding. pos0 is the absolute position of the first column, so a sequence segment
// starting at position pos0 embeds exactly as it would inside the whole sequence. LLaMA has no
// learned positions (rotary.h rotates q and k instead): wpe = nullptr / dwpe = nullptr means the
// token embedding only.
// T is float, double or bf16 (mixed precision: out = bf16(fp32(wte) + fp32(wpe)), one rounding;
// the gradients dwte, dwpe are Acc<T>, fp32, accumulated from the widened bf16 dout).
#include <cstdint>
#include "plait/kernels/accumulator.h"

namespace plait::kernels {

// out (B,s,C): out[b,t] = wte[tokens[b,t]] [+ wpe[pos0 + t]]; tokens (B,s) in [0, vocab),
// wte (vocab, C), wpe (>= pos0 + s, C) or null.
template <typename T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int batch,
                       int s, int c, int pos0, int vocab);

// dwte[tokens[b,t]] += dout[b,t]; dwpe[pos0 + t] += sum_b dout[b,t] unless dwpe is null.
// dout (B,s,C).
template <typename T>
void embedding_backward(Acc<T>* dwte, Acc<T>* dwpe, const T* dout, const std::int32_t* tokens, int batch,
                        int s, int c, int pos0);

}  // namespace plait::kernels
