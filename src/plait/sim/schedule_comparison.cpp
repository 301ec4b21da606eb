#include "plait/sim/schedule_comparison.h"

#include "plait/core/error.h"
#include "plait/schedule/validator.h"

namespace plait::sim {

schedule::PipelineShape comparison_shape(const schedule::ScheduleFamily& family,
                                         const schedule::PipelineShape& base, int chunks,
                                         int segments) {
  schedule::PipelineShape shape = base;
  shape.segments = family.sequence_level ? segments : 1;
  shape.chunks = family.fixed_chunks > 0 ? family.fixed_chunks : chunks;
  return shape;
}

std::vector<ComparisonRow> compare_schedules(const SimulationConfig& base, int chunks, int segments) {
  std::vector<ComparisonRow> rows;
  for (const schedule::ScheduleFamily& family : schedule::schedule_families()) {
    ComparisonRow row;
    row.family = family.name;
    row.shape = comparison_shape(family, base.shape, chunks, segments);
    row.skipped = schedule::unsupported_reason(family, row.shape);
    if (row.skipped.empty()) {
      SimulationConfig config = base;
      config.shape = row.shape;
      try {
        row.report = simulate_family(config, family);
      } catch (const schedule::ScheduleViolationError&) {
        throw;  // a generator bug, not a constraint: never hide it
      } catch (const Error& e) {
        row.skipped = family.name + ": " + e.what();
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace plait::sim
