// V-Half (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024, arXiv
// 2405.15362): the V building block with half 1F1B's lifespan, about 1/2 of its activation
// memory, (p+2)//2 micro-batches, at a bubble of about p/(2m) with F = B = W; the paper finds half
// of 1F1B's memory enough for a zero-bubble schedule under real costs when W + 2B >= 2F and
// W + 2F >= 2B (at 32k tokens W + 2F < 2B: tests/sim/simulation_test.cpp). Offsets of rank i (the
// authors' vshape V-Half pattern, sail-sg/zero-bubble-pipeline-parallelism): F chunk 0 at 2i,
// F chunk 1 at 3p-2-i, B chunk 1 at 3p+d+2i-1, B chunk 0 at 6p+d-2-i, with d = 3 when p is even
// (else two offsets would coincide mod 6) and 0 otherwise. The order is the repeated block
// (controllable_memory_v.h); for real unit costs, plait's list scheduler under the block's peak.
#include "plait/schedule/controllable_memory_v.h"
#include "plait/schedule/generators.h"

namespace plait::schedule {

namespace {

std::array<int, 4> v_half_offsets(int p, int i) {
  const int d = p % 2 == 0 ? 3 : 0;
  return {2 * i, 3 * p - 2 - i, 3 * p + d + 2 * i - 1, 6 * p + d - 2 - i};
}

int v_half_in_flight(const PipelineShape& shape, int rank) {
  return repeated_v_block_peak(shape, v_half_offsets, rank, false);
}

int v_half_deferred(const PipelineShape& shape, int rank) {
  return repeated_v_block_peak(shape, v_half_offsets, rank, true) - v_half_in_flight(shape, rank);
}

Schedule generate_v_half(const PipelineShape& shape) { return repeated_v_block(shape, v_half_offsets); }

Schedule generate_v_half_for_costs(const PipelineShape& shape, const UnitCosts& costs) {
  return repeated_v_block_for_costs(shape, v_half_offsets, costs);
}

}  // namespace

ScheduleFamily v_half_family() {
  return {
      .name = "v-half",
      .title = "V-Half (controllable memory, 1/2 of 1F1B's)",
      .source = "Qi et al., Pipeline Parallelism with Controllable Memory, arXiv 2405.15362",
      .sequence_level = true,
      .fixed_chunks = 2,
      .split_backward = true,
      .placement = StagePlacement::v_shape,
      .in_flight_limit = v_half_in_flight,
      .deferred_weights = v_half_deferred,
      .own_simulation_slots = true,
      .generate = generate_v_half,
      .generate_for_costs = generate_v_half_for_costs,
  };
}

}  // namespace plait::schedule
