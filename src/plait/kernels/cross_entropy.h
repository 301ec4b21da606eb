#pragma once
// Softmax cross-entropy over the vocabulary, forward and backward fused in one call per row
// (the logits are read once for the row maximum and once for the exponentials, then overwritten
// with their gradient while the row is still in cache):
//   loss_n = logsumexp(logits_n) - logits_n[target_n]
//   dlogits_n = loss_scale * (softmax(logits_n) - onehot(target_n))
// which is the gradient of loss_scale * sum_n loss_n.
// T is float, double or bf16 (mixed precision: bf16 logits widened exactly, the maximum,
// exponentials and normaliser in fp32 (the normaliser's chunk sums added in double as in fp32),
// each gradient rounded once to bf16, the target's -loss_scale included before that rounding;
// losses Acc<T>, fp32).
// A row whose target is kNoTarget has nothing to predict (the padding of a sequence packed from
// documents, data::kPaddingTarget): its loss is 0 and its gradient row 0, so it takes no part in
// the loss or the gradients (PyTorch's ignore_index; the caller's loss_scale is 1 / the targets
// that count).
#include <cstdint>
#include "plait/kernels/accumulator.h"

namespace plait::kernels {

inline constexpr std::int32_t kNoTarget = -1;

// logits (N,V) in, dlogits (N,V) out (in place); targets (N) in [0, V) or kNoTarget; losses (N)
// out.
// Returns sum_n loss_n * loss_scale, accumulated in double.
template <typename T>
double cross_entropy_forward_backward(T* logits, Acc<T>* losses, const std::int32_t* targets, int n,
                                      int v, double loss_scale);

}  // namespace plait::kernels
