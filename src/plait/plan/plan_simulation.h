#pragma once
// A plan's prediction by simulation: its schedule run by the event simulator (sim/) with every
// rank's own device profile and the cluster's per-pair links, the memory model of the precision
// (memory_policy.h) with the peak activations the simulation replays, then each stage's gradient
// synchronisation after its last backward (gradient_sync.h). The step ends when the last stage
// has synchronised. The optimizer step itself is not timed (AdamW over a rank's parameter shard
// is memory-bound and short next to the pipeline; stated in docs/planner.md).
#include "plait/plan/plan.h"

namespace plait::plan {

// Simulates `schedule` (for `choice`) with the problem's real device profiles.
PlanPrediction simulate_plan(const PlanningProblem& problem, const PlanChoice& choice,
                             const schedule::Schedule& schedule);

// Fills in fits / over_memory from the devices' bytes and capacities.
void check_memory(const ClusterSpec& cluster, PlanPrediction& prediction);

}  // namespace plait::plan
