// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", arXiv 2401.10241, sec. 6; code
// sail-sg/zero-bubble-pipeline-parallelism, zerobubble/scheduler/zbv.py): two chunks per rank in
// a V (chunk 0 of rank r is virtual stage r, chunk 1 is 2p-1-r, so the last stage sits on rank 0
// next to the first), backward split into B and W, and at most 1F1B's peak memory (p
// micro-batches = 2p chunk units per rank). The zero-bubble authors build the order with a
// greedy heuristic that simulates the profiled F, B, W and message costs (zbv.py); plait builds
// it with its own list scheduler (list_scheduler.h), under F = B = W by default (the textbook
// order `plait train` runs) or under given costs (generate_for_costs; the simulator keeps the
// faster of the two, docs/simulator.md). With F = B = W the exact makespan is within a few units
// of the lower bound 3m + (p-1)/2 (rank p-1 cannot start before the first forward reaches it);
// see docs/schedules.md for the pinned values. V-ZB of the controllable-memory paper (Qi et al.,
// arXiv 2405.15362) is this schedule; its sequence-level form is v-zb (v_zb.cpp), which shares
// this generator.
#include "plait/schedule/controllable_memory_v.h"
#include "plait/schedule/generators.h"
#include "plait/schedule/layout.h"
#include "plait/schedule/list_scheduler.h"

namespace plait::schedule {

// 1F1B's p micro-batches, in half-model chunk units (with k segments, k - 1 more per chunk).
int zero_bubble_v_in_flight(const PipelineShape& shape, int /*rank*/) {
  return 2 * (shape.stages + shape.segments - 1);
}

Schedule zero_bubble_v_for_costs(const PipelineShape& shape, const UnitCosts& costs) {
  ListSchedulerOptions options;
  options.split_backward = true;
  options.max_in_flight = zero_bubble_v_in_flight(shape, 0);
  options.unit_seconds = costs.unit_seconds;
  options.transfer_seconds = costs.transfer_seconds;
  options.reserve_whole_microbatches = static_cast<bool>(costs.unit_seconds);
  return list_schedule(v_shape_layout(shape.stages, shape.microbatches, shape.segments), options);
}

Schedule zero_bubble_v(const PipelineShape& shape) { return zero_bubble_v_for_costs(shape, UnitCosts{}); }

ScheduleFamily zb_v_family() {
  return {
      .name = "zb-v",
      .title = "ZB-V (zero bubble, V layout)",
      .source = "Qi et al., Zero Bubble Pipeline Parallelism, arXiv 2401.10241 sec. 6",
      .fixed_chunks = 2,
      .split_backward = true,
      .placement = StagePlacement::v_shape,
      .in_flight_limit = zero_bubble_v_in_flight,
      .generate = zero_bubble_v,
      .generate_for_costs = zero_bubble_v_for_costs,
  };
}

}  // namespace plait::schedule
