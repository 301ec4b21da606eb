#include "plait/runtime/memory_reports.h"

#include "plait/runtime/rank_gather.h"

namespace plait::runtime {

std::vector<MemoryReport> gather_memory_reports(comm::Communicator& world, const MemoryReport& mine) {
  std::vector<double> packed;
  for (std::size_t c = 0; c < kMemoryCategoryCount; ++c) {
    packed.push_back(static_cast<double>(mine.current[c]));
    packed.push_back(static_cast<double>(mine.peak[c]));
  }
  packed.push_back(static_cast<double>(mine.current_total));
  packed.push_back(static_cast<double>(mine.peak_total));
  std::vector<MemoryReport> reports;
  for (const std::vector<double>& p : gather_all(world, packed)) {
    MemoryReport r;
    for (std::size_t c = 0; c < kMemoryCategoryCount; ++c) {
      r.current[c] = static_cast<std::size_t>(p[2 * c]);
      r.peak[c] = static_cast<std::size_t>(p[2 * c + 1]);
    }
    r.current_total = static_cast<std::size_t>(p[2 * kMemoryCategoryCount]);
    r.peak_total = static_cast<std::size_t>(p[2 * kMemoryCategoryCount + 1]);
    reports.push_back(r);
  }
  return reports;
}

}  // namespace plait::runtime
