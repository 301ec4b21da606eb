#include "plait/runtime/device_emulator.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "plait/core/monotonic_clock.h"

namespace plait::runtime {

void DeviceEmulator::pad(double start, double end, const std::function<void()>& poll) const {
  if (slowdown_ <= 1.0) return;
  const double until = start + slowdown_ * (end - start);
  constexpr double kSlice = 0.5e-3;
  for (double now = monotonic_seconds(); now < until; now = monotonic_seconds()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(kSlice, until - now)));
    if (poll) poll();
  }
}

}  // namespace plait::runtime
