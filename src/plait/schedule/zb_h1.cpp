// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, arXiv 2401.10241, sec. 3.1;
// code sail-sg/zero-bubble-pipeline-parallelism): 1F1B with the backward split into B (input
// gradient, on the critical path) and W (weight gradient, free to move). Warm-up is 1F1B's
// p - r - 1 forwards, so peak memory stays p micro-batches; rank r defers the W's of its first
// r steady-state backwards and runs them during the drain, where 1F1B leaves rank r idle.
// Bubble time (p-1)(F+B-W) instead of 1F1B's (p-1)(F+B+W); with F = B = W the bubble fraction is
// (p-1)/(3m+p-1) for m >= p.
#include "plait/schedule/generators.h"
#include "plait/schedule/sequence_one_f_one_b.h"

namespace plait::schedule {

int zero_bubble_w_lag(int rank, int /*ranks*/) { return rank; }

int zero_bubble_deferred_weights(const PipelineShape& shape, int rank) { return zero_bubble_w_lag(rank, shape.stages); }

Schedule zero_bubble_sequence_one_f_one_b(const PipelineShape& shape) {
  return sequence_one_f_one_b(shape, BackwardStyle{true, 0}, zero_bubble_w_lag);
}

ScheduleFamily zb_h1_family() {
  return {
      .name = "zb-h1",
      .title = "ZB-H1 (zero bubble, 1F1B memory)",
      .source = "Qi et al., Zero Bubble Pipeline Parallelism, arXiv 2401.10241",
      .split_backward = true,
      .in_flight_limit = sequence_one_f_one_b_in_flight,
      .deferred_weights = zero_bubble_deferred_weights,
      .generate = zero_bubble_sequence_one_f_one_b,
  };
}

}  // namespace plait::schedule
