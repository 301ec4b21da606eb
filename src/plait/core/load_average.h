#pragma once
// The machine's load average (Linux /proc/loadavg: runnable tasks averaged over 1, 5 and 15
// minutes), which every benchmark prints beside its timings: a figure taken while another job
// held the cores is slow for that reason, and the load says so (docs/engine.md, "Benchmark").
#include <optional>
#include <string>

namespace plait {

struct LoadAverage {
  double one = 0, five = 0, fifteen = 0;
};

// nullopt where /proc/loadavg cannot be read (not Linux, or no /proc).
std::optional<LoadAverage> read_load_average();

// "load average 0.12 0.30 0.25 (1/5/15 min)", or "load average unavailable".
std::string load_average_text();

}  // namespace plait
