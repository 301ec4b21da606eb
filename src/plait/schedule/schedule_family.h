#pragma once
// Schedule families: each generator is one file (gpipe.cpp, one_f_one_b.cpp, ...) that describes
// itself (name, source, constraints) and produces a Schedule for a pipeline shape. The registry
// lists them in the order the CLI's --compare prints them.
#include <string>
#include <string_view>
#include <vector>

#include "plait/schedule/schedule.h"

namespace plait::schedule {

// What a generator is asked for: p ranks in a pipeline, v chunks per rank, m micro-batches,
// k sequence segments per micro-batch.
struct PipelineShape {
  int stages = 1;
  int chunks = 1;
  int microbatches = 1;
  int segments = 1;
};

struct ScheduleFamily {
  std::string name;    // CLI name: "gpipe", "1f1b", "interleaved", ...
  std::string title;   // "1F1B (PipeDream-Flush)"
  std::string source;  // where the schedule comes from (paper, repository)
  // Schedules (micro-batch, segment) units; otherwise segments must be 1.
  bool sequence_level = false;
  // v this family always uses (1 or 2), or 0 when it takes v >= 2 from the caller.
  int fixed_chunks = 1;
  // Why the family cannot produce `shape` beyond the common checks, or "" if it can; may be null.
  std::string (*unsupported)(const PipelineShape&) = nullptr;
  Schedule (*generate)(const PipelineShape&) = nullptr;
};

const std::vector<ScheduleFamily>& schedule_families();

// Null when no family has that name.
const ScheduleFamily* find_schedule_family(std::string_view name);

// "gpipe, 1f1b, interleaved, ..." for error messages and --help.
std::string schedule_family_names();

// "" when `family` can produce `shape`, else one sentence saying which constraint fails and why.
std::string unsupported_reason(const ScheduleFamily& family, const PipelineShape& shape);

// Generates, after checking the constraints (plait::Error with the reason if they fail).
Schedule generate_schedule(const ScheduleFamily& family, const PipelineShape& shape);
Schedule generate_schedule(std::string_view name, const PipelineShape& shape);

}  // namespace plait::schedule
