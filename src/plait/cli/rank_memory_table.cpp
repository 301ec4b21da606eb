#include "plait/cli/rank_memory_table.h"

#include <string>

namespace plait::cli {
namespace {

// Job rank r's rank in the schedule, and its label: "r", or "s.i" (schedule rank s, TP rank i)
// under tensor parallelism.
std::size_t scheduled(const runtime::PipelinePlan& plan, std::size_t r) {
  return static_cast<std::size_t>(plan.schedule_rank_of(static_cast<int>(r)));
}
std::string label(const runtime::PipelinePlan& plan, std::size_t r) { return plan.job_rank_label(static_cast<int>(r)); }

}  // namespace

void print_rank_memory_table(std::FILE* out, const runtime::PipelinePlan& plan,
                             const std::vector<MemoryReport>& reports) {
  std::fprintf(out, "peak memory by rank and category (measured; total = peak of the sum):\n");
  std::fprintf(out, "  %-5s %-8s", "rank", "stages");
  for (std::string_view name : kMemoryCategoryNames) std::fprintf(out, " %15s", std::string(name).c_str());
  std::fprintf(out, " %12s  %s\n", "total", "capacity");
  for (std::size_t r = 0; r < reports.size(); ++r) {
    std::string stages;
    for (std::int32_t v : plan.schedule.layout.rank_vstages[scheduled(plan, r)]) {
      stages += (stages.empty() ? "" : ",") + std::to_string(v);
    }
    std::fprintf(out, "  %-5s %-8s", label(plan, r).c_str(), stages.c_str());
    for (std::size_t c = 0; c < kMemoryCategoryCount; ++c) {
      std::fprintf(out, " %15s", format_bytes(reports[r].peak[c]).c_str());
    }
    const auto& capacity = plan.devices[scheduled(plan, r)].memory_bytes;
    std::fprintf(out, " %12s  %s\n", format_bytes(reports[r].peak_total).c_str(),
                 capacity ? format_bytes(*capacity).c_str() : "-");
  }
}

void print_host_memory_table(std::FILE* out, const runtime::PipelinePlan& plan,
                             const std::vector<MemoryReport>& reports) {
  bool used = false;
  for (const MemoryReport& r : reports) used = used || r.peak_total > 0;
  if (!used) return;
  // Activations (and K/V): activation offload's units between their F and B.
  constexpr MemoryCategory kHostCategories[] = {MemoryCategory::kParameters, MemoryCategory::kOptimizerState,
                                                MemoryCategory::kGradients, MemoryCategory::kActivations,
                                                MemoryCategory::kKVCache};
  std::fprintf(out, "host tier peak by rank and category (measured; offloaded state):\n");
  std::fprintf(out, "  %-5s", "rank");
  for (MemoryCategory c : kHostCategories) std::fprintf(out, " %15s", std::string(name_of(c)).c_str());
  std::fprintf(out, " %12s  %s\n", "total", "capacity");
  for (std::size_t r = 0; r < reports.size(); ++r) {
    std::fprintf(out, "  %-5s", label(plan, r).c_str());
    for (MemoryCategory c : kHostCategories) {
      std::fprintf(out, " %15s", format_bytes(reports[r].peak[static_cast<std::size_t>(c)]).c_str());
    }
    const auto& capacity = plan.devices[scheduled(plan, r)].host_memory_bytes;
    std::fprintf(out, " %12s  %s\n", format_bytes(reports[r].peak_total).c_str(),
                 capacity ? format_bytes(*capacity).c_str() : "-");
  }
}

}  // namespace plait::cli
