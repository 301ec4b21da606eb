#pragma once
// The simulator's cost model fed with this machine's measured engine timings (a SegmentProfile,
// unit_profiler.h): a unit of virtual stage v and segment j costs
//   layers(v) * layer[j] + [v = 0] embedding[j] + [v = last] head[j]
// for its kind (F, B, W; BW = B + W), B (and BW) plus recompute_layers(v) * layer[j].recompute
// (the rebuilds), times the rank's emulated slow-down; a message costs the
// link's latency + bytes / bandwidth. This is how `plait bench runtime speed` predicts a
// measured run's step time.
//
// Under tensor parallelism (plan.tensor_parallel = t > 1) the profile holds one rank's compute of
// a TP unit (unit_profiler.h), and each unit adds its TP collectives over the group's link, as
// the simulator charges them (sim/flops_cost_model.h, spec::tp_collectives: per layer 2
// all-gathers + 2 reduce-scatters in F and in B, 4 all-gathers in W, and the embedding's and
// head's, each a ring of (t-1) alpha + (t-1)/t x bytes / bandwidth; a recomputed layer's rebuild
// gathers its 2 column-parallel inputs again), not slowed by the rank's emulated slow-down: the
// link is not the device (device_emulator.h).
#include <vector>

#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/unit_profiler.h"
#include "plait/sim/cost_model.h"
#include "plait/sim/device_profile.h"

namespace plait::runtime {

class ProfileCostModel : public sim::CostModel {
 public:
  // Throws plait::Error if the profile's segments, micro-batch size or TP degree are not the
  // plan's. `tp_link`: the TP group's link (alpha per ring step, bus bandwidth), for t > 1.
  ProfileCostModel(const SegmentProfile& profile, const PipelinePlan& plan, sim::LinkProfile link,
                   sim::LinkProfile tp_link = {});

  double compute_seconds(int rank, schedule::ActionKind kind, std::int32_t microbatch,
                         std::int32_t segment, std::int32_t vstage) const override;
  double transfer_seconds(int src_rank, int dst_rank, std::int64_t bytes) const override;

 private:
  int segments_;
  std::vector<UnitTimes> units_;  // [vstage][segment], compute (times the slow-down)
  std::vector<UnitTimes> links_;  // [vstage][segment], TP collectives (not slowed); recompute = the rebuilds'
  std::vector<double> slowdown_;  // per rank
  sim::LinkProfile link_;
};

}  // namespace plait::runtime
