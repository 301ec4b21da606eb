// seq-zb: plait's sequence-level zero-bubble schedule. Seq1F1B's (micro-batch, segment) units
// and warm-up (p - r - 1 + k - 1 forwards on rank r), with the backward split into B and W as in
// ZB-H1: rank r defers the W's of its first r steady-state backwards to the drain. The idea of
// combining the two is pictured in the thunlp/Seq1F1B README (picture/seq1f1b_zerobubble.png);
// this order is plait's own. With F = B = W and equal-cost segments its bubble fraction is
// (p-1)/(3km+p-1) once m*k >= p, below both Seq1F1B's (p-1)/(km+p-1) and ZB-H1's
// (p-1)/(3m+p-1); peak activations stay Seq1F1B's (p+k-1)/k micro-batches.
#include "plait/schedule/generators.h"
#include "plait/schedule/sequence_one_f_one_b.h"

namespace plait::schedule {

ScheduleFamily seq1f1b_zb_family() {
  return {
      .name = "seq-zb",
      .title = "Seq1F1B + zero bubble (plait)",
      .source = "plait; Seq1F1B (arXiv 2406.03488) units with ZB-H1 (arXiv 2401.10241) B/W split",
      .sequence_level = true,
      .split_backward = true,
      .in_flight_limit = sequence_one_f_one_b_in_flight,
      .deferred_weights = zero_bubble_deferred_weights,
      .one_segment_twin = "zb-h1",
      .generate = zero_bubble_sequence_one_f_one_b,
  };
}

}  // namespace plait::schedule
