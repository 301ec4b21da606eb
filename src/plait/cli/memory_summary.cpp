#include "plait/cli/memory_summary.h"

#include <string>

namespace plait::cli {

void print_memory_summary(std::FILE* out, const MemoryReport& r) {
  std::fprintf(out, "peak memory by category:\n");
  for (std::size_t i = 0; i < kMemoryCategoryCount; ++i) {
    std::fprintf(out, "  %-16s %12s\n", std::string(kMemoryCategoryNames[i]).c_str(),
                 format_bytes(r.peak[i]).c_str());
  }
  std::fprintf(out, "  %-16s %12s  (peak of the sum)\n", "total", format_bytes(r.peak_total).c_str());
}

}  // namespace plait::cli
