#pragma once
// The planner's fast analytic estimate of a plan (microseconds, so thousands of layouts can be
// tried; the simulator then ranks the best few):
//   work     = max over ranks of (micro-batches x the rank's F + B + W per micro-batch)
//   bubble   = sum over groups of their mean unit time - the largest (1F1B's (p-1) units when
//              all are alike, (p-1)/(k m) of the step with k segments since units are 1/k of a
//              micro-batch; Metis, ATC'24: (M-1) max E + sum E); zero-bubble families count
//              F + B - W per unit instead of F + B + W (ZB-H1's (p-1)(F+B-W)), ZB-V half that
//   messages = each boundary crossed twice on the critical path, and a rank's sends must fit
//              through its port: work >= its message bytes / bandwidth
//   sync     = each group's gradient synchronisation after its last backward, which comes that
//              group's share of the drain before the end (gradient_sync.h)
//   memory   = static bytes + reserve + the rank's in-flight limit (the schedule's own,
//              schedule::heterogeneous_in_flight_limits) x its mean unit activations (of the
//              worst cut with packed documents: planned_memory_partition)
// Unit times come from the same FLOPs cost model the simulator uses.
#include <vector>

#include "plait/plan/plan.h"
#include "plait/spec/sequence_partition.h"

namespace plait::plan {

// Seconds of one unit per layer and of the LM head, per device type, kind (F, B, W) and
// segment, for one micro-batch size and sequence partition; and each type's fixed cost per action
// (paid once per F, B, W or fused BW, whatever its layers).
class UnitTimes {
 public:
  UnitTimes(const PlanningProblem& problem, const std::vector<sim::DeviceProfile>& type_profiles,
            int microbatch_size, spec::SequencePartition partition);
  double layer(int type, int kind, int segment) const { return at(type, kind, segment, 0); }
  double head(int type, int kind, int segment) const { return at(type, kind, segment, 1); }
  // What recomputing one layer adds to its B (sim::FlopsCostModel::set_recompute: the layer's
  // forward without its K/V and output projections).
  double rebuild(int type, int segment) const {
    return rebuild_[static_cast<std::size_t>(type) * segments_ + segment];
  }
  double action_overhead(int type) const { return overhead_[static_cast<std::size_t>(type)]; }
  int segments() const { return segments_; }
  int microbatch_size() const { return microbatch_size_; }
  const spec::SequencePartition& partition() const { return partition_; }

 private:
  double at(int type, int kind, int segment, int part) const {
    return seconds_[((static_cast<std::size_t>(type) * 3 + kind) * segments_ + segment) * 2 + part];
  }
  int segments_, microbatch_size_;
  spec::SequencePartition partition_;
  std::vector<double> seconds_;
  std::vector<double> rebuild_;  // [type][segment]
  std::vector<double> overhead_;
};

PlanPrediction estimate_plan(const PlanningProblem& problem, const PlanChoice& choice, const UnitTimes& times);

}  // namespace plait::plan
