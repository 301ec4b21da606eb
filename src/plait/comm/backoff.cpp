#include "plait/comm/backoff.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace plait::comm {

std::chrono::nanoseconds Backoff::next_pause() const {
  if (pauses_ < policy_.yields) return std::chrono::nanoseconds(0);
  if (sleep_.count() == 0) return std::min(policy_.first_sleep, policy_.max_sleep);
  return std::min(sleep_ * 2, policy_.max_sleep);
}

void Backoff::pause() {
  const std::chrono::nanoseconds pause = next_pause();
  ++pauses_;
  if (pause.count() == 0) {
    sched_yield();
    return;
  }
  sleep_ = pause;
  std::this_thread::sleep_for(pause);
}

}  // namespace plait::comm
