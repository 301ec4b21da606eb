// V-ZB (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024, arXiv
// 2405.15362): the V building block with 1F1B's lifespan, p micro-batches of activations, and
// about zero bubble. It is the schedule the zero-bubble paper calls ZB-V (arXiv 2401.10241 sec. 6,
// plait's zb-v), so v-zb is its sequence-level form: (micro-batch, segment) units under the cap
// 2(p + k - 1) (controllable_memory_v.h), zb-v action for action with one segment.
#include "plait/schedule/controllable_memory_v.h"
#include "plait/schedule/generators.h"

namespace plait::schedule {

ScheduleFamily v_zb_family() {
  return {
      .name = "v-zb",
      .title = "V-ZB (controllable memory, 1F1B's; sequence-level ZB-V)",
      .source = "Qi et al., Pipeline Parallelism with Controllable Memory, arXiv 2405.15362",
      .sequence_level = true,
      .fixed_chunks = 2,
      .split_backward = true,
      .placement = StagePlacement::v_shape,
      .in_flight_limit = zero_bubble_v_in_flight,
      .one_segment_twin = "zb-v",
      .own_simulation_slots = true,
      .generate = zero_bubble_v,
      .generate_for_costs = zero_bubble_v_for_costs,
  };
}

}  // namespace plait::schedule
