// Seq1F1B (Sun et al., "Seq1F1B: Efficient Sequence-Level Pipeline Parallelism for Large
// Language Model Training", NAACL 2025, arXiv 2406.03488; code thunlp/Seq1F1B,
// megatron/core/pipeline_parallel/schedules.py): 1F1B over (micro-batch, segment) units.
// Forwards run segment 0..k-1 of each micro-batch; backwards run micro-batches FIFO and segments
// k-1..0; rank r warms up with min(p - r - 1 + (k - 1), m*k) forward units (the k - 1 extra
// forwards reach the last segment, whose backward comes first).
// Bubble fraction (p-1)/(k*m+p-1); peak activations (p+k-1)/k micro-batches plus K/V prefixes.
// k = 1 is exactly 1F1B.
#include "plait/schedule/generators.h"
#include "plait/schedule/layout.h"
#include "plait/schedule/one_f_one_b_pattern.h"
#include "plait/schedule/sequence_one_f_one_b.h"

namespace plait::schedule {

Schedule sequence_one_f_one_b(const PipelineShape& shape, const BackwardStyle& style,
                              int (*w_lag_of_rank)(int rank, int ranks)) {
  const int p = shape.stages, m = shape.microbatches, k = shape.segments;
  Schedule schedule = empty_schedule(interleaved_layout(p, 1, m, k));
  const std::vector<Action> forwards = sequence_forward_order(m, k, 0);
  const std::vector<Action> backwards = sequence_backward_order(m, k, 0);
  for (int r = 0; r < p; ++r) {
    BackwardStyle rank_style = style;
    if (w_lag_of_rank) rank_style.w_lag = w_lag_of_rank(r, p);
    const int warmup = sequence_one_f_one_b_in_flight(shape, r) - 1;
    schedule.ranks[r] = one_f_one_b_pattern(forwards, backwards, warmup, rank_style);
  }
  return schedule;
}

int sequence_one_f_one_b_in_flight(const PipelineShape& shape, int rank) {
  return shape.stages - rank - 1 + (shape.segments - 1) + 1;
}

Schedule fused_sequence_one_f_one_b(const PipelineShape& shape) {
  return sequence_one_f_one_b(shape, BackwardStyle{}, nullptr);
}

ScheduleFamily seq1f1b_family() {
  return {
      .name = "seq1f1b",
      .title = "Seq1F1B",
      .source = "Sun et al., Seq1F1B, arXiv 2406.03488; thunlp/Seq1F1B",
      .sequence_level = true,
      .in_flight_limit = sequence_one_f_one_b_in_flight,
      .one_segment_twin = "1f1b",
      .generate = fused_sequence_one_f_one_b,
  };
}

}  // namespace plait::schedule
