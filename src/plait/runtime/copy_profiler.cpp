#include "plait/runtime/copy_profiler.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "plait/core/thread_cpu_clock.h"

namespace plait::runtime {

double measure_copy_seconds_per_byte(std::size_t block_bytes, std::size_t span_bytes, int passes) {
  block_bytes = std::max<std::size_t>(block_bytes, 1);
  const std::size_t blocks = std::max<std::size_t>(span_bytes / block_bytes, 1);
  const std::size_t bytes = blocks * block_bytes;
  std::vector<unsigned char> from(bytes, 1), to(bytes);  // both written once: the pages are in
  std::vector<double> seconds;
  for (int p = 0; p <= std::max(passes, 1); ++p) {
    const double start = thread_cpu_seconds();
    for (std::size_t b = 0; b < blocks; ++b) std::memcpy(to.data() + b * block_bytes, from.data() + b * block_bytes, block_bytes);
    if (p > 0) seconds.push_back(thread_cpu_seconds() - start);
    from[static_cast<std::size_t>(p) % bytes] ^= to[bytes - 1];  // the copies are read: not elided
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2] / static_cast<double>(bytes);
}

}  // namespace plait::runtime
