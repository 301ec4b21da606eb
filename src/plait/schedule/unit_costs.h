#pragma once
// What a unit of a schedule costs, for the orders that are built from costs (the list scheduler,
// heterogeneous pipelines, ZB-V's construction): seconds per (rank, kind, segment, virtual stage)
// and per message between two ranks. schedule/ knows nothing of FLOPs or devices; the simulator's
// cost model (sim/flops_cost_model.h) or a plan's profiles fill these in.
#include <cstdint>
#include <functional>

#include "plait/schedule/action.h"

namespace plait::schedule {

struct UnitCosts {
  // Seconds of one unit (kind F, B or W) of `segment` on virtual stage `vstage` on `rank`.
  std::function<double(int rank, ActionKind kind, std::int32_t segment, std::int32_t vstage)> unit_seconds;
  // Seconds for a unit's activation or gradient to go from src_rank to dst_rank; null: free.
  std::function<double(int src_rank, int dst_rank, std::int32_t segment)> transfer_seconds;
};

}  // namespace plait::schedule
