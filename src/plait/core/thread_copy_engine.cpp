#include "plait/core/thread_copy_engine.h"

#include <chrono>
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

bool ThreadCopyEngine::ready(CopyEvent event) const {
  std::lock_guard lock(mutex_);
  return completed_ >= event.sequence;
}

void ThreadCopyEngine::wait(CopyEvent event) {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return completed_ >= event.sequence; });
}

void ThreadCopyEngine::synchronize() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return completed_ >= submitted_; });
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
    const auto start = std::chrono::steady_clock::now();
    if (copy.bytes > 0) std::memcpy(copy.dst, copy.src, copy.bytes);
    if (bytes_per_second_ > 0) {
      const std::chrono::duration<double> link(static_cast<double>(copy.bytes) / bytes_per_second_);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(link));
    }
    lock.lock();
    ++completed_;
    bytes_ += copy.bytes;
    done_.notify_all();
  }
}

}  // namespace plait
