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

// Tensor parallelism's vocabulary-parallel embedding (Shoeybi et al. 2019, sec. 3; the rows of
// the table split by vocabulary, spec/tensor_parallel_plan.h): this rank's part of the lookup, in
// fp32, which the TP group's reduce-scatter sums into each rank's sequence slice. wte_rows: the
// rank's rows [vocab_begin, vocab_begin + rows) of the (padded) table. out[b,t] =
// wte_rows[tokens[b,t] - vocab_begin] when the token falls in that range, else 0, [+ wpe[pos0 + t]]
// (wpe: one rank of the group passes it, the others null, so the sum adds it once). tokens (B,s)
// are checked against [0, vocab). Each element is one table value plus at most one position
// value, so the group's fp32 sum rounded once equals embedding_forward's value bit for bit.
template <typename T>
void embedding_forward_shard(float* out, const std::int32_t* tokens, const T* wte_rows, const T* wpe, int batch,
                             int s, int c, int pos0, int vocab, int vocab_begin, int rows);

// The rank's rows of the table gradient and (dwpe not null) the whole position-table gradient
// from the WHOLE output gradient dout (B,s,C) (gathered over the group): dwte_rows[tok -
// vocab_begin] += dout[b,t] for the tokens in the rank's range, in embedding_backward's order,
// so each row is bitwise what the single process adds.
template <typename T>
void embedding_backward_shard(Acc<T>* dwte_rows, Acc<T>* dwpe, const T* dout, const std::int32_t* tokens, int batch,
                              int s, int c, int pos0, int vocab_begin, int rows);

}  // namespace plait::kernels
