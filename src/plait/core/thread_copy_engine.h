#pragma once
// The CPU ranks' copy engine: one worker thread that runs the submitted copies in order, so a
// rank's compute thread goes on while its host <-> device traffic (here memcpy between the two
// emulated tiers) moves, as a GPU's copy engine runs beside its compute stream. Waiting blocks
// on a condition variable (the core goes to others), never spins.
//
// Pacing: on a CPU rank host and device are the same memory, so a copy costs a memcpy, far
// below a real host link. Given `bytes_per_second` (the cluster's host link, DeviceEmulation::
// host_bytes_per_second), each copy takes at least bytes / bytes_per_second from its start: the
// worker sleeps out the rest after the memcpy, so the copy costs time but not a core, as a DMA
// engine's transfer does.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
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

  mutable std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<Copy> queue_;
  std::uint64_t submitted_ = 0, completed_ = 0;
  std::size_t bytes_ = 0;
  bool stopping_ = false;
  double bytes_per_second_;
  std::thread worker_;
};

}  // namespace plait
