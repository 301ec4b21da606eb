#pragma once
// From a plan's choices to the schedule value the runtime runs: the heterogeneous pipeline (ranks
// are the used devices in ascending order), the unit costs it is scheduled for (the devices'
// profiles through sim::FlopsCostModel, messages over the cluster's links), and the schedule
// (schedule/heterogeneous_pipeline.h).
#include <memory>
#include <vector>

#include "plait/plan/plan.h"
#include "plait/schedule/heterogeneous_pipeline.h"
#include "plait/sim/flops_cost_model.h"
#include "plait/sim/link_matrix.h"

namespace plait::plan {

schedule::HeterogeneousPipeline heterogeneous_pipeline(const PlanChoice& choice);

// The cluster's links between the plan's ranks.
sim::LinkMatrix rank_links(const ClusterSpec& cluster, const std::vector<int>& rank_devices);

// The cost model of the plan's ranks with `type_profiles` (one per cluster device type).
std::shared_ptr<sim::FlopsCostModel> plan_cost_model(const PlanningProblem& problem, const PlanChoice& choice,
                                                     const std::vector<sim::DeviceProfile>& type_profiles,
                                                     const spec::SequencePartition& partition);

// Each rank's TP group (degree and ring link), in rank order.
std::vector<sim::RankTensorParallel> rank_tensor_parallel(const PlanningProblem& problem, const PlanChoice& choice);
// Bytes of one activation element: 2 (mixed16) or 4 (fp32).
double message_element_bytes(const PlanningProblem& problem);

// Bytes of one activation or gradient message of `segment`: b * s_j * H * element bytes.
double message_bytes(const PlanningProblem& problem, const PlanChoice& choice,
                     const spec::SequencePartition& partition, int segment);

// The schedule for `choice`, list-scheduled for `type_profiles` (problem.planning_profiles
// normally). Throws plait::Error when the family does not fit the shape.
schedule::Schedule build_schedule(const PlanningProblem& problem, const PlanChoice& choice,
                                  const std::vector<sim::DeviceProfile>& type_profiles);

}  // namespace plait::plan
