#pragma once
// The CPU ranks' copy engine: one worker thread that runs the submitted copies in order, so a
// rank's compute thread goes on while its host <-> device traffic (here memcpy between the two
// emulated tiers) moves, as a GPU's copy engine runs beside its compute stream. Waiting blocks
// on a condition variable (the core goes to others), never spins.
//
// Pacing: on a CPU rank host and device are the same memory, so a copy costs a memcpy, far
// below a real host link. Given `bytes_per_second` (the cluster's host link, DeviceEmulation::
// host_bytes_per_second), each copy holds the link for bytes / bytes_per_second from when the
// link is free and its memcpy has begun, and its event is not ready before that time, so the
// copy costs time but not a core, as a DMA engine's transfer does. The worker does not sleep the
// link time out: it notes each copy's due time and goes on with the next memcpy, and a waiter
// sleeps until the due time itself. (A worker that slept after every copy woke once per buffer,
// thousands of times a step with activation offload; each wake-up took a core from a compute
// thread: measured 15-19 us of the worker's CPU per copy beside the memcpy, up to 2.4 times the
// memcpy's own time, docs/runtime.md "Activation offload rows".)
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "plait/core/copy_engine.h"

namespace plait {

class ThreadCopyEngine final : public CopyEngine {
 public:
  // bytes_per_second 0: unpaced (memcpy speed).
  explicit ThreadCopyEngine(double bytes_per_second = 0);
  ~ThreadCopyEngine() override;  // finishes the queued copies, then joins
  ThreadCopyEngine(const ThreadCopyEngine&) = delete;
  ThreadCopyEngine& operator=(const ThreadCopyEngine&) = delete;

  CopyEvent submit(void* dst, const void* src, std::size_t bytes) override;
  bool ready(CopyEvent event) const override;
  void wait(CopyEvent event) override;
  void synchronize() override;
  std::size_t bytes_copied() const override;

 private:
  struct Copy {
    void* dst;
    const void* src;
    std::size_t bytes;
  };
  void run();

  using Clock = std::chrono::steady_clock;
  struct Due {
    std::uint64_t sequence;
    Clock::time_point at;
  };
  // The due time of `event`'s copy if it has not passed yet (its memcpy done); nullopt once ready.
  // Drops the passed entries. Caller holds the lock.
  std::optional<Clock::time_point> pending_due(CopyEvent event) const;

  mutable std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<Copy> queue_;
  // completed_: copies whose memcpy is done; of those, every sequence up to passed_ is ready, and
  // due_ holds the later ones' due times (non-decreasing: the link serves them in order).
  std::uint64_t submitted_ = 0, completed_ = 0;
  mutable std::uint64_t passed_ = 0;
  mutable std::deque<Due> due_;
  Clock::time_point link_free_{};
  std::size_t bytes_ = 0;
  bool stopping_ = false;
  double bytes_per_second_;
  std::thread worker_;
};

}  // namespace plait
