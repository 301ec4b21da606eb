#include "plait/core/thread_copy_engine.h"

#include <algorithm>
#include <cstring>

namespace plait {

ThreadCopyEngine::ThreadCopyEngine(double bytes_per_second)
    : bytes_per_second_(bytes_per_second), worker_([this] { run(); }) {}

ThreadCopyEngine::~ThreadCopyEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  worker_.join();
}

CopyEvent ThreadCopyEngine::submit(void* dst, const void* src, std::size_t bytes) {
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({dst, src, bytes});
    sequence = ++submitted_;
  }
  work_.notify_one();
  return {sequence};
}

std::optional<ThreadCopyEngine::Clock::time_point> ThreadCopyEngine::pending_due(CopyEvent event) const {
  const Clock::time_point now = Clock::now();
  while (!due_.empty() && due_.front().at <= now) {
    passed_ = due_.front().sequence;
    due_.pop_front();
  }
  if (event.sequence <= passed_) return std::nullopt;
  // Its memcpy is done (the caller checked), so it is in due_; the due times are in order.
  for (const Due& d : due_) {
    if (d.sequence >= event.sequence) return d.at;
  }
  return std::nullopt;
}

bool ThreadCopyEngine::ready(CopyEvent event) const {
  std::lock_guard lock(mutex_);
  return completed_ >= event.sequence && !pending_due(event);
}

void ThreadCopyEngine::wait(CopyEvent event) {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return completed_ >= event.sequence; });
  // The bytes are there; the link's time may not have passed yet: sleep it out here, on the
  // waiter (a later copy's due time is never earlier, so one sleep is enough).
  if (const std::optional<Clock::time_point> due = pending_due(event)) {
    lock.unlock();
    std::this_thread::sleep_until(*due);
  }
}

void ThreadCopyEngine::synchronize() {
  std::uint64_t last = 0;
  {
    std::lock_guard lock(mutex_);
    last = submitted_;
  }
  wait(CopyEvent{last});
}

std::size_t ThreadCopyEngine::bytes_copied() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

void ThreadCopyEngine::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued is done
    const Copy copy = queue_.front();
    queue_.pop_front();
    lock.unlock();
    const Clock::time_point start = Clock::now();
    if (copy.bytes > 0) std::memcpy(copy.dst, copy.src, copy.bytes);
    lock.lock();
    ++completed_;
    bytes_ += copy.bytes;
    if (bytes_per_second_ > 0) {
      // The link serves the copies in order: this one from when the link is free and its memcpy
      // has begun, for bytes / bandwidth, and not before its bytes are there.
      const std::chrono::duration<double> link(static_cast<double>(copy.bytes) / bytes_per_second_);
      link_free_ = std::max(std::max(link_free_, start) + std::chrono::duration_cast<Clock::duration>(link),
                            Clock::now());
      due_.push_back({completed_, link_free_});
    } else {
      passed_ = completed_;
    }
    done_.notify_all();
  }
}

}  // namespace plait
