#pragma once
// Softmax cross-entropy over a vocabulary split across a tensor-parallel group (Megatron-LM's
// _VocabParallelCrossEntropy, Shoeybi et al. 2019 sec. 3): each rank holds the logits of its
// vocabulary rows [vocab_begin, vocab_begin + v_local) for every token, so no rank holds V logits.
// Three passes around the group's all-reduces (model/tensor_parallel.h):
//   1. cross_entropy_shard_max     row maximum over the rank's valid columns, and the target's
//                                  logit where the target is the rank's (0 elsewhere)
//      -> all-reduce max (the maxima), all-reduce sum (the target logits: one rank's is nonzero)
//   2. cross_entropy_shard_sum     sum of exp(x - max) over the rank's valid columns, in double
//      -> all-reduce sum
//   3. cross_entropy_shard_finish  loss_n = log(sum_n) + max_n - target_n and, in place,
//                                  dlogits = loss_scale * (exp(x - max) / sum - onehot(target))
// The arithmetic is cross_entropy.h's, term for term (exp_fast, chunk sums of 1024 in the logits'
// accumulator type added in double, one rounding of each bf16 gradient with the target's
// -loss_scale before it), so only the association of the normaliser's sum across ranks differs
// from the single process.
// Rows whose target is kNoTarget (cross_entropy.h) count nothing: loss 0, gradient row 0.
// Padding: the vocabulary is padded to a multiple of 128 t (spec::padded_vocab); a rank's columns
// at or beyond `v_valid` (global index >= V) are padding, excluded from the maximum and the sum,
// and their gradient is 0 (the "masked" padded logits).
#include <cstdint>

#include "plait/kernels/accumulator.h"

// T: float or bf16.

namespace plait::kernels {

// logits (N, v_local); targets (N) in [0, vocab) or kNoTarget (checked); max, target_logit: (N)
// out.
template <typename T>
void cross_entropy_shard_max(const T* logits, const std::int32_t* targets, int n, int v_local, int v_valid,
                             int vocab_begin, int vocab, float* max, float* target_logit);

// sum (N) out: sum over the valid columns of exp(x - max[n]) (max: the group's).
template <typename T>
void cross_entropy_shard_sum(const T* logits, int n, int v_local, int v_valid, const float* max, double* sum);

// losses (N) out; logits become dlogits in place (padding columns 0). max, sum, target_logit: the
// group's. Returns loss_scale * sum_n loss_n (every rank of the group returns the same value).
template <typename T>
double cross_entropy_shard_finish(T* logits, Acc<T>* losses, const std::int32_t* targets, int n, int v_local,
                                  int v_valid, int vocab_begin, const float* max, const double* sum,
                                  const float* target_logit, double loss_scale);

}  // namespace plait::kernels
