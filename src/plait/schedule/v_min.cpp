// V-Min (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024, arXiv
// 2405.15362): the V building block with the shortest lifespan, about 1/3 of 1F1B's activation
// memory, (p+4)//3 micro-batches, at a bubble of about 2p/(3m) with F = B = W. Offsets of rank i
// (the authors' vshape V-Min pattern, sail-sg/zero-bubble-pipeline-parallelism): F chunk 0 at i,
// F chunk 1 at 2p-1-i, B chunk 1 at 2p+d+i, B chunk 0 at 4p+d-1-i, with d = 2 when 3 divides p
// (else two offsets would coincide mod 6) and 0 otherwise. The order is the repeated block
// (controllable_memory_v.h); for real unit costs, plait's list scheduler under the block's peak.
#include "plait/schedule/controllable_memory_v.h"
#include "plait/schedule/generators.h"

namespace plait::schedule {

namespace {

std::array<int, 4> v_min_offsets(int p, int i) {
  const int d = p % 3 == 0 ? 2 : 0;
  return {i, 2 * p - 1 - i, 2 * p + d + i, 4 * p + d - 1 - i};
}

int v_min_in_flight(const PipelineShape& shape, int rank) {
  return repeated_v_block_peak(shape, v_min_offsets, rank, false);
}

int v_min_deferred(const PipelineShape& shape, int rank) {
  return repeated_v_block_peak(shape, v_min_offsets, rank, true) - v_min_in_flight(shape, rank);
}

Schedule generate_v_min(const PipelineShape& shape) { return repeated_v_block(shape, v_min_offsets); }

Schedule generate_v_min_for_costs(const PipelineShape& shape, const UnitCosts& costs) {
  return repeated_v_block_for_costs(shape, v_min_offsets, costs);
}

}  // namespace

ScheduleFamily v_min_family() {
  return {
      .name = "v-min",
      .title = "V-Min (controllable memory, 1/3 of 1F1B's)",
      .source = "Qi et al., Pipeline Parallelism with Controllable Memory, arXiv 2405.15362",
      .sequence_level = true,
      .fixed_chunks = 2,
      .split_backward = true,
      .placement = StagePlacement::v_shape,
      .in_flight_limit = v_min_in_flight,
      .deferred_weights = v_min_deferred,
      .own_simulation_slots = true,
      .generate = generate_v_min,
      .generate_for_costs = generate_v_min_for_costs,
  };
}

}  // namespace plait::schedule
