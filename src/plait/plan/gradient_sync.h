#pragma once
// Time to synchronise a stage's gradients across its data-parallel group after its last
// backward (the runtime reduces once the step's gradients are final). A ring over the group's
// devices in device order (machine by machine, so it leaves each machine once), as Zorse's
// planner models collectives (benson-guo/zorse, zorse_planner: 1.15 x the sum over ring steps of
// the slowest neighbour transfer of S/n bytes): 2(n-1) steps of S/n bytes at the ring's slowest
// link, plus a latency per step. S is the bytes per parameter the group's collectives move under
// its sharding policy (MemoryPolicy::sync_bytes_per_parameter) times the stage's parameters; an
// offloaded group adds its shard's copies to and from the host tier. A tied embedding adds
// one more synchronisation of its V x H gradient across the first and last stages' devices.
#include <vector>

#include "plait/plan/memory_policy.h"
#include "plait/plan/plan.h"
#include "plait/sim/memory_model.h"

namespace plait::plan {

// 1.15 * (n-1)/n * bytes / slowest ring link + 2(n-1) * its latency; 0 for one device.
double ring_sync_seconds(const ClusterSpec& cluster, const std::vector<int>& devices, double bytes);

// Seconds of each group's synchronisation (choice.groups order).
std::vector<double> group_sync_seconds(const PlanningProblem& problem, const PlanChoice& choice,
                                       const sim::MemoryModel& memory, const MemoryPolicy& policy);

}  // namespace plait::plan
