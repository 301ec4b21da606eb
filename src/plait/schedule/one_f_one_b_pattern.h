#pragma once
// The 1F1B pattern on one rank (PipeDream-Flush, Narayanan et al. arXiv 2104.04473 sec. 2.2):
// `warmup` forwards, then alternately one forward and one backward, then the remaining
// backwards. 1F1B, Seq1F1B, interleaved 1F1B, ZB-H1 and seq-zb differ only in the unit orders
// and the warm-up count they feed it.
#include <span>
#include <vector>

#include "plait/schedule/action.h"

namespace plait::schedule {

// How backwards are emitted.
struct BackwardStyle {
  bool split = false;  // B now and W later (zero-bubble); otherwise fused BW
  // With split: during the steady phase the W of the oldest pending B follows the i-th backward
  // only once i >= w_lag, so w_lag W's stay deferred; the cool-down runs B then W; the deferred
  // W's run last, filling the drain bubble (ZB-H1, Qi et al. arXiv 2401.10241 sec. 3.1).
  int w_lag = 0;
};

// forwards: F actions in order; backwards: the matching units in backward order (their kind is
// ignored and replaced by BW or B/W per `style`). warmup is clamped to forwards.size().
std::vector<Action> one_f_one_b_pattern(std::span<const Action> forwards,
                                        std::span<const Action> backwards, int warmup,
                                        const BackwardStyle& style);

// Units of one chunk in Seq1F1B order (Sun et al., arXiv 2406.03488; thunlp/Seq1F1B): forwards
// micro-batch by micro-batch with segments ascending; backwards micro-batches FIFO with segments
// descending (a later segment's backward leaves the dK/dV an earlier one needs). k = 1 gives
// plain micro-batch order.
std::vector<Action> sequence_forward_order(int microbatches, int segments, int chunk);
std::vector<Action> sequence_backward_order(int microbatches, int segments, int chunk);

}  // namespace plait::schedule
