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

double comparison_memory_bytes(const SimulationConfig& base, int chunks, int segments) {
  double bytes = 0;
  for (const schedule::ScheduleFamily& family : schedule::schedule_families()) {
    const schedule::PipelineShape shape = comparison_shape(family, base.shape, chunks, segments);
    if (schedule::unsupported_reason(family, shape).empty()) bytes += simulation_memory_bytes(shape, base.record_events);
  }
  return bytes;
}

std::vector<ComparisonRow> compare_schedules(const SimulationConfig& base, int chunks, int segments) {
  std::vector<ComparisonRow> rows;
  const std::vector<schedule::ScheduleFamily>& families = schedule::schedule_families();
  for (const schedule::ScheduleFamily& family : families) {
    ComparisonRow row;
    row.family = family.name;
    row.shape = comparison_shape(family, base.shape, chunks, segments);
    row.skipped = schedule::unsupported_reason(family, row.shape);
    if (row.skipped.empty()) {
      SimulationConfig config = base;
      config.shape = row.shape;
      // Each schedule's phases, counted in schedules compared.
      const auto done = static_cast<std::int64_t>(rows.size()), total = static_cast<std::int64_t>(families.size());
      config.progress = [&base, done, total](const std::string& what, std::int64_t, std::int64_t) {
        report(base.progress, "comparing schedules, " + what, done, total);
      };
      if (!base.progress) config.progress = nullptr;
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
