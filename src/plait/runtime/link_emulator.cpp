#include "plait/runtime/link_emulator.h"

#include <chrono>
#include <thread>

#include "plait/core/monotonic_clock.h"

namespace plait::runtime {

double LinkEmulator::seconds(std::size_t bytes) const {
  return active() ? latency_ + static_cast<double>(bytes) / bytes_per_second_ : 0.0;
}

double LinkEmulator::delay(std::size_t bytes) const {
  const double want = seconds(bytes);
  if (want <= 0) return 0;
  const double start = monotonic_seconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(want));
  return monotonic_seconds() - start;
}

}  // namespace plait::runtime
