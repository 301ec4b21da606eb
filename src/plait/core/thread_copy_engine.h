#pragma once
// The CPU ranks' copy engine: one worker thread that runs the submitted copies in order, so a
// rank's compute thread goes on while its host <-> device traffic (here memcpy between the two
// emulated tiers) moves, as a GPU's copy engine runs beside its compute stream. Waiting blocks
// on a condition variable (the core goes to others), never spins.
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
  ThreadCopyEngine();
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
  std::thread worker_;
};

}  // namespace plait
