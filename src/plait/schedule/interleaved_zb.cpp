// Interleaved zero bubble (Qi et al., "Zero Bubble Pipeline Parallelism", arXiv 2401.10241, its
// ZB-H1 idea on Megatron's interleaved placement; torch.distributed.pipelining's
// ScheduleInterleavedZeroBubble): interleaved 1F1B's order and warm-up (grouped_interleaving.h),
// so its peak activations before B stay interleaved 1F1B's, with the backward split into B
// (input gradient) and W (weight gradient) and rank r deferring the W's of its first r
// steady-state backwards to the drain, where interleaved 1F1B leaves it idle (ZB-H1's deferral;
// deferring 2r or p-1 instead gave longer or equal steps on p 2, 4, 8 x m p, 2p, 4p with v = 2, and
// p-1 more memory). With F = B = W the
// bubble is (p-1)/(3vkm + p - 1) of the step (tests/sim/textbook_formulas_test.cpp), against
// interleaved 1F1B's (p-1)/(vkm + p - 1).
// Sequence-level form: the same over (micro-batch, segment) units (Seq1F1B-I's order).
#include "plait/schedule/generators.h"
#include "plait/schedule/grouped_interleaving.h"
#include "plait/schedule/sequence_one_f_one_b.h"

namespace plait::schedule {

namespace {

Schedule generate_interleaved_zb(const PipelineShape& shape) {
  return grouped_interleaving(shape, BackwardStyle{true, 0}, zero_bubble_deferred_weights);
}

}  // namespace

ScheduleFamily interleaved_zb_family() {
  return {
      .name = "interleaved-zb",
      .title = "Interleaved zero bubble",
      .source = "Qi et al., arXiv 2401.10241 (ZB-H1) on Megatron's interleaving (arXiv 2104.04473)",
      .sequence_level = true,
      .fixed_chunks = 0,
      .split_backward = true,
      .placement = StagePlacement::interleaved,
      .in_flight_limit = grouped_interleaving_in_flight,
      .deferred_weights = zero_bubble_deferred_weights,
      .own_simulation_slots = true,
      .generate = generate_interleaved_zb,
  };
}

}  // namespace plait::schedule
