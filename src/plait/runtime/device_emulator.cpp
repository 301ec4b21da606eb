#include "plait/runtime/device_emulator.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "plait/core/monotonic_clock.h"

namespace plait::runtime {

double DeviceEmulator::padded_end(double start, double end, double cpu_seconds, double link_seconds) const {
  const double wall = end - start;
  const double alone = single_threaded_ ? std::min(wall, cpu_seconds) : wall;
  const double link = std::clamp(link_seconds, 0.0, alone);
  return start + slowdown_ * (alone - link) + link;
}

void DeviceEmulator::pad(double start, double end, double cpu_seconds, const std::function<void()>& poll,
                         double link_seconds) const {
  if (slowdown_ <= 1.0) return;
  const double until = padded_end(start, end, cpu_seconds, link_seconds);
  constexpr double kSlice = 0.5e-3;
  for (double now = monotonic_seconds(); now < until; now = monotonic_seconds()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(kSlice, until - now)));
    if (poll) poll();
  }
}

}  // namespace plait::runtime
