#pragma once
// One clock for every timed thing in plait (measured trace events, progress, benchmarks):
// CLOCK_MONOTONIC through std::chrono::steady_clock, in seconds. It is shared by all processes on
// one machine; across machines the runtime aligns ranks by reading it right after a barrier.
#include <chrono>

namespace plait {

inline double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace plait
