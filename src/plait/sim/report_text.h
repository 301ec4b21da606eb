#pragma once
// Plain-text reports of simulations (what `plait sim` prints).
#include <string>
#include <vector>

#include "plait/sim/schedule_comparison.h"
#include "plait/sim/simulation.h"

namespace plait::sim {

// Model, layout, segments (lengths and FLOPs), devices, step time, bubble, throughput, and a
// per-rank table of busy/idle time and memory.
std::string format_report(const SimulationConfig& config, const SimulationReport& report,
                          const std::string& title);

// The --compare table (step time, bubble, throughput, relative to 1F1B, peak memory) and the
// peak memory of every pipeline rank per schedule; skipped families with their reasons.
std::string format_comparison(const SimulationConfig& config, const std::vector<ComparisonRow>& rows);

// The lines every result starts with: model, sequence and device profile(s) with sources.
std::string format_setup(const SimulationConfig& config);

// "x.json" + "seq1f1b" -> "x.seq1f1b.json" (the --compare naming of timeline files).
std::string path_with_schedule(const std::string& path, const std::string& schedule);

}  // namespace plait::sim
