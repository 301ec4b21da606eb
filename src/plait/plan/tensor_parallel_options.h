#pragma once
// The tensor-parallel degrees a stage group can run (docs/planner.md, "Tensor parallelism"): a
// group of devices becomes ranks that are TP groups of t consecutive devices of one type inside
// one machine (the fast link Megatron-LM and torchtitan put TP on), t in {1, 2, 4, 8} dividing
// the machine's devices of that type, and the model split over t (spec::check_tensor_parallel).
#include <vector>

#include "plait/plan/plan.h"

namespace plait::plan {

struct TpOption {
  int degree = 1;
  std::vector<int> leads;  // one per rank: the first device of its TP group
  std::vector<int> kinds;  // each rank's kind (PlanningProblem::kind, UnitTimes' row)
};

// The degrees a search tries when it is given none (PlannerOptions::tensor_parallel empty): 1, 2,
// 4, 8 on a real cluster; 1 on an emulated one, whose ranks' links are shared memory, not a
// machine's NVLink (plait plan --tp opts in).
std::vector<int> default_tensor_parallel_degrees(const ClusterSpec& cluster);

// The options of a group's devices among the `allowed` degrees, t = 1 first (always possible),
// then ascending t: each machine-and-type run of the group splits into TP groups of t
// consecutive devices and t divides that machine's devices of the type.
std::vector<TpOption> tp_options(const PlanningProblem& problem, const std::vector<int>& devices,
                                 const std::vector<int>& allowed);

}  // namespace plait::plan
