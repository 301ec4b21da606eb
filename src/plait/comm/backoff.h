#pragma once
// How a rank waits for communication without burning the core it shares.
//
// OpenMPI progresses messages only inside MPI calls and has no blocking wait that sleeps in
// the kernel for shared-memory traffic, so MPI_Wait spins. With more ranks than cores (tests
// run 4-8 ranks on 2 cores; a pipeline stage waits through its bubbles) a spinning rank steals
// the time the rank it waits for needs. plait therefore waits with MPI_Test and, after each
// unsuccessful poll, pauses: first a few sched_yield calls (cheap, keep latency low when the
// message is about to land), then sleeps that double up to a cap (the waiting rank then costs
// a few polls per millisecond). See docs/comm.md for the measured latency and CPU cost.
#include <chrono>

namespace plait::comm {

struct BackoffPolicy {
  // Unsuccessful polls answered with sched_yield before the first sleep.
  int yields = 32;
  // The first sleep; each later sleep doubles, up to max_sleep.
  std::chrono::nanoseconds first_sleep{std::chrono::microseconds(2)};
  // The longest sleep: the most a wait adds to a message's latency once it has waited long.
  std::chrono::nanoseconds max_sleep{std::chrono::microseconds(100)};
};

class Backoff {
 public:
  explicit Backoff(const BackoffPolicy& policy = {}) : policy_(policy) {}

  // Called after each poll that found nothing: yields or sleeps as the policy says.
  void pause();

  // The pause the next call to pause() takes: zero while yielding, else the sleep.
  std::chrono::nanoseconds next_pause() const;

 private:
  BackoffPolicy policy_;
  int pauses_ = 0;
  std::chrono::nanoseconds sleep_{0};
};

}  // namespace plait::comm
