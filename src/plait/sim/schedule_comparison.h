#pragma once
// --compare: every schedule family on the same model, sequence and devices. Micro-batch-level
// families run with k = 1 and sequence-level ones with the requested k; interleaved families use
// the requested v, ZB-V its fixed 2, the rest 1. Families whose constraints fail are skipped with
// the reason.
#include <optional>
#include <string>
#include <vector>

#include "plait/sim/simulation.h"

namespace plait::sim {

struct ComparisonRow {
  std::string family;
  schedule::PipelineShape shape;
  std::optional<SimulationReport> report;  // empty when skipped
  std::string skipped;                     // why, when skipped
};

// base.shape gives p and m; chunks and segments are the requested v and k.
std::vector<ComparisonRow> compare_schedules(const SimulationConfig& base, int chunks, int segments);

// What compare_schedules holds in memory: every compared schedule's report is kept, so the sum
// of simulation_memory_bytes over the families it would simulate.
double comparison_memory_bytes(const SimulationConfig& base, int chunks, int segments);

// The shape a family runs with under --compare.
schedule::PipelineShape comparison_shape(const schedule::ScheduleFamily& family,
                                         const schedule::PipelineShape& base, int chunks,
                                         int segments);

}  // namespace plait::sim
