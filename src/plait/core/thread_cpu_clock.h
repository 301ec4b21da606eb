#pragma once
// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in seconds: what a piece of work on one
// thread cost the core it ran on, without the time the thread waited for a core. The emulated
// devices (runtime/device_emulator.h) pad by it so that ranks sharing cores do not slow each other.
#include <time.h>

namespace plait {

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace plait
